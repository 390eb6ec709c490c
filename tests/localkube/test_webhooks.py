"""Validating admission webhooks: localkube calls them as kube-apiserver does.

Each test runs a real HTTPS webhook server (stdlib `http.server` on a thread, its certificate from a CA
made here) that records every AdmissionReview it receives and answers as the test tells it to, and
registers it with a ValidatingWebhookConfiguration through the real `kubernetes` client or `kubectl`.
Configurations are cluster-scoped and the localkube is shared by the session, so every webhook here
is confined to the test's namespace (or to objects carrying the test's own label) and removed after
the test.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from localkube.testing import Handle
from models.crds import all_crds
from tests.conftest import Kubectl
from tests.waiting import wait_for

Obj = dict[str, Any]
Answer = Callable[[Obj], Obj]
GROUP = "admissionregistration.k8s.io"
RUNS = ("webhooks.localkube.test", "v1alpha1", "webhookruns")
LABEL = "localkube.test/webhook-test"


# --------------------------------------------------------------------------------------------------
# a real HTTPS webhook server
# --------------------------------------------------------------------------------------------------


@dataclass
class Pki:
    ca_pem: bytes
    cert: Path
    key: Path
    other_ca_pem: bytes  # a CA that did not sign the server's certificate

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()


def _ca(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA and a serving certificate for 127.0.0.1 signed by it, as a webhook's operator would make them."""
    ca_key, ca = _ca("webhook-test-ca")
    _, other = _ca("some-other-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    d = tmp_path_factory.mktemp("webhook-pki")
    (d / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "tls.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return Pki(ca.public_bytes(serialization.Encoding.PEM), d / "tls.crt", d / "tls.key",
               other.public_bytes(serialization.Encoding.PEM))


def allow(_: Obj) -> Obj:
    return {"allowed": True}


def deny(message: str, code: int | None = 403, reason: str = "Forbidden") -> Answer:
    status: Obj = {"message": message, "reason": reason}
    if code is not None:
        status["code"] = code
    return lambda _: {"allowed": False, "status": status}


@dataclass
class WebhookServer:
    """Records each review (with the path it was posted to) and answers with `answer(request)`.

    `answer` returns the AdmissionResponse fields; the uid and the review envelope are added unless
    it returns a whole body under the key "raw".
    """

    pki: Pki
    answer: Answer = allow
    reviews: list[Obj] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    # A slow webhook waits on this; the test releases it when it is done.
    release: threading.Event = field(default_factory=threading.Event)
    slow: bool = False

    def __post_init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.reviews.append(review)
                outer.paths.append(self.path)
                if outer.slow:
                    outer.release.wait(timeout=20)
                fields = outer.answer(review["request"])
                body = fields["raw"] if "raw" in fields else {
                    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], **fields}}
                data = json.dumps(body).encode()
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
                pass  # a client that timed out and left is expected in some tests

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki.cert, self.pki.key)
        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="webhook", daemon=True)
        self.thread.start()

    def url(self, path: str = "/validate") -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def requests(self) -> list[Obj]:
        return [r["request"] for r in self.reviews]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(pki: Pki) -> Iterator[WebhookServer]:
    s = WebhookServer(pki)
    yield s
    s.close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# --------------------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------------------


def webhook(name: str, url: str, ca_bundle: str | None, *, rules: list[Obj], namespace: str | None,
            **fields: Any) -> Obj:
    hook: Obj = {"name": f"{name}.localkube.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": url}, "rules": rules}
    if ca_bundle is not None:
        hook["clientConfig"]["caBundle"] = ca_bundle
    if namespace is not None:
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return {**hook, **fields}


def rule(resources: list[str], *, operations: list[str] | None = None, group: str = "", version: str = "v1",
         **fields: Any) -> Obj:
    return {"apiGroups": [group], "apiVersions": [version], "operations": operations or ["CREATE", "UPDATE"],
            "resources": resources, **fields}


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> Obj:
    md: Obj = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"k": "v"}}


