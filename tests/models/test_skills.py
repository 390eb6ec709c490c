"""Skills on runs and Agents (strings or {skillPackRef}), the SkillPack schema, and resolution against SkillPacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from models.agent import normalize_agent
from models.agentrun import AgentRunSpec, SkillRef
from models.base import FieldProblem, PolicyViolation, parse
from models.evaluate import evaluate_run
from models.skillpack import SkillPackSpec, skill_files, skill_pack_notes, skill_pack_warnings
from models.skills import SIDECAR_CPU, SIDECAR_MEMORY, sidecar_account, sidecar_container

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium" / "skillpack.yaml"


def pack(name: str, *, sidecar: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"skills": [{"name": "s1", "content": "do it"}]}
    if sidecar is not None:
        spec["sidecar"] = sidecar
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SkillPack",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def reader(objects: dict[tuple[str, str], dict[str, Any]]) -> Any:
    async def read(plural: str, name: str) -> dict[str, Any] | None:
        return objects.get((plural, name))
    return read


AGENT: dict[str, Any] = {"metadata": {"name": "helper", "namespace": "ns"}, "spec": {"agents": {"default": {"model": "m"}}}}


def run(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r1", "namespace": "ns", "uid": "u1"},
            "spec": {"agentRef": "helper", "task": "t", **spec}}


def test_skills_are_accepted_as_names_or_skill_pack_refs_on_runs_and_agents() -> None:
    spec = AgentRunSpec.model_validate({"skills": ["k8s-ops", {"skillPackRef": "review", "params": {"a": "b"}},
                                                   {"configMapRef": "mine"}]})
    assert spec.skills == [SkillRef(skill_pack_ref="k8s-ops"), SkillRef(skill_pack_ref="review", params={"a": "b"}),
                           SkillRef(config_map_ref="mine")]
    agent = normalize_agent({**AGENT, "spec": {**AGENT["spec"], "skills": ["k8s-ops", {"skillPackRef": "x"}]}})
    assert [s.skill_pack_ref for s in agent.skills] == ["k8s-ops", "x"]


def test_a_malformed_skill_names_the_field() -> None:
    with pytest.raises(FieldProblem, match=r"spec\.skills\[1\]"):
        parse(AgentRunSpec, {"skills": ["ok", 7]}, "spec")


def test_the_fixture_parses_with_every_field_and_gives_one_file_per_skill() -> None:
    doc = yaml.safe_load(FIXTURE.read_text())
    spec = parse(SkillPackSpec, doc["spec"], "spec")
    assert spec.wire() == doc["spec"]  # nothing lost in the model (what the CRD stores is tested against localkube)
    files = skill_files(spec)
    assert sorted(files) == ["notes.md", "triage.md"]
    assert files["triage.md"].startswith("# triage\n\n> How to triage a failing workload\n\n# Triage")
    assert files["notes.md"] == "Write findings to /workspace/notes.md."  # no description: the content alone
    # clusterRBAC (a per-run ClusterRole) and tools (offered to the model) act now.
    assert skill_pack_warnings(spec) == [
        "spec.runtimeRequirements", "spec.sidecar.secretRef",
        "spec.sidecar.secretMountPath", "spec.sidecar.hostAccess", "spec.sidecar.ports", "spec.sidecar.volumes",
        "spec.sidecar.volumeMounts"]
    assert skill_pack_notes(spec) == [], "it has a command"


def test_a_skill_pack_without_skills_or_a_sidecar_without_image_names_the_field() -> None:
    with pytest.raises(FieldProblem, match=r"^spec\.skills: Field required"):
        parse(SkillPackSpec, {}, "spec")
    with pytest.raises(FieldProblem, match=r"^spec\.sidecar\.image: Field required"):
        parse(SkillPackSpec, {"skills": [], "sidecar": {}}, "spec")


async def test_a_run_resolves_its_packs_with_sidecar_defaults_and_skips_a_missing_one() -> None:
    objects = {("agents", "helper"): AGENT,
               ("skillpacks", "plain"): pack("plain"),
               ("skillpacks", "tools"): pack("tools", sidecar={
                   "image": "tools:1", "rbac": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
                   "env": [{"name": "A", "value": "1"}]})}
    # "skillpack-tools" is the ConfigMap's name Sympozium also accepts for the pack; "absent" does not exist.
    ev = await evaluate_run(run(skills=["plain", {"skillPackRef": "skillpack-tools"}, "absent", "plain"]),
                            read=reader(objects), default_image="agent:1")
    assert ev.problem is None and ev.resolved is not None
    packs = ev.resolved.skill_packs
    assert [(p.name, p.config_map) for p in packs] == [("plain", "plain"), ("tools", "tools")]
    assert packs[0].sidecar is None
    sc = packs[1].sidecar
    assert sc is not None
    assert (sc.image, sc.command, sc.cpu, sc.memory, sc.mount_workspace) == (
        "tools:1", [], SIDECAR_CPU, SIDECAR_MEMORY, True), "no command: the executor alone, in the container"
    assert [(r.api_groups, r.resources, r.verbs) for r in sc.rules] == [([""], ["pods"], ["list"])]
    assert [p.name for p in ev.resolved.sidecars] == ["tools"]


async def test_a_run_without_skills_gets_its_agents() -> None:
    agent = {**AGENT, "spec": {**AGENT["spec"], "skills": [{"skillPackRef": "plain"}]}}
    ev = await evaluate_run(run(), read=reader({("agents", "helper"): agent, ("skillpacks", "plain"): pack("plain")}),
                            default_image="agent:1")
    assert ev.resolved is not None and [p.name for p in ev.resolved.skill_packs] == ["plain"]


async def test_a_sidecars_rbac_passes_the_lifecycle_policys_denials() -> None:
    agent = {**AGENT, "spec": {**AGENT["spec"], "policyRef": "strict"}}
    policy = {"metadata": {"name": "strict", "namespace": "ns"},
              "spec": {"lifecyclePolicy": {"deniedResources": ["secrets"]}}}
    tools = pack("tools", sidecar={"image": "t:1", "rbac": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
    ev = await evaluate_run(run(skills=["tools"]), default_image="agent:1", read=reader({
        ("agents", "helper"): agent, ("sympoziumpolicies", "strict"): policy, ("skillpacks", "tools"): tools}))
    assert isinstance(ev.problem, PolicyViolation)
    assert ev.resolved is None, "a refused run must not start: the workflow fails a run without a resolved spec"
    assert str(ev.problem) == ('spec.skills[0].skillPackRef: SkillPack "tools" sidecar RBAC (spec.sidecar.rbac[1]) '
                               'access to "secrets" is denied by policy "strict", rule '
                               "lifecyclePolicy.deniedResources")


async def test_a_sidecar_image_must_come_from_an_allowed_registry() -> None:
    agent = {**AGENT, "spec": {**AGENT["spec"], "policyRef": "regs"}}
    policy = {"metadata": {"name": "regs", "namespace": "ns"},
              "spec": {"imagePolicy": {"allowedRegistries": ["registry.example/"]}}}
    objects = {("agents", "helper"): agent, ("sympoziumpolicies", "regs"): policy,
               ("skillpacks", "tools"): pack("tools", sidecar={"image": "docker.io/tools:1"})}
    ev = await evaluate_run(run(skills=["tools"]), default_image="registry.example/agent:1", read=reader(objects))
    assert isinstance(ev.problem, PolicyViolation)
    assert ev.resolved is None
    assert str(ev.problem) == ('spec.skills[0].skillPackRef: SkillPack "tools" sidecar image "docker.io/tools:1" is '
                               'not from a registry allowed by policy "regs", rule imagePolicy.allowedRegistries '
                               "(registry.example/)")


async def test_a_malformed_skill_pack_fails_the_run_naming_it() -> None:
    bad = {"metadata": {"name": "bad"}, "spec": {"skills": [{"name": "x"}]}}
    ev = await evaluate_run(run(skills=["bad"]), default_image="agent:1",
                            read=reader({("agents", "helper"): AGENT, ("skillpacks", "bad"): bad}))
    assert str(ev.problem) == 'SkillPack "bad" spec.skills[0].content: Field required'


def test_names_fit_kubernetes_limits() -> None:
    assert sidecar_container("tools") == "skill-tools"
    long = sidecar_container("p" * 80)
    assert len(long) == 63 and long.startswith("skill-ppp")
    assert sidecar_account("run1", "tools") == "sympozium-skill-tools-run1"
    assert len(sidecar_account("r" * 63, "p" * 253)) == 253
