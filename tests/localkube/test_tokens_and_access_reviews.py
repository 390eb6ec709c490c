"""TokenRequest (serviceaccounts/token) and SubjectAccessReview / LocalSubjectAccessReview, end to end.

Tokens are requested through the real `kubernetes` client and `kubectl create token`, and used by the
client and by `kubectl --token`; reviews go through `AuthorizationV1Api` and `kubectl create -f`.
Identities other than the admin are ServiceAccounts (through their tokens) or impersonated users.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from localkube.testing import Handle
from tests.conftest import Kubectl

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
DEFAULT_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


def ok(result: Any) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return str(result.stdout)


def status_of(e: ApiException) -> Obj:
    body: Obj = json.loads(e.body or "{}")
    return body


@contextmanager
def client_as(localkube: Handle, *, token: str = "", impersonate: str = "") -> Iterator[client.ApiClient]:
    """A client with localkube's kubeconfig, authenticating with `token` or impersonating `impersonate`."""
    api = config.new_client_from_config(str(localkube.kubeconfig))
    if token:
        api.configuration.refresh_api_key_hook = None
        api.configuration.api_key_prefix = {}
        api.configuration.api_key = {"BearerToken": f"Bearer {token}"}
    if impersonate:
        api.set_default_header("Impersonate-User", impersonate)
    try:
        yield api
    finally:
        api.close()


def grant(kube: client.ApiClient, namespace: str, name: str, rules: list[Obj], *subjects: Obj) -> None:
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
        "subjects": list(subjects)})


def sa_subject(namespace: str, name: str) -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}



@pytest.fixture
def robot(kube: client.ApiClient, namespace: str) -> str:
    """A ServiceAccount that may read configmaps (and nothing else) in the namespace."""
    cast(Any, client.CoreV1Api(kube)).create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    grant(kube, namespace, "read-cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
          sa_subject(namespace, "robot"))
    return "robot"


def request_token(kube: client.ApiClient, namespace: str, sa: str, **spec: Any) -> Any:
    core: Any = client.CoreV1Api(kube)
    return core.create_namespaced_service_account_token(sa, namespace, {"spec": spec})


def can_list_configmaps(localkube: Handle, namespace: str, token: str) -> int:
    """200, or the status code of the refusal, for listing configmaps with `token`."""
    with client_as(localkube, token=token) as api:
        try:
            client.CoreV1Api(api).list_namespaced_config_map(namespace)
        except ApiException as e:
            return int(e.status)
    return 200


# --------------------------------------------------------------------------------------------------
# TokenRequest
# --------------------------------------------------------------------------------------------------


def test_a_requested_token_authenticates_as_its_service_account_until_that_is_deleted(
        localkube: Handle, kube: client.ApiClient, namespace: str, robot: str) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    tr = request_token(kube, namespace, robot, expirationSeconds=900)
    assert tr.kind == "TokenRequest" and tr.api_version == "authentication.k8s.io/v1"
    assert tr.spec.audiences == [DEFAULT_AUDIENCE]
    assert tr.spec.expiration_seconds == 900
    expires = tr.status.expiration_timestamp
    assert before + dt.timedelta(seconds=900) <= expires <= before + dt.timedelta(seconds=902)
    token = tr.status.token
    assert token

    user = f"system:serviceaccount:{namespace}:{robot}"
    with client_as(localkube, token=token) as api:
        names: Any = client.CoreV1Api(api).list_namespaced_config_map(namespace).items
        assert "kube-root-ca.crt" in {cm.metadata.name for cm in names}
        with pytest.raises(ApiException) as e:
            client.CoreV1Api(api).list_namespaced_secret(namespace)
        assert (e.value.status, status_of(e.value)["message"]) == (
            403, f'secrets is forbidden: User "{user}" cannot list resource "secrets" in API group "" in the '
                 f'namespace "{namespace}"')
        review: Any = cast(Any, client.AuthorizationV1Api(api)).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"namespace": namespace, "verb": "get", "resource": "configmaps"}}})
        assert review.status.allowed is True
        assert review.status.reason == f'RBAC: allowed by RoleBinding "read-cm/{namespace}" of Role "read-cm" to ' \
                                       f'ServiceAccount "{robot}/{namespace}"'

    # The default expiration is an hour; a token for another audience does not authenticate to the API server.
    default = request_token(kube, namespace, robot)
    assert default.spec.expiration_seconds == 3600
    vault = request_token(kube, namespace, robot, audiences=["vault"])
    assert vault.spec.audiences == ["vault"]
    assert can_list_configmaps(localkube, namespace, vault.status.token) == 401

    client.CoreV1Api(kube).delete_namespaced_service_account(robot, namespace)
    assert can_list_configmaps(localkube, namespace, token) == 401
    # A new ServiceAccount of the same name is another identity: the old token stays invalid.
    cast(Any, client.CoreV1Api(kube)).create_namespaced_service_account(namespace, {"metadata": {"name": robot}})
    assert can_list_configmaps(localkube, namespace, token) == 401