@dataclass
class Configs:
    """Creates ValidatingWebhookConfigurations labelled for this test; all are deleted afterwards."""

    # Typed loosely: the client's models make every field optional, which the assertions do not care about.
    api: Any  # client.AdmissionregistrationV1Api
    custom: Any  # client.CustomObjectsApi
    run: str
    names: list[str] = field(default_factory=list)

    def body(self, *hooks: Obj, name: str = "") -> Obj:
        name = name or f"lk-{self.run}-{len(self.names)}"
        return {"apiVersion": f"{GROUP}/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name, "labels": {LABEL: self.run}}, "webhooks": list(hooks)}

    def create(self, *hooks: Obj) -> str:
        body = self.body(*hooks)
        self.api.create_validating_webhook_configuration(body)
        self.names.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])

    def create_raw(self, body: Obj) -> Obj:
        """Through the untyped client, which sends what the typed one would refuse to."""
        created: Obj = self.custom.create_cluster_custom_object(GROUP, "v1", "validatingwebhookconfigurations", body)
        return created


@pytest.fixture
def configs(kube: client.ApiClient) -> Iterator[Configs]:
    c = Configs(client.AdmissionregistrationV1Api(kube), client.CustomObjectsApi(kube), uuid.uuid4().hex[:8])
    yield c
    c.api.delete_collection_validating_webhook_configuration(label_selector=f"{LABEL}={c.run}")



@pytest.fixture(scope="module")
def agentrun_crd(localkube: Handle) -> None:
    api: Any = client.ApiextensionsV1Api(config.new_client_from_config(str(localkube.kubeconfig)))
    try:
        crd = copy.deepcopy(all_crds()["agentruns.yaml"])
        crd["metadata"]["name"] = f"{RUNS[2]}.{RUNS[0]}"
        crd["spec"]["group"] = RUNS[0]
        crd["spec"]["names"] = {"kind": "WebhookRun", "listKind": "WebhookRunList", "plural": RUNS[2],
                                "singular": "webhookrun"}
        api.create_custom_resource_definition(crd)
    except ApiException as e:
        if e.status != 409:
            raise


def status_of(e: ApiException) -> Obj:
    body: Obj = json.loads(e.body or "{}")
    return body


def kubectl_ok(result: Any) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return str(result.stdout)


# --------------------------------------------------------------------------------------------------
# the kind itself
# --------------------------------------------------------------------------------------------------


def test_webhook_configurations_are_a_served_kind_with_the_real_defaults(
        kube: client.ApiClient, kubectl: Kubectl, configs: Configs, server: WebhookServer, namespace: str) -> None:
    body = configs.body(webhook("crud", server.url(), server.pki.ca_bundle, namespace=namespace,
                                rules=[rule(["configmaps"])]))
    name = body["metadata"]["name"]
    configs.names.append(name)
    assert "configured" not in kubectl_ok(kubectl("apply", "-f", "-", input=json.dumps(body)))

    created = configs.api.read_validating_webhook_configuration(name)
    hook = created.webhooks[0]
    assert (hook.failure_policy, hook.match_policy, hook.timeout_seconds) == ("Fail", "Equivalent", 10)
    assert hook.object_selector.to_dict() == client.V1LabelSelector().to_dict()
    assert hook.rules[0].scope == "*"
    assert created.metadata.generation == 1

    listed = configs.api.list_validating_webhook_configuration(label_selector=f"{LABEL}={configs.run}")
    assert [c.metadata.name for c in listed.items] == [name]
    assert kubectl_ok(kubectl("get", "validatingwebhookconfigurations", name)).split()[:4] == \
        ["NAME", "WEBHOOKS", "AGE", name]
    resources = kubectl_ok(kubectl("api-resources", f"--api-group={GROUP}", "-o", "name"))
    assert f"validatingwebhookconfigurations.{GROUP}" in resources.split()

    # A second apply changes one field of the webhook (a strategic merge by webhook name) and bumps
    # the generation; a watch from the list's resourceVersion sees that change.
    body["webhooks"][0]["timeoutSeconds"] = 5
    assert "configured" in kubectl_ok(kubectl("apply", "-f", "-", input=json.dumps(body)))
    events = watch.Watch().stream(configs.api.list_validating_webhook_configuration,
                                  label_selector=f"{LABEL}={configs.run}",
                                  resource_version=listed.metadata.resource_version, timeout_seconds=10)
    event = next(events)
    assert (event["type"], event["object"].webhooks[0].timeout_seconds) == ("MODIFIED", 5)
    assert event["object"].metadata.generation == 2
    assert event["object"].webhooks[0].client_config.url == server.url()

    configs.api.delete_validating_webhook_configuration(name)
    with pytest.raises(ApiException) as gone:
        configs.api.read_validating_webhook_configuration(name)
    assert gone.value.status == 404


