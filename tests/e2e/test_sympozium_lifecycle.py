"""Sympozium's lifecycle integration test (test/integration/test-lifecycle-hooks.sh), ported: its Agent and AgentRun
YAML (tests/fixtures/sympozium/lifecycle-hooks-run.yaml, `model.provider: openai-compatible`) applied with kubectl,
unchanged but for the model endpoint, which is a fake OpenAI-compatible model on 127.0.0.1 started here.

It asserts what upstream asserts: phases Running, PostRunning, Succeeded; a non-empty result from the agent; the
postRun hook's proof ConfigMap with `exit-code=0`, the result and the marker the preRun hook wrote to the shared
workspace; the lifecycle Role with `create`; `status.postRunJobName`; the `pre-write-marker` init container. Here
preRun hooks run in the run's preRun Job rather than in the agent's pod (SPEC §3.4), so that is where the init
container is looked for, and the Role is looked for while it exists (it is removed when the run ends).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Kubectl
from tests.e2e.conftest import Record, Stack
from tests.fake_model import FakeModelServer, serve_model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium" / "lifecycle-hooks-run.yaml"
MODEL = "qwen/qwen3.5-9b"
ANSWER = "hello lifecycle"
MARKER = "LIFECYCLE_PROOF_VALUE_42"


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    with serve_model() as model:
        model.reply = {"id": "chatcmpl-lifecycle", "object": "chat.completion", "model": MODEL,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": ANSWER}}],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}
        yield model


def _documents(**values: str) -> str:
    """The fixture with its placeholders filled in; the hooks' own `${...}` shell variables are left alone."""
    text = FIXTURE.read_text()
    for key, value in values.items():
        text = text.replace("${" + key + "}", value)
    return text


def test_sympozium_lifecycle_hooks_integration_test_passes(stack: Stack, namespace: str, kubectl: Kubectl,
                                                           record: Record, fake_model: FakeModelServer) -> None:
    ns, instance = namespace, "inttest-lifecycle"
    run_name, proof = f"{instance}-run", f"lifecycle-proof-{instance}"
    runs, roles, pods = record(ns, "agentruns"), record(ns, "roles"), record(ns, "pods")

    applied = kubectl("apply", "-n", ns, "-f", "-", input=_documents(
        INSTANCE_NAME=instance, RUN_NAME=run_name, PROOF_CM=proof, NAMESPACE=ns, MODEL=MODEL,
        MODEL_BASE_URL=fake_model.base_url))
    assert applied.returncode == 0, applied.stderr

    run = stack.wait_phase(ns, run_name, timeout=120)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("error")
    phases = runs.final_phases(run_name)
    assert {"Running", "PostRunning", "Succeeded"} <= set(phases), phases

    # The agent produced a result, from the model at the endpoint the run named, as provider openai-compatible.
    assert status["result"] == ANSWER
    [body] = [r.body for r in fake_model.requests]
    assert body["model"] == MODEL
    assert body["messages"][-1] == {"role": "user", "content": "Respond with exactly: hello lifecycle"}

    # The postRun hook created the proof ConfigMap with the lifecycle RBAC: the agent's exit code and result, and
    # the marker the preRun hook left in the shared workspace.
    cm = stack.core.read_namespaced_config_map(proof, ns).data
    assert cm == {"exit-code": "0", "agent-result": ANSWER, "marker": MARKER}

    # The lifecycle Role existed with the `create` verb; status names the postRun Job; the preRun hook ran as the
    # init container `pre-write-marker`.
    role_rules = [o.get("rules") or [] for _t, o in roles.snapshot()
                  if o["metadata"]["name"] == f"sympozium-lifecycle-{run_name}"]
    assert role_rules and "create" in role_rules[0][0]["verbs"], role_rules
    assert status["postRunJobName"]
    init_names = {c["name"] for _t, o in pods.snapshot()
                  if o["metadata"].get("labels", {}).get("sympozium.ai/agent-run") == run_name
                  for c in o["spec"].get("initContainers") or []}
    assert "pre-write-marker" in init_names


def test_a_secret_holding_the_key_under_api_key_gives_the_agent_its_key(stack: Stack, namespace: str,
                                                                       fake_model: FakeModelServer) -> None:
    """The key travels only by secretKeyRef: the model sees it, the Job, the run's status and the Temporal-facing
    run object do not; hooks write /workspace/context without making it first."""
    ns, key = namespace, "sk-from-apiKey-0123456789"
    stack.core.create_namespaced_secret(ns, {"metadata": {"name": "model-key"}, "stringData": {"apiKey": key}})
    stack.create(ns, "agents", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "keyed"},
        "spec": {"agents": {"default": {"model": MODEL, "baseURL": fake_model.base_url}},
                 "authRefs": [{"provider": "openai-compatible", "secret": "model-key"}]}})
    stack.create(ns, "agentruns", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "keyed-run"},
        "spec": {"agentRef": "keyed", "task": "use the context", "cleanup": "keep", "lifecycle": {"preRun": [
            {"name": "page", "image": "busybox:1.36",
             "command": ["sh", "-c", "echo 'incident 42' > /workspace/context/page.txt"]}]}}})

    run = stack.wait_phase(ns, "keyed-run", timeout=60)
    assert run["status"]["phase"] == "Succeeded", run["status"].get("error")
    assert [r.authorization for r in fake_model.requests] == [f"Bearer {key}"]
    assert "--- page.txt ---\nincident 42" in fake_model.requests[0].body["messages"][-1]["content"]
    job = stack.api.sanitize_for_serialization(stack.batch.read_namespaced_job("keyed-run", ns))
    assert key not in json.dumps(job) and key not in json.dumps(run)
    [ref] = [e["valueFrom"]["secretKeyRef"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
             if e["name"] == "PROVIDER_API_KEY"]
    assert ref == {"name": "model-key", "key": "apiKey", "optional": True}
