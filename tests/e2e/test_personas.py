"""PersonaPacks and Ensembles end to end: applied with kubectl as upstream YAML, stamped out by the bridge into
Agents and SympoziumSchedules it owns, kept equal to the pack on edit, removed with it, and a persona's hooks
applied to a run of its Agent."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes.client.rest import ApiException

from tests.conftest import Kubectl
from tests.e2e.conftest import QUIET_CRON, Stack, agent_run
from tests.waiting import wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium"
ECHO = [{"provider": "echo", "secret": ""}]


def _missing(applied: Any, stored: Any, path: str = "") -> list[str]:
    """Every path of `applied` that `stored` lacks or holds differently (server defaults may add, never drop)."""
    if isinstance(applied, dict):
        if not isinstance(stored, dict):
            return [path]
        return [m for k, v in applied.items() for m in _missing(v, stored.get(k), f"{path}.{k}")]
    if isinstance(applied, list):
        if not isinstance(stored, list) or len(stored) != len(applied):
            return [path]
        return [m for i, (a, s) in enumerate(zip(applied, stored, strict=True)) for m in _missing(a, s, f"{path}[{i}]")]
    return [] if applied == stored else [path]


def _get(stack: Stack, ns: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return cast(dict[str, Any], stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", ns,
                                                                              plural, name))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def _status(stack: Stack, ns: str, plural: str, name: str) -> dict[str, Any]:
    return cast(dict[str, Any], (_get(stack, ns, plural, name) or {}).get("status") or {})


def _phase(stack: Stack, ns: str, plural: str, name: str, phase: str, *,
           when: Callable[[dict[str, Any]], bool] = lambda _s: True) -> dict[str, Any]:
    """The pack's status once it is in `phase` (and `when` holds of it)."""
    def probe() -> dict[str, Any] | None:
        status = _status(stack, ns, plural, name)
        return status if status.get("phase") == phase and when(status) else None
    return wait_for(probe, what=f"{plural} {ns}/{name} to be {phase}")


def _names(stack: Stack, ns: str, plural: str, selector: str) -> set[str]:
    items = cast(dict[str, Any], stack.custom.list_namespaced_custom_object(
        "sympozium.ai", "v1alpha1", ns, plural, label_selector=selector))["items"]
    return {o["metadata"]["name"] for o in items if not o["metadata"].get("deletionTimestamp")}


@pytest.mark.parametrize(("fixture", "plural"), [("ensemble.yaml", "ensembles"), ("personapack.yaml", "personapacks")])
def test_upstream_shaped_packs_apply_strictly_and_nothing_is_pruned(stack: Stack, namespace: str, kubectl: Kubectl,
                                                                    fixture: str, plural: str) -> None:
    text = (FIXTURES / fixture).read_text()
    done = kubectl("apply", "--validate=strict", "-n", namespace, "-f", "-", input=text)
    assert done.returncode == 0, done.stderr
    applied = yaml.safe_load(text)
    stored = json.loads(kubectl("get", plural, applied["metadata"]["name"], "-n", namespace, "-o", "json").stdout)
    assert _missing(applied["spec"], stored["spec"]) == []
    # Not enabled: a catalog entry, nothing stamped out, and the status says so.
    status = _phase(stack, namespace, plural, applied["metadata"]["name"], "Inactive")
    assert status["installedCount"] == 0
    # What only Sympozium's run-time machinery would do with (a stimulus, delegation, memory seeds) is named.
    ignored = next(c for c in status["conditions"] if c["type"] == "FieldsIgnored")
    assert (ignored["status"], ignored["reason"]) == ("True", "NoEffectHere")
    assert ignored["message"].startswith("no effect here: spec.") and ".memory.seeds" in ignored["message"]
    assert _names(stack, namespace, "agents", "") == set()
    # A field upstream does not define is refused by name.
    bad = text.replace("  category:", "  categroy:", 1)
    refused = kubectl("apply", "--validate=strict", "-n", namespace, "-f", "-", input=bad)
    assert refused.returncode != 0 and "categroy" in refused.stderr


def _persona_pack(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "PersonaPack", "metadata": {"name": "crew"},
            "spec": {"enabled": True, "authRefs": ECHO, "taskOverride": "Keep the lights on.", **spec}}