def test_an_invalid_webhook_configuration_is_refused_with_422_naming_each_field(
        configs: Configs, server: WebhookServer) -> None:
    bad = {"admissionReviewVersions": ["v1beta2"], "timeoutSeconds": 31, "failurePolicy": "Sometimes",
           "clientConfig": {"url": server.url(), "service": {"namespace": "x", "name": "y"}},
           "rules": [rule(["*", "configmaps"], operations=["PATCH"])]}
    with pytest.raises(ApiException) as e:
        configs.create_raw(configs.body(bad, name=f"lk-{configs.run}-bad"))
    status = status_of(e.value)
    assert (e.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(
        f'ValidatingWebhookConfiguration.admissionregistration.k8s.io "lk-{configs.run}-bad" is invalid: ')
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert causes == {
        "webhooks[0].name": "Required value",
        "webhooks[0].rules[0].operations[0]": 'Unsupported value: "PATCH": supported values: "*", "CONNECT", '
                                              '"CREATE", "DELETE", "UPDATE"',
        "webhooks[0].rules[0].resources": 'Invalid value: []string{"*", "configmaps"}: if \'*\' is present, must '
                                          "not specify other resources without subresources",
        "webhooks[0].failurePolicy": 'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"',
        "webhooks[0].sideEffects": "Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds": "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        "webhooks[0].admissionReviewVersions": 'Invalid value: []string{"v1beta2"}: must include at least one of '
                                               "v1, v1beta1",
        "webhooks[0].clientConfig": "Required value: exactly one of url or service is required",
    }

    some = webhook("effects", server.url(), None, namespace=None, rules=[rule(["configmaps"])], sideEffects="Some")
    with pytest.raises(ApiException) as e:
        configs.create_raw(configs.body(some, name=f"lk-{configs.run}-some"))
    assert e.value.status == 422
    assert 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"' in \
        status_of(e.value)["message"]

    bad_bundle = webhook("b64", server.url(), "%%%", namespace=None,
                         rules=[rule(["configmaps"])])
    with pytest.raises(ApiException) as e:
        configs.create_raw(configs.body(bad_bundle, name=f"lk-{configs.run}-b64"))
    assert (e.value.status, status_of(e.value)["message"]) == (400, (
        'ValidatingWebhookConfiguration in version "v1" cannot be handled as a ValidatingWebhookConfiguration: '
        "illegal base64 data at input byte 0"))


# --------------------------------------------------------------------------------------------------
# denial
# --------------------------------------------------------------------------------------------------


def test_a_matching_create_is_denied_with_the_webhooks_message_and_code(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    server.answer = deny("configmaps are not welcome here", code=409, reason="Conflict")
    configs.create(webhook("deny", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("refused"))
    status = status_of(e.value)
    assert (e.value.status, status["code"], status["reason"], status["status"]) == (409, 409, "Conflict", "Failure")
    assert status["message"] == \
        'admission webhook "deny.localkube.test" denied the request: configmaps are not welcome here'
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("refused", namespace)
    assert missing.value.status == 404

    # A refusal without a code is never a success: the real server makes it a 400.
    server.answer = lambda _: {"allowed": False}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("refused"))
    assert (e.value.status, status_of(e.value)["message"]) == \
        (400, 'admission webhook "deny.localkube.test" denied the request without explanation')


def test_kubectl_apply_of_a_violating_agentrun_is_refused_by_the_webhook(
        kube: client.ApiClient, kubectl: Kubectl, configs: Configs, server: WebhookServer, namespace: str,
        agentrun_crd: None) -> None:
    def policy(req: Obj) -> Obj:
        image = ((req["object"].get("spec") or {}).get("model") or {}).get("model", "")
        if image.startswith("forbidden"):
            return {"allowed": False, "status": {"code": 403, "reason": "Forbidden",
                                                 "message": "spec.model.model: forbidden models are not allowed"}}
        return {"allowed": True}

    server.answer = policy
    configs.create(webhook("agentruns", server.url("/admission/agentruns"), server.pki.ca_bundle,
                           namespace=namespace, rules=[rule(["webhookruns"], group="webhooks.localkube.test",
                                                            version="v1alpha1", scope="Namespaced")]))
    run: Obj = {"apiVersion": "webhooks.localkube.test/v1alpha1", "kind": "WebhookRun", "metadata": {"name": "bad-run"},
           "spec": {"agentRef": "helper", "task": "hi", "model": {"model": "forbidden-9000"}}}
    out = kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(run))
    assert out.returncode == 1
    assert 'admission webhook "agentruns.localkube.test" denied the request: spec.model.model: forbidden models ' \
           "are not allowed" in out.stderr
    assert "Forbidden" in out.stderr
    assert server.paths == ["/admission/agentruns?timeout=10s"]
    custom: Any = client.CustomObjectsApi(kube)
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(RUNS[0], RUNS[1], namespace, RUNS[2], "bad-run")
    assert missing.value.status == 404

    run["spec"]["model"] = {"model": "fine"}
    assert "webhookrun.webhooks.localkube.test/bad-run created" in kubectl_ok(
        kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(run)))
    # Editing the spec into a violation is an UPDATE the webhook refuses too.
    run["spec"]["model"] = {"model": "forbidden-again"}
    out = kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(run))
    assert out.returncode == 1 and "forbidden models are not allowed" in out.stderr
    assert [r["operation"] for r in server.requests()] == ["CREATE", "CREATE", "UPDATE"]
    stored = custom.get_namespaced_custom_object(RUNS[0], RUNS[1], namespace, RUNS[2], "bad-run")
    assert stored["spec"]["model"] == {"model": "fine"}


