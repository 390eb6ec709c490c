"""The expansion of a PersonaPack / Ensemble into Agents and SympoziumSchedules, as Sympozium's controller builds
them, without a cluster (the bridge's reconciling of it is in tests/e2e/test_personas.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.base import FieldProblem
from models.personas import ANNOTATION_STAMPED, expand, ignored_fields, interval_to_cron, read_pack

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium"


def _load(name: str, *, enabled: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    obj["metadata"].update(namespace="team", uid="uid-1", generation=3)
    obj["spec"]["enabled"] = enabled
    return obj


def test_an_ensemble_stamps_one_agent_per_persona_left_in_and_schedules_only_where_a_clock_starts_it() -> None:
    stamp = expand(read_pack("Ensemble", _load("ensemble.yaml")))
    # observer is excluded; checker is the target of a sequential edge, so its predecessor starts it, not a clock.
    assert [a["metadata"]["name"] for a in stamp.agents] == ["release-crew-writer", "release-crew-checker"]
    assert [s["metadata"]["name"] for s in stamp.schedules] == ["release-crew-writer-schedule"]
    assert [i.wire() for i in stamp.installed] == [
        {"name": "writer", "instanceName": "release-crew-writer", "scheduleName": "release-crew-writer-schedule"},
        {"name": "checker", "instanceName": "release-crew-checker"}]
    owner = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Ensemble", "name": "release-crew", "uid": "uid-1",
             "controller": True, "blockOwnerDeletion": True}
    for obj in (*stamp.agents, *stamp.schedules):
        assert obj["metadata"]["namespace"] == "team"
        assert obj["metadata"]["ownerReferences"] == [owner]
        assert obj["metadata"]["labels"]["sympozium.ai/ensemble"] == "release-crew"


def test_a_persona_agent_carries_its_hooks_model_and_the_pack_settings_it_overrides() -> None:
    writer = expand(read_pack("Ensemble", _load("ensemble.yaml"))).agents[0]
    assert writer["metadata"]["labels"] == {"sympozium.ai/ensemble": "release-crew",
                                            "sympozium.ai/agent-config": "writer", "sympozium.ai/provider": "openai"}
    spec = writer["spec"]
    d = spec["agents"]["default"]
    assert d["model"] == "gpt-4o-mini"
    assert d["baseURL"] == "http://models.internal:8001/v1"  # the persona's wins over the pack's
    assert d["providerHeaders"] == {"X-Route": "release", "X-Team": "writers"}
    assert d["providerHeadersSecretRef"] == "writer-headers"
    assert d["lifecycle"]["preRun"][0]["name"] == "fetch-changes"
    assert d["lifecycle"]["rbac"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
    assert d["env"] == {"RELEASE_TRAIN": "2.4"} and d["runTimeout"] == "20m"
    assert d["subagents"] == {"maxDepth": 1, "maxConcurrent": 2, "maxChildrenPerAgent": 2}
    assert d["agentSandbox"] == {"enabled": False, "runtimeClass": "gvisor"}
    assert spec["authRefs"] == [{"provider": "openai", "secret": "release-crew-openai-key"}]
    # mcp-bridge marks a sidecar, not a SkillPack; the persona's params replace the pack's for that skill.
    assert spec["skills"] == [{"skillPackRef": "repo-tools", "params": {"repo": "example/shop-docs"}}]
    assert spec["policyRef"] == "default-policy"
    assert spec["systemPrompt"] == spec["memory"]["systemPrompt"] == "You write release notes from merged changes.\n"
    assert spec["memory"] == {"enabled": True, "maxSizeKB": 128, "autoStore": True,
                              "systemPrompt": spec["systemPrompt"]}
    assert spec["channels"] == [{"type": "slack", "configRef": {"secret": "writer-slack-token"},
                                 "accessControl": {"allowedChats": ["C0WRITERS"]}, "triggers": {"start": ["!notes"]},
                                 "slack": {"threading": False}, "volumes": [{"name": "slack-ca",
                                                                              "configMap": {"name": "slack-ca"}}],
                                 "volumeMounts": [{"name": "slack-ca", "mountPath": "/etc/slack-ca",
                                                   "readOnly": True}]}]
    assert spec["volumes"] == [{"name": "style-guide", "configMap": {"name": "style-guide"}}]


def test_a_persona_without_settings_gets_the_pack_defaults() -> None:
    checker = expand(read_pack("Ensemble", _load("ensemble.yaml"))).agents[1]
    spec = checker["spec"]
    assert spec["agents"]["default"] == {"model": "gpt-4o", "baseURL": "http://models.internal:8000/v1",
                                         "providerHeaders": {"X-Route": "release"},
                                         "providerHeadersSecretRef": "release-crew-headers",
                                         "agentSandbox": {"enabled": False, "runtimeClass": "gvisor"}}
    assert spec["authRefs"] == [{"provider": "openai", "secret": "release-crew-openai-key"}]
    assert spec["memory"]["autoStore"] is False  # the pack's autoStoreMemory
    assert "skills" not in spec and "lifecycle" not in spec["agents"]["default"]


def test_a_schedule_gets_the_team_objective_a_staggered_cron_and_its_first_tick() -> None:
    sched = expand(read_pack("Ensemble", _load("ensemble.yaml"))).schedules[0]
    assert sched["metadata"]["labels"] == {"sympozium.ai/ensemble": "release-crew", "sympozium.ai/agent-config": "writer"}
    assert sched["spec"] == {
        "agentRef": "release-crew-writer", "schedule": "0 */6 * * *",
        "task": "TEAM OBJECTIVE: Ship version 2.4 this week.\n\nYOUR ROLE TASK: Draft notes for what merged since "
                "the last run.",
        "type": "scheduled", "concurrencyPolicy": "Forbid", "includeMemory": True, "firstTick": "afterInterval"}


@pytest.mark.parametrize(("interval", "index", "cron"), [
    ("30m", 0, "0/30 * * * *"), ("30m", 1, "2/30 * * * *"), ("1h", 3, "6 * * * *"), ("5m", 3, "1/5 * * * *"),
    ("1m", 4, "* * * * *"), ("24h", 0, "0 0 * * *"), ("*/7 * * * *", 2, "*/7 * * * *"), ("90s", 1, "2 * * * *"),
])
def test_an_interval_becomes_cron_staggered_two_minutes_per_persona(interval: str, index: int, cron: str) -> None:
    assert interval_to_cron(interval, index * 2) == cron


def test_a_persona_pack_is_read_as_the_ensemble_it_is_under_its_own_labels() -> None:
    stamp = expand(read_pack("PersonaPack", _load("personapack.yaml")))
    triager, fixer = stamp.agents
    assert triager["metadata"]["name"] == "ops-duo-triager" and fixer["metadata"]["name"] == "ops-duo-fixer"
    assert triager["metadata"]["labels"] == {"sympozium.ai/persona-pack": "ops-duo", "sympozium.ai/persona": "triager"}
    assert triager["metadata"]["ownerReferences"][0]["kind"] == "PersonaPack"
    assert triager["spec"]["agents"]["default"]["model"] == "claude-sonnet-4-20250514"
    assert triager["spec"]["skills"] == [{"skillPackRef": "k8s-ops", "params": {"cluster": "staging"}}]
    assert triager["spec"]["agents"]["default"]["lifecycle"]["preRun"][0]["name"] == "context"
    [sched] = stamp.schedules
    assert sched["metadata"]["labels"] == {"sympozium.ai/persona-pack": "ops-duo", "sympozium.ai/persona": "triager"}
    assert sched["spec"]["schedule"] == "0/30 * * * *" and sched["spec"]["type"] == "heartbeat"
    assert sched["spec"]["firstTick"] == "immediate"  # a PersonaPack has no firstTick: the schedule's default


def test_a_pack_that_is_not_enabled_stamps_nothing() -> None:
    stamp = expand(read_pack("Ensemble", _load("ensemble.yaml", enabled=False)))
    assert (stamp.agents, stamp.schedules, stamp.installed) == ([], [], [])


def test_an_edit_of_the_pack_changes_the_stamped_hash_and_nothing_else_does() -> None:
    obj = _load("ensemble.yaml")
    before = expand(read_pack("Ensemble", obj))
    again = expand(read_pack("Ensemble", copy.deepcopy(obj)))
    obj["spec"]["agentConfigs"][1]["model"] = "gpt-4.1"
    after = expand(read_pack("Ensemble", obj))
    h = [[a["metadata"]["annotations"][ANNOTATION_STAMPED] for a in s.agents] for s in (before, again, after)]
    assert h[0] == h[1]
    assert h[0][0] == h[2][0] and h[0][1] != h[2][1]


def test_what_cannot_work_here_is_refused_naming_the_field() -> None:
    obj = _load("ensemble.yaml")
    obj["spec"]["modelRef"] = "local-llama"
    with pytest.raises(FieldProblem, match=r"^spec\.modelRef: "):
        expand(read_pack("Ensemble", obj))
    obj = _load("personapack.yaml")
    obj["spec"]["personas"].append({"name": "fixer", "systemPrompt": "again"})
    with pytest.raises(FieldProblem, match=r"^spec\.personas: persona names must be unique: fixer"):
        expand(read_pack("PersonaPack", obj))
    obj = _load("ensemble.yaml")
    del obj["spec"]["agentConfigs"][0]["systemPrompt"]
    with pytest.raises(FieldProblem, match=r"^spec\.agentConfigs\[0\]\.systemPrompt: Field required"):
        read_pack("Ensemble", obj)


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"workflowType": "delegation"}, "spec.workflowType", "'delegation' needs at least one delegation relationship"),
    ({"stimulus": None}, "spec.stimulus", "a stimulus relationship needs a stimulus"),
    ({"stimulus": {"name": "go", "prompt": "Start."}}, "spec.relationships[0].source",
     "must be the stimulus' name 'go', not 'kickoff'"),
    ({"relationships": [{"source": "kickoff", "target": "writer", "type": "stimulus"},
                        {"source": "writer", "target": "editor", "type": "sequential"}]},
     "spec.relationships[1].target", "no persona is named 'editor'"),
    ({"relationships": [{"source": "kickoff", "target": "writer", "type": "stimulus"},
                        {"source": "writer", "target": "checker", "type": "sequential"},
                        {"source": "checker", "target": "writer", "type": "delegation"}]},
     "spec.relationships", "cycle of sequential/delegation edges: writer -> checker -> writer"),
])
def test_an_ensemble_graph_that_cannot_work_is_refused_naming_the_field(change: dict[str, Any], field: str,
                                                                       message: str) -> None:
    obj = _load("ensemble.yaml")
    obj["spec"].update(change)
    with pytest.raises(FieldProblem) as e:
        expand(read_pack("Ensemble", obj))
    assert (e.value.field, e.value.message) == (field, message)


def test_supervision_edges_may_form_a_cycle() -> None:
    obj = _load("ensemble.yaml")
    obj["spec"]["relationships"] += [{"source": "checker", "target": "writer", "type": "supervision"}]
    assert len(expand(read_pack("Ensemble", obj)).agents) == 2


def test_pack_settings_with_no_effect_here_are_named() -> None:
    obj = _load("ensemble.yaml")
    obj["spec"]["sharedMemory"]["enabled"] = True
    assert ignored_fields(read_pack("Ensemble", obj)) == [
        "spec.sharedMemory", "spec.stimulus", "spec.workflowType", "spec.relationships[0]",
        "spec.agentConfigs[0].memory.seeds", "spec.agentConfigs[0].toolPolicy"]
    pack = _load("personapack.yaml")
    assert ignored_fields(read_pack("PersonaPack", pack)) == [
        "spec.workflowType", "spec.relationships[0]", "spec.personas[0].memory.seeds", "spec.personas[0].toolPolicy",
        "spec.personas[0].webEndpoint"]
    plain = {"metadata": {"name": "p"}, "spec": {"personas": [{"name": "a", "systemPrompt": "x"}]}}
    assert ignored_fields(read_pack("PersonaPack", plain)) == []


def test_what_a_pack_stamps_out_carries_its_author_without_changing_its_hash() -> None:
    """The bridge writes the Agents and schedules, but they are the pack's author's: the admission webhook checks
    their grants against that author (issue 27, hole 3), and a tick's run is created in their name."""
    plain = expand(read_pack("Ensemble", _load("ensemble.yaml")))
    obj = _load("ensemble.yaml")
    obj["metadata"]["annotations"] = {"agentrun.dev/author": "alice", "agentrun.dev/author-groups": '["team-a"]'}
    stamp = expand(read_pack("Ensemble", obj))
    for made, before in zip((*stamp.agents, *stamp.schedules), (*plain.agents, *plain.schedules), strict=True):
        notes = made["metadata"]["annotations"]
        assert (notes["agentrun.dev/author"], notes["agentrun.dev/author-groups"]) == ("alice", '["team-a"]')
        assert notes[ANNOTATION_STAMPED] == before["metadata"]["annotations"][ANNOTATION_STAMPED]
        # A pack that records no author: the empty stamp (the bridge is nobody's author).
        assert before["metadata"]["annotations"]["agentrun.dev/author"] == ""
        assert "agentrun.dev/author-groups" not in before["metadata"]["annotations"]