def test_a_token_bound_to_an_object_lives_only_as_long_as_the_object(
        localkube: Handle, kube: client.ApiClient, namespace: str, robot: str) -> None:
    core: Any = client.CoreV1Api(kube)
    secret = core.create_namespaced_secret(namespace, {"metadata": {"name": "anchor"}, "stringData": {"a": "b"}})
    tr = request_token(kube, namespace, robot, boundObjectRef={"apiVersion": "v1", "kind": "Secret", "name": "anchor"})
    assert tr.spec.bound_object_ref.uid == secret.metadata.uid
    assert can_list_configmaps(localkube, namespace, tr.status.token) == 200
    core.delete_namespaced_secret("anchor", namespace)
    assert can_list_configmaps(localkube, namespace, tr.status.token) == 401

    with pytest.raises(ApiException) as e:
        request_token(kube, namespace, robot, boundObjectRef={"apiVersion": "apps/v1", "kind": "Deployment",
                                                              "name": "x"})
    assert (e.value.status, status_of(e.value)["message"]) == \
        (400, "cannot bind token to object of type apps/v1, Kind=Deployment")
    with pytest.raises(ApiException) as e:
        request_token(kube, namespace, robot, boundObjectRef={"apiVersion": "v1", "kind": "Pod", "name": "gone"})
    assert (e.value.status, status_of(e.value)["message"]) == (404, 'pods "gone" not found')


def test_token_requests_are_validated_as_the_real_server_does(
        kube: client.ApiClient, namespace: str, robot: str) -> None:
    with pytest.raises(ApiException) as e:
        request_token(kube, namespace, "ghost")
    assert (e.value.status, status_of(e.value)["message"]) == (404, 'serviceaccounts "ghost" not found')
    with pytest.raises(ApiException) as e:
        request_token(kube, namespace, robot, expirationSeconds=599)
    assert (e.value.status, status_of(e.value)["message"]) == (
        422, 'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: may not '
             "specify a duration less than 10 minutes")
    assert request_token(kube, namespace, robot, expirationSeconds=600).spec.expiration_seconds == 600
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_service_account_token(robot, namespace, {"metadata": {"name": "other"}, "spec": {}})
    assert (e.value.status, status_of(e.value)["message"]) == (
        422, f'TokenRequest.authentication.k8s.io "{robot}" is invalid: metadata.name: Invalid value: "other": must '
             "match the service account name if specified")


def test_kubectl_create_token_and_kubectl_token(
        kubectl: Kubectl, kube: client.ApiClient, namespace: str, robot: str) -> None:
    token = ok(kubectl("create", "token", robot, "-n", namespace, "--duration=15m")).strip()
    listed = ok(kubectl("--token", token, "get", "configmaps", "-n", namespace, "-o", "name"))
    assert "configmap/kube-root-ca.crt" in listed.split()
    forbidden = kubectl("--token", token, "get", "secrets", "-n", namespace)
    assert forbidden.returncode == 1
    assert (f'Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:{namespace}:{robot}" '
            f'cannot list resource "secrets" in API group "" in the namespace "{namespace}"') in forbidden.stderr
    can_i = kubectl("--token", token, "auth", "can-i", "delete", "configmaps", "-n", namespace)
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")

    too_short = kubectl("create", "token", robot, "-n", namespace, "--duration=5m")
    assert too_short.returncode != 0
    assert ('TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not '
            "specify a duration less than 10 minutes") in too_short.stderr
    missing = kubectl("create", "token", "ghost", "-n", namespace)
    assert missing.returncode != 0
    assert 'serviceaccounts "ghost" not found' in missing.stderr

    # Creating a token needs `create` on serviceaccounts/token: the robot cannot mint one for itself ...
    as_robot = f"--as=system:serviceaccount:{namespace}:{robot}"
    refused = kubectl("create", "token", robot, "-n", namespace, as_robot)
    assert refused.returncode != 0
    assert (f'serviceaccounts "{robot}" is forbidden: User "system:serviceaccount:{namespace}:{robot}" cannot create '
            f'resource "serviceaccounts/token" in API group "" in the namespace "{namespace}"') in refused.stderr
    # ... until a Role grants exactly that.
    grant(kube, namespace, "mint", [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}],
          sa_subject(namespace, robot))
    minted = ok(kubectl("create", "token", robot, "-n", namespace, as_robot)).strip()
    assert ok(kubectl("--token", minted, "auth", "can-i", "list", "configmaps", "-n", namespace)).strip() == "yes"