def test_server_side_apply_through_a_webhook_answers_created_then_configured(
        kube: client.ApiClient, kubectl: Kubectl, configs: Configs, server: WebhookServer, namespace: str,
        agentrun_crd: None) -> None:
    """`kubectl apply --server-side` of an object a webhook must see: the write waits for the webhook and then
    answers 201 (created) or 200 (changed) with the object, as for any other write (issue 27, hole 14: it answered
    500 and stored the object anyway)."""
    configs.create(webhook("ssa", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["webhookruns"], group="webhooks.localkube.test", version="v1alpha1",
                                       scope="Namespaced"), rule(["configmaps"])]))
    run: Obj = {"apiVersion": "webhooks.localkube.test/v1alpha1", "kind": "WebhookRun", "metadata": {"name": "ssa"},
                "spec": {"agentRef": "helper", "task": "hi"}}
    out = kubectl_ok(kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=json.dumps(run)))
    assert "webhookrun.webhooks.localkube.test/ssa serverside-applied" in out
    run["spec"]["task"] = "again"
    out = kubectl_ok(kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=json.dumps(run)))
    assert "webhookrun.webhooks.localkube.test/ssa serverside-applied" in out
    custom: Any = client.CustomObjectsApi(kube)
    assert custom.get_namespaced_custom_object(RUNS[0], RUNS[1], namespace, RUNS[2], "ssa")["spec"]["task"] == "again"
    # A built-in kind the same way; and the codes themselves, which kubectl does not print.
    kubectl_ok(kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=json.dumps(configmap("ssa"))))
    assert [r["operation"] for r in server.requests()] == ["CREATE", "UPDATE", "CREATE"]
    for code in (201, 200):
        answer = custom.patch_namespaced_custom_object_with_http_info(
            RUNS[0], RUNS[1], namespace, RUNS[2], "fresh", {**run, "metadata": {"name": "fresh"}}, field_manager="test",
            _content_type="application/apply-patch+yaml")
        assert answer[1] == code, answer
    assert custom.get_namespaced_custom_object(RUNS[0], RUNS[1], namespace, RUNS[2], "fresh")["spec"]["task"] == "again"