def test_a_persona_pack_stamps_out_agents_and_schedules_updates_them_and_removes_them(stack: Stack, namespace: str,
                                                                                     kubectl: Kubectl) -> None:
    ns = namespace
    hook = {"name": "brief", "image": "busybox:1.36",
            "command": ["sh", "-c", "mkdir -p /workspace/context && echo from the lead persona > "
                                    "/workspace/context/brief.txt"]}
    pack = _persona_pack(personas=[
        {"name": "lead", "systemPrompt": "You lead.", "model": "echo-1", "lifecycle": {"preRun": [hook]},
         "schedule": {"type": "scheduled", "cron": QUIET_CRON, "task": "Plan the day."}},
        {"name": "aide", "systemPrompt": "You help.", "model": "echo-1",
         "schedule": {"cron": QUIET_CRON, "task": "Tidy up."}},
    ])
    done = kubectl("apply", "--validate=strict", "-n", ns, "-f", "-", input=yaml.safe_dump(pack))
    assert done.returncode == 0, done.stderr
    uid = (_get(stack, ns, "personapacks", "crew") or {})["metadata"]["uid"]

    status = _phase(stack, ns, "personapacks", "crew", "Ready")
    assert status["personaCount"] == 2 and status["installedCount"] == 2
    assert status["installedPersonas"] == [
        {"name": "lead", "instanceName": "crew-lead", "scheduleName": "crew-lead-schedule"},
        {"name": "aide", "instanceName": "crew-aide", "scheduleName": "crew-aide-schedule"}]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Ready", "True")]
    lead = _get(stack, ns, "agents", "crew-lead")
    assert lead is not None
    assert lead["metadata"]["labels"] == {"sympozium.ai/persona-pack": "crew", "sympozium.ai/persona": "lead"}
    assert [(o["kind"], o["name"], o["uid"], o["controller"]) for o in lead["metadata"]["ownerReferences"]] == [
        ("PersonaPack", "crew", uid, True)]
    assert lead["spec"]["agents"]["default"]["lifecycle"]["preRun"][0]["name"] == "brief"
    assert lead["spec"]["authRefs"] == ECHO and lead["spec"]["systemPrompt"] == "You lead."
    sched = _get(stack, ns, "sympoziumschedules", "crew-lead-schedule")
    assert sched is not None
    assert sched["spec"]["agentRef"] == "crew-lead" and sched["spec"]["schedule"] == QUIET_CRON
    assert sched["spec"]["task"] == "TEAM OBJECTIVE: Keep the lights on.\n\nYOUR ROLE TASK: Plan the day."
    assert sched["metadata"]["ownerReferences"][0]["uid"] == uid
    # The bridge's schedule half takes the stamped schedule over like any other.
    wait_for(lambda: ((_get(stack, ns, "sympoziumschedules", "crew-lead-schedule") or {}).get("status") or {})
             .get("phase") == "Active", what="the stamped schedule to be Active")

    # The persona's preRun hook is its Agent's: it runs before a run of that Agent, which reads what it wrote.
    stack.create(ns, "agentruns", agent_run("by-lead", task="report", agent_ref="crew-lead"))
    run = stack.wait_phase(ns, "by-lead")
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert "context brief.txt: from the lead persona" in run["status"]["result"]

    # An edit: a persona's model and task change, one persona goes; the stamped objects follow.
    edited = _persona_pack(personas=[{**pack["spec"]["personas"][0], "model": "echo-2",
                                      "schedule": {"cron": QUIET_CRON, "task": "Plan the week."}}])
    done = kubectl("apply", "--validate=strict", "-n", ns, "-f", "-", input=yaml.safe_dump(edited))
    assert done.returncode == 0, done.stderr
    wait_for(lambda: (_get(stack, ns, "agents", "crew-lead") or {}).get("spec", {}).get("agents", {})
             .get("default", {}).get("model") == "echo-2", what="the lead Agent to follow the edit")
    wait_for(lambda: _names(stack, ns, "agents", "sympozium.ai/persona-pack=crew") == {"crew-lead"}
             and _names(stack, ns, "sympoziumschedules", "sympozium.ai/persona-pack=crew") == {"crew-lead-schedule"},
             what="the aide's Agent and schedule to be deleted")
    sched = _get(stack, ns, "sympoziumschedules", "crew-lead-schedule")
    assert sched is not None and sched["spec"]["task"].endswith("YOUR ROLE TASK: Plan the week.")
    assert sched["spec"]["type"] == "heartbeat"  # the persona schedule's default
    status = _phase(stack, ns, "personapacks", "crew", "Ready", when=lambda s: s["installedCount"] == 1)
    assert status["installedPersonas"] == [{"name": "lead", "instanceName": "crew-lead",
                                            "scheduleName": "crew-lead-schedule"}]

    # The pack is the source of truth: an edit of its Agent is put back (by the resync, every 2 s here), while a
    # schedule paused by hand stays paused (suspend cannot be said on a pack).
    for plural, name, patch in (("agents", "crew-lead", {"spec": {"agents": {"default": {"model": "by-hand"}}}}),
                                ("sympoziumschedules", "crew-lead-schedule", {"spec": {"suspend": True,
                                                                                       "task": "by hand"}})):
        stack.custom.patch_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, plural, name, patch)
    wait_for(lambda: (_get(stack, ns, "agents", "crew-lead") or {})["spec"]["agents"]["default"]["model"] == "echo-2"
             and (_get(stack, ns, "sympoziumschedules", "crew-lead-schedule") or {})["spec"]["task"] != "by hand",
             timeout=20, what="the edits by hand to be put back")
    sched = _get(stack, ns, "sympoziumschedules", "crew-lead-schedule")
    assert sched is not None and sched["spec"]["suspend"] is True
    assert sched["spec"]["task"].endswith("YOUR ROLE TASK: Plan the week.")

    # Deleted: Kubernetes' garbage collector removes what it owned (the schedule once its Temporal Schedule is gone).
    assert kubectl("delete", "personapack", "crew", "-n", ns).returncode == 0
    wait_for(lambda: _get(stack, ns, "agents", "crew-lead") is None
             and _get(stack, ns, "sympoziumschedules", "crew-lead-schedule") is None,
             timeout=60, what="the stamped Agent and schedule to be gone")


