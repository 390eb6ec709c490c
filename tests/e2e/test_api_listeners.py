"""With a webhook port, the API process serves two listeners: the API on plain HTTP, the admission webhook alone
on HTTPS. Each answers only its own paths (the token-free admission route is not on the API's port)."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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


def client_certificate(ca_dir: Path, out: Path) -> tuple[str, str]:
    """A TLS client certificate (clientAuth) signed by the CA `ensure_tls` made in `ca_dir`: (cert, key) paths."""
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-webhook-client")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out.mkdir(parents=True, exist_ok=True)
    (out / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "client.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return str(out / "client.crt"), str(out / "client.key")


def test_with_a_client_ca_the_webhook_listener_admits_only_clients_with_a_certificate_it_signed(
        stack: Stack, tmp_path: Path) -> None:
    tls = ensure_tls(tmp_path / "tls")
    client_ca = ensure_tls(tmp_path / "client-ca")  # the CA of the kube-apiserver's client certificate
    signed = client_certificate(tmp_path / "client-ca", tmp_path / "apiserver")
    ensure_tls(tmp_path / "rogue-ca")
    rogue = client_certificate(tmp_path / "rogue-ca", tmp_path / "rogue")
    port, webhook_port = free_port(), free_port()
    env = {**stack.worker.env, "AGENTRUN_INSECURE": "true", "AGENTRUN_PORT": str(port),
           "AGENTRUN_WEBHOOK_PORT": str(webhook_port), "AGENTRUN_TLS_CERT_FILE": str(tls.cert),
           "AGENTRUN_TLS_KEY_FILE": str(tls.key), "AGENTRUN_WEBHOOK_CLIENT_CA_FILE": str(client_ca.ca_cert)}
    url = f"https://127.0.0.1:{webhook_port}/admission/agentruns"
    body = _review(f"ns-{uuid.uuid4().hex[:6]}")

    def context(cert: tuple[str, str] | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=tls.ca_cert)
        if cert is not None:
            ctx.load_cert_chain(*cert)
        return ctx

    with api_process(env, tmp_path / "api.log", {f"http://127.0.0.1:{port}/readyz": True,
                                                 f"https://127.0.0.1:{webhook_port}/readyz": context(signed)}):
        answered = httpx.post(url, json=body, timeout=10, verify=context(signed))
        assert answered.status_code == 200, answered.text
        assert answered.json()["response"]["uid"] == body["request"]["uid"]  # type: ignore[index]
        # No certificate, or one another CA signed: the server fails the handshake (under TLS 1.2 the client's
        # handshake itself fails; under TLS 1.3 the client finishes first and the server then drops the connection),
        # and nothing is answered.
        for cert in (None, rogue):
            tls12 = context(cert)
            tls12.maximum_version = ssl.TLSVersion.TLSv1_2
            with socket.create_connection(("127.0.0.1", webhook_port), timeout=10) as raw, \
                    pytest.raises(ssl.SSLError):
                tls12.wrap_socket(raw, server_hostname="127.0.0.1")
            with pytest.raises(httpx.HTTPError):
                httpx.post(url, json=body, timeout=10, verify=context(cert))
        # The API's own listener asks no certificate, and still has no admission route.
        assert httpx.post(f"http://127.0.0.1:{port}/admission/agentruns", json=body, timeout=10).status_code == 404


def test_a_client_ca_without_the_webhook_listener_is_refused_at_start(tmp_path: Path) -> None:
    from api.serve import main
    with pytest.raises(SystemExit) as e:
        main(["--insecure", "--webhook-client-ca", str(ensure_tls(tmp_path).ca_cert)])
    assert e.value.code == 2