# --------------------------------------------------------------------------------------------------
# what the webhook is sent
# --------------------------------------------------------------------------------------------------


def test_the_review_describes_the_request_object_and_old_object(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    configs.create(webhook("review", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"], operations=["*"])]))
    core: Any = client.CoreV1Api(kube)
    created = core.create_namespaced_config_map(namespace, configmap("seen", a="1"))
    core.patch_namespaced_config_map("seen", namespace, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("seen", namespace, propagation_policy="Background")

    assert [r["apiVersion"] for r in server.reviews] == ["admission.k8s.io/v1"] * 3
    assert {r["kind"] for r in server.reviews} == {"AdmissionReview"}
    create, update, delete = server.requests()
    assert len({create["uid"], update["uid"], delete["uid"]}) == 3
    for req in (create, update, delete):
        assert req["kind"] == req["requestKind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
        assert req["resource"] == req["requestResource"] == {"group": "", "version": "v1", "resource": "configmaps"}
        assert (req["namespace"], req["name"], req["dryRun"]) == (namespace, "seen", False)
        assert "subResource" not in req
        assert req["userInfo"]["username"] == "admin"
        assert "system:masters" in req["userInfo"]["groups"]
    assert [r["operation"] for r in (create, update, delete)] == ["CREATE", "UPDATE", "DELETE"]
    # The object as it will be stored: defaulted, with its uid, before it has a resourceVersion.
    assert create["object"]["data"] == {"a": "1"}
    assert create["object"]["metadata"]["uid"] == created.metadata.uid
    assert "resourceVersion" not in create["object"]["metadata"]
    assert create["oldObject"] is None
    assert create["options"]["kind"] == "CreateOptions"
    assert (update["object"]["data"], update["oldObject"]["data"]) == ({"a": "2"}, {"a": "1"})
    assert update["options"]["kind"] == "UpdateOptions"
    assert delete["object"] is None and delete["oldObject"]["data"] == {"a": "2"}
    assert delete["options"] == {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                                 "propagationPolicy": "Background"}


def test_requests_outside_the_rules_and_selectors_are_not_sent(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str,
        other_namespace: str) -> None:
    selector = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
    configs.create(
        webhook("create", server.url("/create"), server.pki.ca_bundle, namespace=namespace, objectSelector=selector,
                rules=[rule(["configmaps"], operations=["CREATE"])]),
        # Configmaps are namespaced: a rule for the cluster scope never matches them.
        webhook("cluster", server.url("/cluster"), server.pki.ca_bundle, namespace=namespace,
                rules=[rule(["configmaps"], operations=["*"], scope="Cluster")]),
    )
    core: Any = client.CoreV1Api(kube)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"team": "a"}}}
    core.create_namespaced_secret(namespace, secret)
    core.create_namespaced_config_map(other_namespace, configmap("elsewhere", {"team": "a"}))
    core.create_namespaced_config_map(namespace, configmap("team-b", {"team": "b"}))
    core.create_namespaced_config_map(namespace, configmap("unlabelled"))
    core.create_namespaced_config_map(namespace, configmap("team-a", {"team": "a"}))
    core.patch_namespaced_config_map("team-a", namespace, {"data": {"k": "changed"}})
    core.delete_namespaced_config_map("team-a", namespace)

    assert [(p, r["operation"], r["name"]) for p, r in zip(server.paths, server.requests(), strict=True)] == \
        [("/create?timeout=10s", "CREATE", "team-a")]


def test_status_writes_are_sent_only_to_rules_naming_the_status_subresource(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str, agentrun_crd: None) -> None:
    custom: Any = client.CustomObjectsApi(kube)
    configs.create(webhook("runs", server.url("/runs"), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["webhookruns"], group="webhooks.localkube.test", version="v1alpha1")]))
    run = {"apiVersion": "webhooks.localkube.test/v1alpha1", "kind": "WebhookRun",
           "metadata": {"name": "r", "labels": {LABEL: configs.run}}, "spec": {"agentRef": "a", "task": "t"}}
    custom.create_namespaced_custom_object(*RUNS[:2], namespace, RUNS[2], run)
    custom.patch_namespaced_custom_object_status(*RUNS[:2], namespace, RUNS[2], "r", {"status": {"phase": "Running"}})
    assert [(p, r["operation"]) for p, r in zip(server.paths, server.requests(), strict=True)] == \
        [("/runs?timeout=10s", "CREATE")]

    configs.create(
        webhook("status", server.url("/status"), server.pki.ca_bundle, namespace=namespace,
                rules=[rule(["webhookruns/status"], group="webhooks.localkube.test", version="v1alpha1")]),
        # Every resource and subresource of every group, for this test's objects only.
        webhook("all", server.url("/all"), server.pki.ca_bundle, namespace=None,
                objectSelector={"matchLabels": {LABEL: configs.run}},
                rules=[rule(["*/*"], group="*", version="*", operations=["UPDATE"])]),
    )
    del server.paths[:], server.reviews[:]
    custom.patch_namespaced_custom_object_status(*RUNS[:2], namespace, RUNS[2], "r", {"status": {"phase": "Done"}})
    assert sorted(server.paths) == ["/all?timeout=10s", "/status?timeout=10s"]
    for req in server.requests():
        assert (req["operation"], req["subResource"], req["requestSubResource"]) == ("UPDATE", "status", "status")
        assert req["kind"] == {"group": "webhooks.localkube.test", "version": "v1alpha1", "kind": "WebhookRun"}
        assert req["resource"] == {"group": "webhooks.localkube.test", "version": "v1alpha1", "resource": "webhookruns"}
        assert (req["object"]["status"]["phase"], req["oldObject"]["status"]["phase"]) == ("Done", "Running")


