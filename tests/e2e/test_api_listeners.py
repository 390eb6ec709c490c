"""With a webhook port, the API process serves two listeners: the API on plain HTTP, the admission webhook alone
on HTTPS. Each answers only its own paths (the token-free admission route is not on the API's port)."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cli.stack import free_port
from localkube.certs import ensure_tls
from tests.e2e.conftest import API_TOKENS, Stack, api_process

TOKEN = next(iter(API_TOKENS))


@dataclass
class Listeners:
    api: str
    webhook: str
    ca: Path

    @property
    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)


@pytest.fixture(scope="module")
def listeners(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    d = tmp_path_factory.mktemp("listeners")
    tls = ensure_tls(d / "tls")  # a certificate for 127.0.0.1/localhost, signed by its own CA
    tokens = d / "tokens"
    tokens.write_text("".join(f"{t} {who}\n" for t, who in API_TOKENS.items()))
    port, webhook_port = free_port(), free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port),
           "AGENTRUN_WEBHOOK_PORT": str(webhook_port), "AGENTRUN_TLS_CERT_FILE": str(tls.cert),
           "AGENTRUN_TLS_KEY_FILE": str(tls.key)}
    out = Listeners(f"http://127.0.0.1:{port}", f"https://127.0.0.1:{webhook_port}", tls.ca_cert)
    with api_process(env, d / "api.log", {out.api + "/readyz": True, out.webhook + "/readyz": out.tls}):
        yield out


def _review(ns: str) -> dict[str, object]:
    gvr = {"group": "sympozium.ai", "version": "v1alpha1", "resource": "agentruns"}
    run = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
           "metadata": {"name": "r1", "namespace": ns, "uid": str(uuid.uuid4())},
           "spec": {"agentRef": "nobody", "task": "t"}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "sympozium.ai", "version": "v1alpha1", "kind": "AgentRun"},
        "resource": gvr, "name": "r1", "namespace": ns, "operation": "CREATE",
        "userInfo": {"username": "alice"}, "object": run, "dryRun": False}}


def test_the_api_is_plain_http_on_its_port_and_absent_from_the_webhook_port(listeners: Listeners) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(listeners.api + "/api/v1/runs", headers=auth, timeout=10).status_code == 200
    assert httpx.get(listeners.webhook + "/api/v1/runs", headers=auth, timeout=10,
                     verify=listeners.tls).status_code == 404
    assert httpx.get(listeners.webhook + "/", timeout=10, verify=listeners.tls).status_code == 404


def test_the_admission_webhook_is_served_only_over_tls_on_its_own_port(listeners: Listeners) -> None:
    body = _review(f"ns-{uuid.uuid4().hex[:6]}")
    on_api = httpx.post(listeners.api + "/admission/agentruns", json=body, timeout=10)
    assert on_api.status_code == 404
    on_webhook = httpx.post(listeners.webhook + "/admission/agentruns", json=body, timeout=10,
                            verify=listeners.tls)
    assert on_webhook.status_code == 200, on_webhook.text
    assert on_webhook.json()["response"]["uid"] == body["request"]["uid"]  # type: ignore[index]
    with pytest.raises(httpx.HTTPError):  # no plain HTTP on the webhook's port
        httpx.post(listeners.webhook.replace("https://", "http://") + "/admission/agentruns", json=body, timeout=5)


def test_a_webhook_port_without_a_certificate_is_refused_at_start() -> None:
    from api.serve import main
    with pytest.raises(SystemExit) as e:
        main(["--insecure", "--webhook-port", "8443"])
    assert e.value.code == 2
