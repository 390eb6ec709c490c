"""The payload codec end to end: a worker, a bridge and an API started with a key file keep a secret literal of a
hook's env out of the workflow history Temporal stores (not even base64-encoded), the API's codec endpoint gives it
back to a caller with a token (and 401 to one without), the encrypted history replays, and the Temporal UI, started
as `agentrun up` starts it (behind cli/uifront.py, whose /codec is the API's), shows ciphertext to anyone and the
payloads to an operator who signed in to the web console, with nothing to set in the UI; a UI on another origin shows
them to an operator signed in at /codec/login who turned on its "include credentials" (headless Chromium, as
tests/e2e/test_console.py).

A stack of its own (localkube, a Temporal dev server, the three processes), so the session's stack stays plain:
the other end-to-end tests read its histories with the plain converter, and its bridge, which watches every
namespace of the session's localkube, never sees these runs."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from kubernetes import client, config
from playwright.sync_api import expect, sync_playwright
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.workflowservice.v1 import SignalWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cli.stack import VENV_BIN, TemporalDevServer, free_port
from cli.up import install_crds
from localkube.testing import running_localkube
from models.codec import SIGNING_KEYS_HEADER, EncryptionCodec, ensure_key_file
from models.gate import Verdict
from models.settings import TemporalSettings
from tests.e2e.conftest import AGENT_IMAGE, Proc, agent, agent_run, allow, api_process, condition, hook
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow

SECRET = "s3cr3t-XYZ-7f3a9c1e5b2d4f60a8"
TASK = "summarise the confidential launch plan 8d41c2"
TOKEN = "t-codec-e2e-0123456789"
OPERATOR = "operator@example.com"
CHROMIUM = Path("/usr/bin/chromium")


@dataclass
class CodecStack:
    kube: client.ApiClient
    temporal: TemporalDevServer
    api: str
    keys: Path
    ui: str  # the front of the UI, as `agentrun up` publishes it

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.kube)


@pytest.fixture(scope="module")
def codec_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodecStack]:
    d = tmp_path_factory.mktemp("codec")
    keys = ensure_key_file(d / "codec-keys")
    signing = ensure_key_file(d / "signing-keys", header=SIGNING_KEYS_HEADER)
    tokens = d / "tokens"
    tokens.write_text(f"{TOKEN} {OPERATOR}\n")
    with running_localkube(d / "kube", job_backoff_seconds=0.2, image_map={
            AGENT_IMAGE: [sys.executable, "-m", "agentrunner"]}) as lk:
        install_crds(lk.kubeconfig)
        # The operator may read every run: what the codec shows, whoever's it is (api/access.py).
        with config.new_client_from_config(str(lk.kubeconfig)) as admin:
            allow(admin, OPERATOR)
        port, front_port = free_port(), free_port()
        base, front = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{front_port}"
        # With its UI behind the front, whose /codec is the API's, as `agentrun up` does.
        temporal = TemporalDevServer(d / "temporal", ui_codec_endpoint=front + "/codec").start()
        env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address,
               "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE": str(keys), "AGENTRUN_KUBE__KUBECONFIG": str(lk.kubeconfig),
               "AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE": str(signing),
               "AGENTRUN_FALLBACK_POLL_SECONDS": "5", "PYTHONUNBUFFERED": "1"}
        procs = [Proc(name, [sys.executable, "-m", name], env, d / f"{name}.log") for name in ("worker", "bridge")]
        procs.append(Proc("ui", [sys.executable, "-m", "cli.uifront", "--port", str(front_port), "--ui",
                                 temporal.ui_url, "--api", base], env, d / "ui.log"))
        for p in procs:
            p.start()
        api = config.new_client_from_config(str(lk.kubeconfig))
        try:
            with api_process({**env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port),
                              "AGENTRUN_CODEC_CORS_ORIGINS": json.dumps([temporal.ui_url])},
                             d / "api.log", {base + "/readyz": True, front + "/api/v1/settings": True}):
                wait_for(lambda: "worker polling" in (d / "worker.log").read_text(), timeout=60,
                         what="the worker to poll")
                yield CodecStack(api, temporal, base, keys, front)
        finally:
            api.close()
            for p in procs:
                p.stop()
            temporal.stop()


def _temporal(stack: CodecStack, *args: str) -> str:
    out = subprocess.run([str(VENV_BIN / "temporal"), *args, "--address", stack.temporal.address],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _base64_forms(value: bytes) -> list[str]:
    """The base64 text of `value` at each of the 3 alignments it can have inside longer data: the characters that
    only its own bytes determine."""
    forms = []
    for shift in range(3):
        text = base64.b64encode(b"\0" * shift + value + b"\0\0").decode()
        first = -(-shift * 8 // 6)  # the first character whose 6 bits all come from `value`
        last = (shift + len(value)) * 8 // 6  # one past the last such character
        forms.append(text[first:last])
    return forms


# What Temporal keeps plain by design: search attributes (the UI's index: namespace, names, phase and gate state
# only), the SDK's patch markers (a patch ID) and a local activity marker's bookkeeping (its ID, type, attempt and
# times); none passes through a codec. A local activity's result (under the marker's "result") does, like any
# activity's.
PLAIN_BY_DESIGN = ("searchAttributes",)
PLAIN_IN_MARKERS = ("patch-data", "data")


def _payloads(node: Any, *, plain: list[tuple[str, bytes]] | None = None, under: str = "",
              marker: bool = False) -> Iterator[dict[str, Any]]:
    """Every Payload of a history in its JSON form (an object with metadata and data), except those Temporal keeps
    plain by design, which go to `plain` as (field, data)."""
    if isinstance(node, dict):
        if isinstance(node.get("metadata"), dict) and "data" in node:
            if under:
                if plain is not None:
                    plain.append((under, base64.b64decode(node["data"])))
            else:
                yield node
        for k, v in node.items():
            plain_here = k in PLAIN_BY_DESIGN or (marker and k in PLAIN_IN_MARKERS)
            yield from _payloads(v, plain=plain, under=under or (k if plain_here else ""),
                                 marker=marker or k == "markerRecordedEventAttributes")
    elif isinstance(node, list):
        for v in node:
            yield from _payloads(v, plain=plain, under=under, marker=marker)


@pytest.fixture(scope="module")
def finished_run(codec_stack: CodecStack) -> tuple[str, str]:
    """The workflow ID of a run whose postRun hook env carries a secret literal, and its raw history (JSON)."""
    ns = "codec"
    client.CoreV1Api(codec_stack.kube).create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agents", agent())
    # The hook proves it got the value, without printing it.
    check = hook("upload", f'test "$AWS_SECRET_ACCESS_KEY" = "{SECRET}"',
                 env=[{"name": "AWS_SECRET_ACCESS_KEY", "value": SECRET}, {"name": "BUCKET", "value": "reports"}])
    codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", agent_run(
        "secret", task=TASK, lifecycle={"postRun": [check]}))

    def finished() -> dict[str, Any] | None:
        run: dict[str, Any] = codec_stack.custom.get_namespaced_custom_object(  # type: ignore[assignment]
            "sympozium.ai", "v1alpha1", ns, "agentruns", "secret")
        return run if (run.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None

    run = wait_for(finished, timeout=120, what="the run to finish")
    assert run["status"]["phase"] == "Succeeded", run["status"]
    # A failed postRun hook leaves the phase alone: the hook's check passed only if there is no PostRunFailed.
    assert condition(run, "PostRunFailed") is None, run["status"]
    wid = run["status"]["workflowId"]
    return wid, _temporal(codec_stack, "workflow", "show", "--workflow-id", wid, "--output", "json")


def test_the_raw_history_holds_the_secret_nowhere_not_even_base64(finished_run: tuple[str, str]) -> None:
    _, raw = finished_run
    history = json.loads(raw)
    kinds = {e["eventType"] for e in history["events"]}
    assert {"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"} <= kinds
    # The Job's outcome (the agent's response among it) is read in a local activity: its result is a marker's.
    local = [e for e in history["events"] if e.get("markerRecordedEventAttributes", {}).get("markerName")
             == "core_local_activity"]
    assert local and all("result" in e["markerRecordedEventAttributes"]["details"] for e in local)
    for value in (SECRET, TASK):
        assert value not in raw
        for form in _base64_forms(value.encode()):
            assert form not in raw, f"{value!r} in the history as base64 ({form})"
    # Every payload of the history is encrypted (the workflow's input, each activity's input and result, ...) but
    # the search attributes and patch markers, which hold names and states only.
    plain: list[tuple[str, bytes]] = []
    payloads = list(_payloads(history, plain=plain))
    assert len(payloads) > 5
    encodings = {base64.b64decode(p["metadata"]["encoding"]) for p in payloads}
    assert encodings == {b"binary/encrypted"}, encodings
    assert {json.loads(data) for where, data in plain if where == "searchAttributes" and data.startswith(b'"')} \
        == {"codec", "secret", "helper", "Pending", "Running", "PostRunning", "Succeeded"}


def test_the_codec_endpoint_shows_the_history_to_a_caller_with_a_token(codec_stack: CodecStack,
                                                                       finished_run: tuple[str, str]) -> None:
    wid, raw = finished_run
    payloads = list(_payloads(json.loads(raw)))
    refused = httpx.post(codec_stack.api + "/codec/decode", json={"payloads": payloads}, timeout=30)
    assert refused.status_code == 401 and SECRET not in refused.text
    decoded = httpx.post(codec_stack.api + "/codec/decode", json={"payloads": payloads}, timeout=30,
                         headers={"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default"})
    assert decoded.status_code == 200, decoded.text
    texts = [base64.b64decode(p["data"]).decode(errors="replace") for p in decoded.json()["payloads"]]
    assert any(SECRET in t for t in texts) and any(TASK in t for t in texts)
    # Temporal's own CLI, through the same endpoint as the UI uses.
    shown = _temporal(codec_stack, "workflow", "show", "--workflow-id", wid, "--output", "json",
                      "--codec-endpoint", codec_stack.api + "/codec", "--codec-auth", f"Bearer {TOKEN}")
    assert any(SECRET in base64.b64decode(p["data"]).decode(errors="replace")
               for p in _payloads(json.loads(shown)))


async def test_the_encrypted_history_replays_with_the_codec(codec_stack: CodecStack,
                                                            finished_run: tuple[str, str]) -> None:
    wid, raw = finished_run
    converter = TemporalSettings(codec_keys_file=str(codec_stack.keys)).data_converter()
    assert isinstance(converter.payload_codec, EncryptionCodec)
    replayer = Replayer(workflows=[AgentRunWorkflow], data_converter=converter)
    await replayer.replay_workflow(WorkflowHistory.from_json(wid, raw))


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM} (deploy/dev.sh installs chromium)")
def test_the_temporal_ui_shows_ciphertext_to_anyone_and_the_payloads_to_a_signed_in_operator(
        codec_stack: CodecStack, finished_run: tuple[str, str]) -> None:
    wid, raw = finished_run
    ui = codec_stack.ui
    # The UI's codec is on its own origin.
    assert httpx.get(ui + "/api/v1/settings", timeout=10).json()["Codec"]["Endpoint"] == ui + "/codec"
    completed = next(e for e in json.loads(raw)["events"] if "workflowExecutionCompletedEventAttributes" in e)
    ciphertext = completed["workflowExecutionCompletedEventAttributes"]["result"]["payloads"][0]["data"]
    page_url = f"{ui}/namespaces/default/workflows/{quote(wid, safe='')}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            anyone = browser.new_context().new_page()
            anyone.goto(page_url)
            # The UI asked the codec, got 401, and shows the result as Temporal stores it.
            expect(anyone.locator("body")).to_contain_text(ciphertext[:40], timeout=30_000)
            assert TASK not in anyone.inner_text("body")
            # Signed in to the web console, and nothing else: the UI shows the payloads.
            console = browser.new_context().new_page()
            console.goto(codec_stack.api + "/signin")
            console.get_by_label("API token").fill(TOKEN)
            console.get_by_role("button", name="Sign in").click()
            expect(console).to_have_url(codec_stack.api + "/runs")
            console.goto(page_url)
            expect(console.locator("body")).to_contain_text(f"echo: {TASK}", timeout=30_000)
            assert ciphertext[:40] not in console.inner_text("body")
            # A Temporal UI on another origin (here the dev server's own): signed in at /codec/login, with the
            # UI's "include cross-origin credentials".
            page_url = f"{codec_stack.temporal.ui_url}/namespaces/default/workflows/{quote(wid, safe='')}"
            operator = browser.new_context().new_page()
            operator.goto(codec_stack.api + "/codec/login")
            operator.fill("input[name=token]", TOKEN)
            operator.click("button")
            expect(operator.locator("body")).to_contain_text("Signed in as operator@example.com")
            # What the UI's codec server settings store when the operator enters the endpoint, ticks "Include
            # cross-origin credentials" and prefers the browser's setting.
            operator.goto(page_url)
            operator.evaluate("""endpoint => {
                localStorage.setItem("endpoint", JSON.stringify(endpoint));
                localStorage.setItem("includeCredentials", "true");
                localStorage.setItem("overrideRemoteCodecConfiguration", "true");
            }""", codec_stack.api + "/codec")
            operator.reload()
            expect(operator.locator("body")).to_contain_text(f"echo: {TASK}", timeout=30_000)
            assert ciphertext[:40] not in operator.inner_text("body")
        finally:
            browser.close()


async def test_a_verdict_that_claims_our_api_but_arrives_unencrypted_is_recorded_as_sent_to_temporal(
        codec_stack: CodecStack) -> None:
    """Only the processes hold the key: a verdict that names an API identity but was sent straight to Temporal
    (plain, by anyone who can write there) is recorded as a Temporal claim; the API's own is its token's identity."""
    ns = "codec-gate"
    client.CoreV1Api(codec_stack.kube).create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    for name in ("forged", "genuine"):
        codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", agent_run(
            name, lifecycle={"postRun": [gate], "gateTimeout": "10m"}))

    def waiting(name: str) -> dict[str, Any] | None:
        run: dict[str, Any] = codec_stack.custom.get_namespaced_custom_object(  # type: ignore[assignment]
            "sympozium.ai", "v1alpha1", ns, "agentruns", name)
        return run if ((run.get("status") or {}).get("gate") or {}).get("state") == "pending" else None

    def decided(name: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            run: dict[str, Any] = codec_stack.custom.get_namespaced_custom_object(  # type: ignore[assignment]
                "sympozium.ai", "v1alpha1", ns, "agentruns", name)
            return run["status"] if (run.get("status") or {}).get("phase") == "Succeeded" else None
        return wait_for(done, timeout=60, what=f"run {name} to finish")

    forged = wait_for(lambda: waiting("forged"), timeout=90, what="the gate of run forged to wait")
    plain = await Client.connect(codec_stack.temporal.address, data_converter=pydantic_data_converter)
    await plain.get_workflow_handle(forged["status"]["workflowId"]).signal(
        AgentRunWorkflow.verdict, Verdict(action="approve", decided_by=OPERATOR, source="api"))
    st = decided("forged")
    assert st["gateVerdict"] == "approved" and st["gate"]["decidedBy"] == f"temporal:{OPERATOR}", st["gate"]

    wait_for(lambda: waiting("genuine"), timeout=90, what="the gate of run genuine to wait")
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(f"{codec_stack.api}/api/v1/runs/genuine/gate-verdict", params={"namespace": ns},
                            json={"action": "approve"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    st = decided("genuine")
    assert st["gateVerdict"] == "approved" and st["gate"]["decidedBy"] == OPERATOR, st["gate"]


async def test_a_verdict_the_codec_server_encrypted_is_no_proof_and_a_signed_one_counts_once_for_its_own_run(
        codec_stack: CodecStack) -> None:
    """Issue 27, hole 5: `/codec/encode` encrypts anything for any API token, and encryption was the proof that a
    verdict came from our API: one encrypted there, naming an approver, was recorded as theirs. Now the API signs its
    verdicts with a key the codec server never uses: the encrypted forgery is recorded as a Temporal claim, and so is
    the API's own signed verdict, read back from its history and sent to another run."""
    ns = "codec-oracle"
    client.CoreV1Api(codec_stack.kube).create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    for name in ("oracle", "genuine", "copied"):
        codec_stack.custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", agent_run(
            name, lifecycle={"postRun": [gate], "gateTimeout": "10m"}))

    def status(name: str) -> dict[str, Any]:
        run: dict[str, Any] = codec_stack.custom.get_namespaced_custom_object(  # type: ignore[assignment]
            "sympozium.ai", "v1alpha1", ns, "agentruns", name)
        return run.get("status") or {}

    def waiting(name: str) -> str:
        st = wait_for(lambda: status(name) if (status(name).get("gate") or {}).get("state") == "pending" else None,
                      timeout=90, what=f"the gate of run {name} to wait")
        return str(st["workflowId"])

    def decided(name: str) -> dict[str, Any]:
        return wait_for(lambda: status(name) if status(name).get("phase") == "Succeeded" else None, timeout=60,
                        what=f"run {name} to finish")

    temporal = await Client.connect(codec_stack.temporal.address, data_converter=pydantic_data_converter)

    async def send(wid: str, payload: Payload) -> None:
        """A signal with this very payload, as anyone who may write to the Temporal namespace can send one."""
        await temporal.workflow_service.signal_workflow_execution(SignalWorkflowExecutionRequest(
            namespace=temporal.namespace, workflow_execution=WorkflowExecution(workflow_id=wid), signal_name="verdict",
            input=Payloads(payloads=[payload]), identity="mallory"))

    # The oracle: a verdict naming an approver, encrypted by the codec server for a token holder.
    oracle = waiting("oracle")
    plain = pydantic_data_converter.payload_converter.to_payloads(
        [Verdict(action="approve", decided_by="boss@example.com", source="api")])[0]
    async with httpx.AsyncClient(timeout=30) as http:
        enc = await http.post(f"{codec_stack.api}/codec/encode", headers={"Authorization": f"Bearer {TOKEN}"},
                              json={"payloads": [{"metadata": {k: base64.b64encode(v).decode()
                                                               for k, v in plain.metadata.items()},
                                                  "data": base64.b64encode(plain.data).decode()}]})
    assert enc.status_code == 200, enc.text
    sealed = enc.json()["payloads"][0]
    assert base64.b64decode(sealed["metadata"]["encoding"]) == b"binary/encrypted"
    await send(oracle, Payload(metadata={k: base64.b64decode(v) for k, v in sealed["metadata"].items()},
                               data=base64.b64decode(sealed["data"])))
    st = decided("oracle")
    assert st["gateVerdict"] == "approved" and st["gate"]["decidedBy"] == "temporal:boss@example.com", st["gate"]
    assert st["gate"]["source"] == "temporal"

    # The API's own verdict is signed for its run: its token's identity.
    genuine = waiting("genuine")
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(f"{codec_stack.api}/api/v1/runs/genuine/gate-verdict", params={"namespace": ns},
                            json={"action": "approve"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert decided("genuine")["gate"]["decidedBy"] == OPERATOR

    # Its signed payload, as the history keeps it (encrypted), sent to another run: good for that run only.
    history = await temporal.get_workflow_handle(genuine).fetch_history()
    signed = next(e.workflow_execution_update_accepted_event_attributes.accepted_request.input.args.payloads[0]
                  for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes"))
    await send(waiting("copied"), signed)
    st = decided("copied")
    assert st["gate"]["decidedBy"] == f"temporal:{OPERATOR}" and st["gate"]["source"] == "temporal", st["gate"]