def test_an_ensemble_is_stamped_out_once_enabled_and_removed_with_its_agents(stack: Stack, namespace: str,
                                                                             kubectl: Kubectl) -> None:
    ns = namespace
    ensemble = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Ensemble", "metadata": {"name": "duo"},
                "spec": {"authRefs": ECHO, "workflowType": "pipeline",
                         "relationships": [{"source": "first", "target": "second", "type": "sequential"}],
                         "agentConfigs": [
                             {"name": "first", "systemPrompt": "You go first.", "model": "echo-1",
                              "schedule": {"type": "sweep", "cron": QUIET_CRON, "task": "Start.",
                                           "firstTick": "afterInterval"}},
                             {"name": "second", "systemPrompt": "You go next.", "model": "echo-1",
                              "schedule": {"cron": QUIET_CRON, "task": "Follow."}}]}}
    done = kubectl("apply", "--validate=strict", "-n", ns, "-f", "-", input=yaml.safe_dump(ensemble))
    assert done.returncode == 0, done.stderr
    _phase(stack, ns, "ensembles", "duo", "Inactive")
    assert _names(stack, ns, "agents", "sympozium.ai/ensemble=duo") == set()

    # Activated the way Sympozium's docs do it.
    patched = kubectl("patch", "ensemble", "duo", "-n", ns, "--type=merge", "-p", '{"spec":{"enabled":true}}')
    assert patched.returncode == 0, patched.stderr
    status = _phase(stack, ns, "ensembles", "duo", "Ready")
    # The second persona's predecessor starts it, never a clock: no schedule of its own.
    assert status["installedPersonas"] == [{"name": "first", "instanceName": "duo-first",
                                            "scheduleName": "duo-first-schedule"},
                                           {"name": "second", "instanceName": "duo-second"}]
    assert _names(stack, ns, "agents", "sympozium.ai/ensemble=duo") == {"duo-first", "duo-second"}
    assert _names(stack, ns, "sympoziumschedules", "sympozium.ai/ensemble=duo") == {"duo-first-schedule"}
    first = _get(stack, ns, "agents", "duo-first")
    assert first is not None and first["metadata"]["labels"]["sympozium.ai/agent-config"] == "first"
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Ensemble"
    sched = _get(stack, ns, "sympoziumschedules", "duo-first-schedule")
    assert sched is not None and sched["spec"]["firstTick"] == "afterInterval" and sched["spec"]["type"] == "sweep"

    # An edit that cannot work is refused by name, and what was stamped out stays (and stays listed).
    bad = kubectl("patch", "ensemble", "duo", "-n", ns, "--type=merge", "-p", '{"spec":{"workflowType":"delegation"}}')
    assert bad.returncode == 0, bad.stderr
    refused = _phase(stack, ns, "ensembles", "duo", "Error")
    assert refused["conditions"][0]["message"] == ("spec.workflowType: 'delegation' needs at least one delegation "
                                                   "relationship")
    assert refused["installedPersonas"] == status["installedPersonas"]
    assert _names(stack, ns, "agents", "sympozium.ai/ensemble=duo") == {"duo-first", "duo-second"}
    fixed = kubectl("patch", "ensemble", "duo", "-n", ns, "--type=merge", "-p", '{"spec":{"workflowType":"pipeline"}}')
    assert fixed.returncode == 0, fixed.stderr
    _phase(stack, ns, "ensembles", "duo", "Ready")

    # Deleted behind the bridge's back: put back (by the periodic resync; the stack resyncs every 2 s).
    second = _get(stack, ns, "agents", "duo-second")
    assert second is not None
    assert kubectl("delete", "agent", "duo-second", "-n", ns).returncode == 0

    def stamped_again() -> bool:
        again = _get(stack, ns, "agents", "duo-second")
        return again is not None and again["metadata"]["uid"] != second["metadata"]["uid"]
    wait_for(stamped_again, timeout=20, what="the deleted Agent to be stamped out again")

    # Disabled again: back to a catalog entry, its objects deleted.
    patched = kubectl("patch", "ensemble", "duo", "-n", ns, "--type=merge", "-p", '{"spec":{"enabled":false}}')
    assert patched.returncode == 0, patched.stderr
    wait_for(lambda: _names(stack, ns, "agents", "sympozium.ai/ensemble=duo") == set()
             and _names(stack, ns, "sympoziumschedules", "sympozium.ai/ensemble=duo") == set(),
             timeout=60, what="a disabled ensemble's objects to be deleted")

    patched = kubectl("patch", "ensemble", "duo", "-n", ns, "--type=merge", "-p", '{"spec":{"enabled":true}}')
    assert patched.returncode == 0, patched.stderr
    wait_for(lambda: _names(stack, ns, "agents", "sympozium.ai/ensemble=duo") == {"duo-first", "duo-second"},
             what="the re-enabled ensemble's Agents")
    assert kubectl("delete", "ensemble", "duo", "-n", ns).returncode == 0
    wait_for(lambda: _get(stack, ns, "agents", "duo-first") is None and _get(stack, ns, "agents", "duo-second") is None
             and _get(stack, ns, "sympoziumschedules", "duo-first-schedule") is None,
             timeout=60, what="the ensemble's Agents and schedule to be gone")


