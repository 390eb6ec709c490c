"""Admission webhooks called with a client certificate, as kube-apiserver's --admission-control-config-file gives
one (localkube/admission_config.py; issue 27, hole 7): a webhook server that requires client certificates signed by its
CA is reachable by a localkube configured with one, and by no other."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from localkube.admission_config import AdmissionConfigError, Credentials, WebhookCredentials
from localkube.certs import ensure_client_tls, ensure_tls
from localkube.testing import Handle, running_localkube


class MutualTlsWebhook:
    """An HTTPS webhook that completes a handshake only with a client certificate its client CA signed; it records
    the subject of each client that reached it and allows everything."""

    def __init__(self, serving: Path, client_ca: Path) -> None:
        self.clients: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                peer = self.connection.getpeercert()
                outer.clients.append(dict(x[0] for x in peer["subject"])["commonName"])
                data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a refused handshake

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls = ensure_tls(serving)
        ctx.load_cert_chain(tls.cert, tls.key)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cafile=str(client_ca))
        self.ca_pem = tls.ca_pem
        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def admission_config(d: Path, user: dict[str, Any], *, name: str = "*") -> Path:
    kubeconfig = d / "webhook-kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": [{"name": name, "user": user}]}))
    path = d / "admission.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                                    "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {
                                        "apiVersion": "apiserver.config.k8s.io/v1",
                                        "kind": "WebhookAdmissionConfiguration", "kubeConfigFile": "webhook-kubeconfig"}}]}))
    return path


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[MutualTlsWebhook, Path]]:
    client_dir = tmp_path / "client"
    ensure_client_tls(client_dir, "localkube-webhook-client")
    server = MutualTlsWebhook(tmp_path / "serving", client_dir / "ca.crt")
    yield server, client_dir
    server.close()


def _register(kubeconfig: Path, server: MutualTlsWebhook, name: str, namespace: str) -> client.ApiClient:
    api = config.new_client_from_config(str(kubeconfig))
    client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration({  # type: ignore[arg-type]
        "metadata": {"name": name}, "webhooks": [{
            "name": "mtls.localkube.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "clientConfig": {"url": f"https://127.0.0.1:{server.port}/validate",
                                                      "caBundle": base64.b64encode(server.ca_pem.encode()).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]})
    return api


def _create(api: client.ApiClient, namespace: str, name: str) -> None:
    client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": name}})  # type: ignore[arg-type]


def test_a_localkube_with_the_admission_configuration_presents_its_certificate_and_others_are_refused(
        webhook: tuple[MutualTlsWebhook, Path], tmp_path: Path, localkube: Handle, namespace: str) -> None:
    server, client_dir = webhook
    config_file = admission_config(tmp_path, {"client-certificate": str(client_dir / "client.crt"),
                                              "client-key": str(client_dir / "client.key")})
    with running_localkube(tmp_path / "kube", admission_config=config_file) as lk:
        api = _register(lk.kubeconfig, server, "mtls", "default")
        _create(api, "default", "checked")
        assert server.clients == ["localkube-webhook-client"]
        api.close()
    # The session's localkube has no such configuration: the webhook's handshake refuses it, and Fail refuses the write.
    name = f"mtls-{uuid.uuid4().hex[:8]}"
    api = _register(localkube.kubeconfig, server, name, namespace)
    try:
        with pytest.raises(ApiException) as e:
            _create(api, namespace, "unchecked")
        assert e.value.status == 500 and 'failed calling webhook \\"mtls.localkube.test\\"' in str(e.value.body)
        assert server.clients == ["localkube-webhook-client"]
    finally:
        client.AdmissionregistrationV1Api(api).delete_validating_webhook_configuration(name)
        api.close()


def test_credentials_are_matched_by_server_most_specific_first(tmp_path: Path) -> None:
    creds = WebhookCredentials({"api.example:8443": Credentials(token="exact"), "api.example": Credentials(token="443"),
                                "*.team.svc": Credentials(token="svc"), "*": Credentials(token="any")})
    assert creds.for_server("api.example", 8443).token == "exact"  # type: ignore[union-attr]
    assert creds.for_server("api.example", 443).token == "443"  # type: ignore[union-attr]
    assert creds.for_server("hook.team.svc", 443).token == "svc"  # type: ignore[union-attr]
    assert creds.for_server("hook.other.svc", 443).token == "any"  # type: ignore[union-attr]
    assert WebhookCredentials({"x": Credentials()}).for_server("y", 443) is None
    half = admission_config(tmp_path, {"client-certificate": str(tmp_path / "nope.crt")})
    with pytest.raises(AdmissionConfigError, match="cannot read client-certificate"):
        WebhookCredentials.load(half)
    (tmp_path / "nope.crt").write_text("x")
    with pytest.raises(AdmissionConfigError, match="needs its key"):
        WebhookCredentials.load(half)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("kind: Config\n")
    with pytest.raises(AdmissionConfigError, match="kind must be AdmissionConfiguration"):
        WebhookCredentials.load(wrong)
