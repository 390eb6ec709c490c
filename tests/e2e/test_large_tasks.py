"""A large task can no longer wedge a run (issue 27, hole 6), against the whole stack.

Before, a 1 MB task was accepted (kubectl, server-side apply, the API) and its workflow then failed on Temporal's
payload limit for ever, the run `Pending`; 128 KB to 1 MB reached the agent as an env var and failed with "exit
code 128" (argument list too long). Now a task over its bound (models/bounds.py) is refused with a message naming
`spec.task`: by the CRD's maxLength (characters) or by the admission webhook (UTF-8 bytes), through `kubectl` and
through the API as a 4xx; and a long task within the bound reaches the agent intact, as a file.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml

from models.bounds import ENV_TEXT_MAX_BYTES, TASK_MAX_BYTES
from tests.conftest import Kubectl
from tests.e2e.conftest import Stack, agent, agent_run
from tests.e2e.test_gate_authority import ALICE, AuthorityApi, authority_api, protected

__all__ = ["authority_api", "protected"]  # fixtures: the API process and its webhooks registered for the namespace

MAX_ARG_STRLEN = 32 * 4096  # the kernel's bound on one env string, which a TASK env var of this size broke
LONG = "".join(f"line {i:06d} of a long task\n" for i in range(9000))[:200_000]  # ASCII, within the bound
WIDE = "é" * (TASK_MAX_BYTES // 2 + 1)  # fewer characters than the CRD's maxLength, more bytes than the bound
HUGE = "x" * (1024 * 1024)


def manifest(ns: str, name: str, task: str, **spec: Any) -> str:
    body = agent_run(name, task=task, **spec)
    body["metadata"]["namespace"] = ns
    return json.dumps(body)


def test_a_task_over_its_bound_is_refused_by_kubectl_create_and_server_side_apply_naming_the_field(
        stack: Stack, protected: str, kubectl: Kubectl) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    out = kubectl("create", "-f", "-", input=manifest(ns, "huge", HUGE))
    assert out.returncode == 1, out.stdout[:300]
    assert f"spec.task: Too long: may not be more than {TASK_MAX_BYTES} bytes" in out.stderr, out.stderr[:500]
    out = kubectl("apply", "--server-side", "-f", "-", input=manifest(ns, "huge", HUGE))
    assert out.returncode == 1 and "spec.task: Too long" in out.stderr, out.stderr[:500]
    # Within the CRD's count of characters, over the webhook's count of bytes.
    out = kubectl("create", "-f", "-", input=manifest(ns, "wide", WIDE))
    assert out.returncode == 1, out.stdout[:300]
    assert (f'denied the request: spec.task: at most {TASK_MAX_BYTES} bytes (UTF-8), got {len(WIDE) * 2}'
            in out.stderr), out.stderr[:500]
    assert stack.get_run(ns, "huge") is None and stack.get_run(ns, "wide") is None


def test_a_long_task_within_the_bound_reaches_the_agent_intact_as_a_file(
        stack: Stack, protected: str, kubectl: Kubectl) -> None:
    ns = protected
    assert MAX_ARG_STRLEN < len(LONG.encode()) <= TASK_MAX_BYTES
    stack.create(ns, "agents", agent())
    # Server-side apply through the webhooks answers as any create does (issue 27, hole 14: it was a 500).
    out = kubectl("apply", "--server-side", "-f", "-", input=manifest(ns, "long", LONG, cleanup="keep"))
    assert out.returncode == 0, out.stderr
    assert "agentrun.sympozium.ai/long serverside-applied" in out.stdout
    st = stack.wait_phase(ns, "long", timeout=90)["status"]
    assert st["phase"] == "Succeeded", st.get("error")
    assert st["result"] == "echo: " + LONG.strip()
    job = stack.batch.read_namespaced_job("long", ns)
    env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    assert env["TASK_FILE"] == "/agent-input/task" and "TASK" not in env
    assert len(yaml.safe_dump(env).encode()) < ENV_TEXT_MAX_BYTES


def _create(api: AuthorityApi, ns: str, task: str) -> httpx.Response:
    return httpx.post(f"{api.base}/api/v1/runs", params={"namespace": ns}, timeout=60,
                      headers={"Authorization": f"Bearer {ALICE}"}, json={"agentRef": "helper", "task": task})


def test_through_the_api_a_task_over_its_bound_is_a_422_naming_the_field_and_a_long_one_runs(
        stack: Stack, authority_api: AuthorityApi, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    huge = _create(authority_api, ns, HUGE)
    assert huge.status_code == 422, huge.text[:500]
    detail: Any = huge.json()["detail"]
    assert detail[0]["loc"] == ["body", "task"] and str(TASK_MAX_BYTES) in detail[0]["msg"], detail
    wide = _create(authority_api, ns, WIDE)  # the API counts characters; the webhook's bytes refuse it
    assert wide.status_code == 422, wide.text[:500]
    assert f"spec.task: at most {TASK_MAX_BYTES} bytes (UTF-8)" in wide.json()["detail"], wide.text[:500]
    schedule = httpx.post(f"{authority_api.base}/api/v1/schedules", params={"namespace": ns}, timeout=60,
                          headers={"Authorization": f"Bearer {ALICE}"},
                          json={"name": "huge", "agentRef": "helper", "schedule": "@daily", "task": HUGE})
    assert schedule.status_code == 422, schedule.text[:500]
    assert schedule.json()["detail"][0]["loc"] == ["body", "task"], schedule.text[:500]
    made = _create(authority_api, ns, LONG)
    assert made.status_code == 201, made.text[:500]
    name = made.json()["metadata"]["name"]
    st = stack.wait_phase(ns, name, timeout=90)["status"]
    assert st["phase"] == "Succeeded", st.get("error")
    assert st["result"] == "echo: " + LONG.strip()
