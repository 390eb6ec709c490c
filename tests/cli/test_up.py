"""`agentrun up` and `down` take --state-dir after the subcommand and publish DIR/kubeconfig; the embedded stack
registers the API's admission webhooks in localkube, so it is protected as a cluster is, encrypts every payload with
a key file of its state dir, and its Temporal UI decodes them through the API's codec endpoint."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import ssl
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.errors
import pytest

from models.codec import load_keys
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"


def _agentrun(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60, input=input)


def _assert_webhooks_protect_the_stack(kubeconfig: Path, info: dict[str, Any]) -> None:
    assert info["webhook"].startswith("https://127.0.0.1:")
    for kind, paths in (("validatingwebhookconfigurations", ["/admission/agentruns"]),
                        ("mutatingwebhookconfigurations", ["/admission/agentruns/mutate"] * 2)):
        got = _kubectl(kubeconfig, "get", kind, "agentrun-agentruns", "-o", "json")
        assert got.returncode == 0, got.stderr
        hooks = json.loads(got.stdout)["webhooks"]
        assert [h["clientConfig"]["url"] for h in hooks] == [info["webhook"] + p for p in paths]
        assert all(h["clientConfig"]["caBundle"] for h in hooks)
    # A verdict given at creation is refused by the API's webhook, through localkube.
    run: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                           "metadata": {"name": "early", "namespace": "default",
                                        "annotations": {"sympozium.ai/gate-verdict": '{"action": "approve"}'}},
                           "spec": {"agentRef": "helper", "task": "t"}}
    made = _kubectl(kubeconfig, "create", "-f", "-", input=json.dumps(run))
    assert made.returncode != 0
    assert "denied the request: a verdict cannot be given at creation" in made.stderr, made.stderr
    # Without one, the creator is stamped: localkube's admin, who ran kubectl.
    del run["metadata"]["annotations"]
    made = _kubectl(kubeconfig, "create", "-f", "-", "-o", "json", input=json.dumps(run))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["metadata"]["annotations"]["agentrun.dev/created-by"] == "admin"


def _assert_payloads_are_encrypted_and_the_ui_decodes_them(state: Path, info: dict[str, Any]) -> None:
    keys = state / "codec-keys"
    assert info["codec_keys"] == str(keys) and stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert len(load_keys(keys).keys) == 1
    assert "payloads encrypted with codec key" in (state / "worker.log").read_text()
    # The UI's codec endpoint is its own origin's /codec (it appends /decode itself), which is the API's: a browser
    # signed in to the console sends its session there with nothing to set (tests/e2e/test_codec.py).
    assert info["codec"] == info["api"] + "/codec"
    ui = httpx.get(info["temporal_ui"] + "/api/v1/settings", timeout=10)
    assert ui.status_code == 200 and ui.json()["Codec"]["Endpoint"] == info["temporal_ui"] + "/codec"
    through_ui = httpx.post(info["temporal_ui"] + "/codec/encode", timeout=10,
                            json={"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "InNlY3JldCI="}]})
    assert through_ui.status_code == 401, "the API's codec, behind the UI's origin"
    # ... which answers the UI's origin, and decodes for the operator's token only.
    preflight = httpx.options(info["codec"] + "/decode", timeout=10, headers={
        "Origin": info["temporal_ui"], "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-namespace"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == info["temporal_ui"]
    plain = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "InNlY3JldCI="}]}
    assert httpx.post(info["codec"] + "/encode", json=plain, timeout=10).status_code == 401
    auth = {"Authorization": f"Bearer {info['api_token']}"}
    sealed = httpx.post(info["codec"] + "/encode", json=plain, headers=auth, timeout=10)
    assert sealed.status_code == 200 and sealed.json()["payloads"][0]["metadata"]["encoding"] == "YmluYXJ5L2VuY3J5cHRlZA=="
    assert httpx.post(info["codec"] + "/decode", json=sealed.json(), headers=auth, timeout=10).json() == plain


def _assert_console_sessions_are_secrets_of_default(kubeconfig: Path, info: dict[str, Any]) -> None:
    """The stack's API keeps console sessions as sealed Secrets of `default` (api/console/sessions.py), so restarting
    it signs nobody out; a sign-out deletes the session's Secret."""
    signed = httpx.post(info["api"] + "/signin", data={"token": info["api_token"], "next": "/runs"}, timeout=10)
    assert signed.status_code == 303, signed.text
    cookie = signed.cookies["agentrun_session"]
    name = "agentrun-session-" + hashlib.sha256(cookie.encode()).hexdigest()
    got = _kubectl(kubeconfig, "-n", "default", "get", "secret", name, "-o", "json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["type"] == "agentrun.dev/console-session" and cookie not in got.stdout
    page = httpx.get(info["api"] + "/signin", cookies={"agentrun_session": cookie}, timeout=10)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text
    out = httpx.post(info["api"] + "/signout", data={"csrf": csrf.group(1)}, cookies={"agentrun_session": cookie},
                     timeout=10)
    assert out.status_code == 303, out.text
    gone = _kubectl(kubeconfig, "-n", "default", "get", "secret", name)
    assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stderr


def _assert_only_localkube_may_call_the_webhooks(state: Path, info: dict[str, Any]) -> None:
    """Issue 27, hole 7: anything on the host could post AdmissionReviews to the webhook listener (forged
    VerdictRefused Events, an oracle of who holds what). localkube presents the stack's client certificate (the
    webhooks above answered it); a caller without it fails the handshake and is answered nothing."""
    host, port = info["webhook"].removeprefix("https://").split(":")
    trust = ssl.create_default_context(cafile=str(state / "webhook-tls" / "ca.crt"))
    trust.maximum_version = ssl.TLSVersion.TLSv1_2  # (1.3 completes the client's side before the server refuses)
    with socket.create_connection((host, int(port)), timeout=10) as raw, pytest.raises(ssl.SSLError):
        trust.wrap_socket(raw, server_hostname=host)
    with pytest.raises(httpx.HTTPError):
        httpx.post(info["webhook"] + "/admission/agentruns", json={}, timeout=10,
                   verify=ssl.create_default_context(cafile=str(state / "webhook-tls" / "ca.crt")))
    client = state / "webhook-client"
    ok = ssl.create_default_context(cafile=str(state / "webhook-tls" / "ca.crt"))
    ok.load_cert_chain(str(client / "client.crt"), str(client / "client.key"))
    assert httpx.get(info["webhook"] + "/readyz", timeout=10, verify=ok).status_code == 200


def _assert_the_state_is_private(state: Path) -> None:
    """Issue 27, hole 10: endpoints.json (the API token) and localkube's pod directories (tokens, logs) were
    world-readable. The state directory is its user's alone, and every file holding a secret is 0600."""
    kubeconfig = state / "kubeconfig"
    agent = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "echo", "namespace": "default"},
             "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo", "secret": ""}]}}
    run = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "private", "namespace": "default"},
           "spec": {"agentRef": "echo", "task": "hello", "cleanup": "keep"}}
    for obj in (agent, run):
        made = _kubectl(kubeconfig, "create", "-f", "-", input=json.dumps(obj))
        assert made.returncode == 0, made.stderr
    wait_for(lambda: _kubectl(kubeconfig, "get", "agentrun", "private", "-o", "jsonpath={.status.phase}").stdout
             == "Succeeded", timeout=90, what="a run of the stack to succeed")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    secret = [state / "endpoints.json", state / "api-tokens", state / "codec-keys", state / "signing-keys",
              state / "kubeconfig", state / "webhook-tls" / "apiserver.key", state / "webhook-client" / "client.key",
              state / "webhook-client" / "kubeconfig", state / "localkube" / "admin-token",
              *state.glob("*.log"), *state.glob("localkube/pods/*/volumes/kube-api-access-*/token"),
              *state.glob("localkube/pods/*/logs/*.log")]
    assert len(list(state.glob("localkube/pods/*/logs/*.log"))) >= 1, "the stack ran a pod"
    for path in secret:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} is {oct(stat.S_IMODE(path.stat().st_mode))}"
    for d in (state / "localkube", state / "localkube" / "pods", state / "webhook-client"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def _assert_nats_takes_only_the_stacks_token(state: Path, info: dict[str, Any]) -> None:
    """Issue 27: NATS listened without authentication, and its events carry tasks and results. It takes only the
    stack's token, which the worker used for the run above."""
    if "nats" not in info:
        return  # nats-server is not installed: nothing listens
    token = (state / "nats-token").read_text().strip()
    assert info["nats_token"] == str(state / "nats-token")

    async def check() -> int:
        with pytest.raises(nats.errors.Error):
            await nats.connect(info["nats"], connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=1)
        nc = await nats.connect(info["nats"], token=token)
        try:
            return int((await nc.jetstream().stream_info("sympozium")).state.messages)
        finally:
            await nc.close()

    assert asyncio.run(check()) >= 3  # the run's started, phase and completed events


def test_up_and_down_accept_the_state_dir_after_the_subcommand(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    up = _agentrun("up", "--state-dir", str(state), "--detach")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = state / "kubeconfig"
        assert kubeconfig.exists()
        info = json.loads((state / "endpoints.json").read_text())
        assert info["kubeconfig"] == str(kubeconfig)
        assert f"export KUBECONFIG={kubeconfig}" in up.stdout
        got = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "crd", "-o", "name"],
                             capture_output=True, text=True, timeout=60)
        assert got.returncode == 0, got.stderr
        assert "customresourcedefinition.apiextensions.k8s.io/agentruns.sympozium.ai" in got.stdout.split()
        _assert_webhooks_protect_the_stack(kubeconfig, info)
        _assert_payloads_are_encrypted_and_the_ui_decodes_them(state, info)
        # What up said: which address is the console, and how to get its token.
        assert f"The web console is the api address: open {info['api']}/ and sign in with the API token, which " \
               f"`agentrun token --state-dir {state}` prints." in up.stdout
        token = _agentrun("token", "--state-dir", str(state))
        assert (token.returncode, token.stdout) == (0, info["api_token"] + "\n"), token.stderr
        _assert_console_sessions_are_secrets_of_default(kubeconfig, info)
        # up --detach on the running stack: its endpoints again, and success.
        again = _agentrun("up", "--detach", "--state-dir", str(state))
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.startswith(f"the stack in {state} is already up\nagentrun is up:\n")
        assert f"  api          {info['api']}\n" in again.stdout and "Ctrl-C" not in again.stdout
        _assert_only_localkube_may_call_the_webhooks(state, info)
        _assert_the_state_is_private(state)
        _assert_nats_takes_only_the_stacks_token(state, info)
    finally:
        down = _agentrun("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped worker" in down.stdout
    assert not (state / "pids.json").exists()


def test_the_demo_runs_twice_in_a_row_on_one_state_dir_and_ends_without_dead_links(tmp_path: Path) -> None:
    """`bash deploy/dev.sh demo` is `agentrun demo` after the install: a second demo finds the first one's run and
    deletes it (a run executes once), runs the example again and stops its stack; each ends by saying how to keep a
    stack up and where the console is, and prints no address of the stack it stopped."""
    state = tmp_path / "demo"
    for time in ("first", "second"):
        demo = _agentrun("demo", "--demo-state-dir", str(state), timeout=300)
        assert demo.returncode == 0, (time, demo.stdout + demo.stderr)
        assert "agentrun/summarize-release: Succeeded" in demo.stdout, demo.stdout
        assert "context notes.txt: v2.4.0: faster startup" in demo.stdout
        assert ("agentrun/summarize-release of an earlier demo deleted" in demo.stdout) == (time == "second")
        assert "stopped temporal" in demo.stdout and not (state / "pids.json").exists()
        ending = demo.stdout[demo.stdout.index("stopped temporal"):]
        assert "`agentrun up --detach`" in ending and "`agentrun token`" in ending and "console" in ending
        assert "http" not in demo.stdout.replace("agentrun is up", ""), "an address of a stack that is gone"