# --------------------------------------------------------------------------------------------------
# SubjectAccessReview and LocalSubjectAccessReview
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def readers(kube: client.ApiClient, namespace: str) -> None:
    """User alice and group auditors may get and list pods in the namespace."""
    grant(kube, namespace, "pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
          {"apiGroup": RBAC, "kind": "User", "name": "alice"}, {"apiGroup": RBAC, "kind": "Group", "name": "auditors"})


def sar(user: str = "", groups: list[str] | None = None, **attributes: str) -> Obj:
    spec: Obj = {"resourceAttributes": attributes}
    if user:
        spec["user"] = user
    if groups is not None:
        spec["groups"] = groups
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def test_subject_access_reviews_decide_for_the_given_user_and_groups(
        kube: client.ApiClient, namespace: str, other_namespace: str, readers: None) -> None:
    authz: Any = client.AuthorizationV1Api(kube)
    allowed = authz.create_subject_access_review(sar("alice", namespace=namespace, verb="list", resource="pods"))
    assert (allowed.status.allowed, allowed.status.denied) == (True, None)
    assert allowed.status.reason == \
        f'RBAC: allowed by RoleBinding "pod-reader/{namespace}" of Role "pod-reader" to User "alice"'
    assert allowed.spec.user == "alice"

    def decide(body: Obj) -> bool:
        return bool(authz.create_subject_access_review(body).status.allowed)

    assert not decide(sar("alice", namespace=namespace, verb="delete", resource="pods"))
    assert not decide(sar("alice", namespace=other_namespace, verb="list", resource="pods"))
    assert not decide(sar("alice", namespace=namespace, verb="get", resource="pods", subresource="log"))
    assert decide(sar("bob", ["auditors"], namespace=namespace, verb="get", resource="pods", name="p"))
    assert not decide(sar("bob", namespace=namespace, verb="get", resource="pods"))
    # Decided for the user named, not for the (all-powerful) caller, and with only the groups given.
    assert not decide(sar("mallory", namespace=namespace, verb="get", resource="secrets"))
    assert decide(sar("mallory", ["system:masters"], namespace=namespace, verb="delete", resource="secrets"))
    url: dict[str, Any] = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": "alice", "groups": ["system:authenticated"],
                    "nonResourceAttributes": {"path": "/version", "verb": "get"}}}
    assert decide(url)
    url["spec"]["groups"] = []
    assert not decide(url)

    local = authz.create_namespaced_local_subject_access_review(namespace, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods"}}})
    assert local.status.allowed is True
    assert (local.metadata.namespace, local.spec.resource_attributes.namespace) == (namespace, namespace)
    with pytest.raises(ApiException) as e:
        authz.create_namespaced_local_subject_access_review(namespace, {
            "spec": {"user": "alice", "resourceAttributes": {"namespace": other_namespace, "verb": "list",
                                                               "resource": "pods"}}})
    assert (e.value.status, status_of(e.value)["message"]) == \
        (400, f"spec.resourceAttributes.namespace must match namespace: {namespace}")


def test_an_invalid_subject_access_review_is_a_422(kube: client.ApiClient, namespace: str) -> None:
    authz: Any = client.AuthorizationV1Api(kube)
    with pytest.raises(ApiException) as e:
        authz.create_subject_access_review(sar(namespace=namespace, verb="list", resource="pods"))
    status = status_of(e.value)
    assert (e.value.status, status["reason"], status["message"]) == (
        422, "Invalid", 'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at '
                        "least one of user or group must be specified")
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.user", "message":
                                            'Invalid value: "": at least one of user or group must be specified'}]
    with pytest.raises(ApiException) as e:
        authz.create_subject_access_review({"spec": {"user": "alice"}})
    assert (e.value.status, status_of(e.value)["message"]) == (
        422, 'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
             '"null": exactly one of nonResourceAttributes or resourceAttributes must be specified')


