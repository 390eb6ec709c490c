"""The warnings-only webhook for SkillPacks, PersonaPacks, Ensembles and Models (`/admission/definitions`): it admits
every write and names the fields that have no effect here, as the bridge's FieldsIgnored condition does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.api.test_admission import G, V, app_state, review, webhook

__all__ = ["app_state", "webhook"]  # fixtures shared with test_admission

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium"


def definition_review(doc: dict[str, Any], resource: str, *, op: str = "CREATE") -> dict[str, Any]:
    body = review("team", doc, op=op, old=doc if op == "UPDATE" else None)
    body["request"]["resource"] = body["request"]["requestResource"] = {"group": G, "version": V, "resource": resource}
    body["request"]["kind"] = body["request"]["requestKind"] = {"group": G, "version": V, "kind": doc["kind"]}
    return body


async def admit(webhook: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await webhook.post("/admission/definitions", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["response"]
    assert out["uid"] == body["request"]["uid"] and out["allowed"] is True, out
    return out


async def test_each_kind_is_admitted_with_a_warning_per_field_without_effect(webhook: httpx.AsyncClient) -> None:
    pack = yaml.safe_load((FIXTURES / "skillpack.yaml").read_text())
    out = await admit(webhook, definition_review(pack, "skillpacks"))
    # The fixture sets every sidecar field but requiresServer (false); clusterRBAC and tools act.
    assert out["warnings"] == [f"{f}: has no effect here" for f in (
        "spec.runtimeRequirements", "spec.sidecar.secretRef", "spec.sidecar.secretMountPath",
        "spec.sidecar.hostAccess", "spec.sidecar.ports", "spec.sidecar.volumes", "spec.sidecar.volumeMounts")], out

    plain = {"apiVersion": f"{G}/{V}", "kind": "SkillPack", "metadata": {"name": "notes"},
             "spec": {"skills": [{"name": "notes", "content": "Write notes."}]}}
    assert "warnings" not in await admit(webhook, definition_review(plain, "skillpacks", op="UPDATE"))
    # A sidecar without a command runs the executor alone: its image's entrypoint does not run, and that is said.
    bare = {**plain, "spec": {"skills": [{"name": "notes", "content": "Write notes."}],
                              "sidecar": {"image": "ghcr.io/org/tools:1"}}}
    [note] = (await admit(webhook, definition_review(bare, "skillpacks")))["warnings"]
    assert note.startswith("spec.sidecar.command is not set: the sidecar runs agentrun's executor alone"), note

    for fixture, resource, expected in (
            ("personapack.yaml", "personapacks", ["spec.workflowType", "spec.relationships[0]",
                                                  "spec.personas[0].memory.seeds", "spec.personas[0].toolPolicy",
                                                  "spec.personas[0].webEndpoint"]),
            ("ensemble.yaml", "ensembles", ["spec.stimulus", "spec.workflowType", "spec.relationships[0]",
                                            "spec.agentConfigs[0].memory.seeds", "spec.agentConfigs[0].toolPolicy"])):
        doc = yaml.safe_load((FIXTURES / fixture).read_text())
        warned = (await admit(webhook, definition_review(doc, resource)))["warnings"]
        assert warned == [f"{f}: has no effect here" for f in expected], warned

    model = yaml.safe_load((FIXTURES / "model.yaml").read_text())
    [said] = (await admit(webhook, definition_review(model, "models")))["warnings"]
    assert said.startswith("Model: agentrun does not download or serve models"), said


async def test_a_malformed_spec_is_admitted_without_warnings_and_another_kind_is_a_bad_request(
        webhook: httpx.AsyncClient) -> None:
    broken = {"apiVersion": f"{G}/{V}", "kind": "SkillPack", "metadata": {"name": "x"}, "spec": {"skills": "many"}}
    assert "warnings" not in await admit(webhook, definition_review(broken, "skillpacks"))
    body = definition_review({"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "r"}}, "agentruns")
    r = await webhook.post("/admission/definitions", json=body)
    assert r.status_code == 400 and "this webhook admits sympozium.ai skillpacks" in r.text, r.text