# --------------------------------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------------------------------


def test_failure_policy_decides_when_the_webhook_is_down(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str, closed_port: int) -> None:
    url = f"https://127.0.0.1:{closed_port}/validate"
    configs.create(webhook("down", url, server.pki.ca_bundle, namespace=namespace, rules=[rule(["configmaps"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("fail-closed"))
    status = status_of(e.value)
    message = (f'failed calling webhook "down.localkube.test": failed to call webhook: Post "{url}?timeout=10s": '
               f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused")
    assert (e.value.status, status["reason"], status["message"]) == \
        (500, "InternalError", f"Internal error occurred: {message}")
    assert status["details"]["causes"] == [{"message": message}]

    configs.create(webhook("ignored", url, server.pki.ca_bundle, namespace=namespace, failurePolicy="Ignore",
                           rules=[rule(["secrets"])]))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fail-open"}, "stringData": {"a": "b"}}
    created = core.create_namespaced_secret(namespace, secret)
    assert created.metadata.name == "fail-open"


def test_a_webhook_slower_than_its_timeout_fails_the_request_in_time(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    server.slow = True
    configs.create(webhook("slow", server.url(), server.pki.ca_bundle, namespace=namespace, timeoutSeconds=1,
                           rules=[rule(["configmaps"])]),
                   webhook("slow-ignored", server.url("/ignored"), server.pki.ca_bundle, namespace=namespace,
                           timeoutSeconds=1, failurePolicy="Ignore", rules=[rule(["secrets"])]))
    core: Any = client.CoreV1Api(kube)
    started = time.monotonic()
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("too-slow"))
    assert time.monotonic() - started < 5
    assert e.value.status == 500
    assert status_of(e.value)["message"] == (
        'Internal error occurred: failed calling webhook "slow.localkube.test": failed to call webhook: '
        f'Post "{server.url()}?timeout=1s": context deadline exceeded')
    # Under Ignore, the same timeout admits the request.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "in-time"}}
    assert core.create_namespaced_secret(namespace, secret).metadata.name == "in-time"
    assert server.paths == ["/validate?timeout=1s", "/ignored?timeout=1s"]


def test_a_webhook_still_deciding_does_not_hold_up_other_requests(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    server.slow = True  # it answers only once released
    configs.create(webhook("pondering", server.url(), server.pki.ca_bundle, namespace=namespace,
                           timeoutSeconds=30, rules=[rule(["configmaps"])]))
    core: Any = client.CoreV1Api(kube)
    created: list[Any] = []
    writer = threading.Thread(target=lambda: created.append(
        core.create_namespaced_config_map(namespace, configmap("pondered"))))
    writer.start()
    try:
        wait_for(lambda: server.reviews, timeout=10, what="the webhook to be asked")
        # The create is parked on the webhook; localkube answers others meanwhile, writes included.
        assert core.read_namespace(namespace).metadata.name == namespace
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "meanwhile"}}
        assert core.create_namespaced_secret(namespace, secret).metadata.name == "meanwhile"
        assert writer.is_alive() and not created
    finally:
        server.release.set()
        writer.join(timeout=30)
    assert [c.metadata.name for c in created] == ["pondered"]


def test_a_webhook_the_ca_bundle_does_not_vouch_for_is_a_failed_call(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    other = base64.b64encode(server.pki.other_ca_pem).decode()
    configs.create(webhook("wrong-ca", server.url(), other, namespace=namespace, rules=[rule(["configmaps"])]),
                   webhook("not-pem", server.url(), base64.b64encode(b"not a certificate").decode(),
                           namespace=namespace, rules=[rule(["secrets"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("untrusted"))
    assert e.value.status == 500
    assert status_of(e.value)["message"].startswith(
        'Internal error occurred: failed calling webhook "wrong-ca.localkube.test": failed to call webhook: '
        f'Post "{server.url()}?timeout=10s": tls: failed to verify certificate: x509: ')
    with pytest.raises(ApiException) as e:
        core.create_namespaced_secret(namespace, {"apiVersion": "v1", "kind": "Secret",
                                                  "metadata": {"name": "untrusted"}})
    assert status_of(e.value)["message"] == (
        'Internal error occurred: failed calling webhook "not-pem.localkube.test": could not get REST client: '
        "unable to load root certificates: unable to parse bytes as PEM block")
    assert server.reviews == []  # neither request got past TLS


def test_an_answer_that_is_not_a_valid_review_is_a_failed_call(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str) -> None:
    server.answer = lambda req: {"raw": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                         "response": {"uid": "someone-else", "allowed": True}}}
    configs.create(webhook("liar", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("x"))
    uid = server.requests()[0]["uid"]
    assert (e.value.status, status_of(e.value)["message"]) == (500, (
        'Internal error occurred: failed calling webhook "liar.localkube.test": received invalid webhook response: '
        f'expected response.uid="{uid}", got "someone-else"'))


def test_a_service_webhook_is_unreachable_so_its_failure_policy_applies(
        kube: client.ApiClient, configs: Configs, namespace: str) -> None:
    service = {"service": {"namespace": "agentrun-system", "name": "agentrun-api", "path": "/admission/agentruns"}}
    configs.create({**webhook("svc", "", None, namespace=namespace, rules=[rule(["configmaps"])]),
                    "clientConfig": service},
                   {**webhook("svc-ignored", "", None, namespace=namespace, failurePolicy="Ignore",
                              rules=[rule(["secrets"])]), "clientConfig": service})
    stored = configs.api.read_validating_webhook_configuration(configs.names[0])
    assert stored.webhooks[0].client_config.service.port == 443  # defaulted
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("x"))
    assert e.value.status == 500
    assert 'Post "https://agentrun-api.agentrun-system.svc:443/admission/agentruns?timeout=10s": ' \
           "dial tcp: lookup agentrun-api.agentrun-system.svc: no such host" in status_of(e.value)["message"]
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "admitted"}}
    assert core.create_namespaced_secret(namespace, secret).metadata.name == "admitted"


# --------------------------------------------------------------------------------------------------
# warnings, dry run, and configuration changes
# --------------------------------------------------------------------------------------------------


def test_webhook_warnings_reach_kubectl_with_or_without_a_denial(
        kubectl: Kubectl, configs: Configs, server: WebhookServer, namespace: str) -> None:
    server.answer = lambda req: {"allowed": True, "warnings": ['the "k" key is deprecated']}
    configs.create(webhook("warn", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"])]))
    out = kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(configmap("warned")))
    assert out.returncode == 0, out.stderr
    assert 'Warning: the "k" key is deprecated' in out.stderr

    server.answer = lambda req: {"allowed": False, "warnings": ["look before you leap"],
                                 "status": {"code": 403, "reason": "Forbidden", "message": "no"}}
    out = kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(configmap("refused")))
    assert out.returncode == 1
    assert "Warning: look before you leap" in out.stderr
    assert 'admission webhook "warn.localkube.test" denied the request: no' in out.stderr


def test_dry_run_requests_are_sent_marked_dry_run_and_obey_the_answer(
        kube: client.ApiClient, kubectl: Kubectl, configs: Configs, server: WebhookServer, namespace: str) -> None:
    configs.create(webhook("dry", server.url(), server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"])]))
    printed = kubectl_ok(kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-",
                                 input=json.dumps(configmap("dry"))))
    assert "configmap/dry created (server dry run)" in printed
    (req,) = server.requests()
    assert (req["operation"], req["dryRun"], req["options"]["dryRun"]) == ("CREATE", True, ["All"])
    with pytest.raises(ApiException) as missing:
        client.CoreV1Api(kube).read_namespaced_config_map("dry", namespace)
    assert missing.value.status == 404

    server.answer = deny("not even in a dry run")
    out = kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(configmap("dry")))
    assert out.returncode == 1 and "not even in a dry run" in out.stderr


def test_configuration_changes_apply_to_the_next_request_and_configurations_are_never_intercepted(
        kube: client.ApiClient, configs: Configs, server: WebhookServer, namespace: str, closed_port: int) -> None:
    core: Any = client.CoreV1Api(kube)
    core.create_namespaced_config_map(namespace, configmap("before"))
    # A broken webhook for every write of everything carrying this test's label, the configuration included.
    name = configs.create(webhook("broken", f"https://127.0.0.1:{closed_port}/", None, namespace=None,
                                  objectSelector={"matchLabels": {LABEL: configs.run}},
                                  rules=[rule(["*/*"], group="*", version="*", operations=["*"])]))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("labelled", {LABEL: configs.run}))
    assert e.value.status == 500

    # The configuration itself matches the rule and its selector, yet stays editable: admission never
    # intercepts the objects that configure admission.
    configs.api.patch_validating_webhook_configuration(
        name, [{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": server.url()},
               {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": server.pki.ca_bundle}])
    assert core.create_namespaced_config_map(
        namespace, configmap("labelled", {LABEL: configs.run})).metadata.name == "labelled"
    assert [r["name"] for r in server.requests()] == ["labelled"]

    server.answer = deny("closed")
    with pytest.raises(ApiException):
        core.create_namespaced_config_map(namespace, configmap("refused", {LABEL: configs.run}))
    configs.api.delete_validating_webhook_configuration(name)
    assert core.create_namespaced_config_map(
        namespace, configmap("refused", {LABEL: configs.run})).metadata.name == "refused"