def test_only_callers_allowed_to_create_reviews_may_ask(
        localkube: Handle, kube: client.ApiClient, kubectl: Kubectl, namespace: str, readers: None) -> None:
    body = sar("alice", namespace=namespace, verb="list", resource="pods")
    caller = f"system:serviceaccount:{namespace}:auditor"
    with client_as(localkube, impersonate=caller) as api:
        authz: Any = client.AuthorizationV1Api(api)
        with pytest.raises(ApiException) as e:
            authz.create_subject_access_review(body)
        assert (e.value.status, status_of(e.value)["message"]) == (
            403, f'subjectaccessreviews.authorization.k8s.io is forbidden: User "{caller}" cannot create resource '
                 '"subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope')
        local = {**body, "kind": "LocalSubjectAccessReview"}
        with pytest.raises(ApiException) as e:
            authz.create_namespaced_local_subject_access_review(namespace, local)
        assert e.value.status == 403
        # The namespace's `admin` role includes localsubjectaccessreviews, not the cluster-wide kind.
        cast(Any, client.RbacAuthorizationV1Api(kube)).create_namespaced_role_binding(namespace, {
            "metadata": {"name": "auditor-admin"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "admin"},
            "subjects": [sa_subject(namespace, "auditor")]})
        assert authz.create_namespaced_local_subject_access_review(namespace, local).status.allowed is True
        with pytest.raises(ApiException) as e:
            authz.create_subject_access_review(body)
        assert e.value.status == 403

    # kubectl creates one from a manifest and prints the decision.
    out = json.loads(ok(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(body))))
    assert (out["kind"], out["status"]["allowed"]) == ("SubjectAccessReview", True)
    resources = ok(kubectl("api-resources", "--api-group=authorization.k8s.io", "-o", "name")).split()
    assert {"subjectaccessreviews.authorization.k8s.io",
            "localsubjectaccessreviews.authorization.k8s.io"} <= set(resources)


def test_a_token_review_says_who_a_token_is_for_whom_the_review_is_allowed(
        localkube: Handle, kube: client.ApiClient, kubectl: Kubectl, namespace: str, robot: str) -> None:
    """TokenReview (authentication.k8s.io/v1), as a server that delegates authentication asks it: a valid token is
    its ServiceAccount (or the admin) with its groups and audiences; an unknown one, one of another audience, or one
    whose account is gone is not authenticated. Asking needs `create tokenreviews` (system:auth-delegator)."""
    auth: Any = client.AuthenticationV1Api(kube)
    token = request_token(kube, namespace, robot).status.token
    review = auth.create_token_review({"spec": {"token": token}})
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{namespace}:{robot}"
    assert review.status.user.groups == ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                         "system:authenticated"]
    assert review.status.user.uid and review.status.audiences == [DEFAULT_AUDIENCE]
    admin = auth.create_token_review({"spec": {"token": localkube.token}}).status
    assert (admin.authenticated, admin.user.username) == (True, "admin") and "system:masters" in admin.user.groups
    for bad in ("not-a-token", token):
        spec: Obj = {"token": bad, "audiences": ["https://other.example"]} if bad == token else {"token": bad}
        status = auth.create_token_review({"spec": spec}).status
        assert status.authenticated is not True and status.error, status
    cast(Any, client.CoreV1Api(kube)).delete_namespaced_service_account(robot, namespace)
    assert auth.create_token_review({"spec": {"token": token}}).status.authenticated is not True

    caller = f"system:serviceaccount:{namespace}:auditor"
    with client_as(localkube, impersonate=caller) as api:
        asker: Any = client.AuthenticationV1Api(api)
        with pytest.raises(ApiException) as e:
            asker.create_token_review({"spec": {"token": "x"}})
        assert e.value.status == 403
        cast(Any, client.RbacAuthorizationV1Api(kube)).create_cluster_role_binding({
            "metadata": {"name": f"{namespace}-delegator"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": [sa_subject(namespace, "auditor")]})
        try:
            status = asker.create_token_review({"spec": {"token": "x"}}).status
            assert status.authenticated is not True
        finally:
            cast(Any, client.RbacAuthorizationV1Api(kube)).delete_cluster_role_binding(f"{namespace}-delegator")
    resources = ok(kubectl("api-resources", "--api-group=authentication.k8s.io", "-o", "name")).split()
    assert "tokenreviews.authentication.k8s.io" in resources