def test_an_agent_the_pack_does_not_own_is_left_alone_and_a_refused_persona_named_in_status(stack: Stack, namespace: str,
                                                                      kubectl: Kubectl) -> None:
    ns = namespace
    mine = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "crew-lead"},
            "spec": {"agents": {"default": {"model": "mine"}}, "authRefs": ECHO}}
    stack.create(ns, "agents", mine)
    pack = _persona_pack(personas=[{"name": "lead", "systemPrompt": "You lead.", "model": "echo-1"},
                                   {"name": "Second", "systemPrompt": "Not a valid object name.", "model": "echo-1"},
                                   {"name": "third", "systemPrompt": "You are fine.", "model": "echo-1"}])
    assert kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(pack)).returncode == 0
    status = _phase(stack, ns, "personapacks", "crew", "Error")
    assert status["installedPersonas"] == [{"name": "third", "instanceName": "crew-third"}]
    message = status["conditions"][0]["message"]
    assert "crew-lead exists already and is not owned by PersonaPack crew" in message
    assert "crew-Second was refused: " in message  # by the API server, which names the problem
    assert _get(stack, ns, "agents", "crew-third") is not None
    kept = _get(stack, ns, "agents", "crew-lead")
    assert kept is not None and kept["spec"]["agents"]["default"]["model"] == "mine"
    assert not kept["metadata"].get("ownerReferences")
