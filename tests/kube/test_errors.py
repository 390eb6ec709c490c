"""The access layer: every failure of a real call against localkube arrives as one typed error,
and each boundary (activities, API) maps those errors once."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError

from activities.errors import application_error, kube_activity
from api.errors import http_status
from kube import (
    BadRequest,
    ClientError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    Kube,
    KubeError,
    NotFound,
    Transient,
    Unauthorized,
    finalizer_added,
    finalizer_removed,
    kube_error,
)


def _cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


async def test_a_missing_object_is_not_found_with_the_servers_message(kube: client.ApiClient, namespace: str) -> None:
    k = Kube(kube)
    with pytest.raises(NotFound) as e:
        await k.call(k.core.read_namespaced_config_map, "nope", namespace, action="read ConfigMap nope")
    assert e.value.status == 404 and e.value.reason == "NotFound"
    assert str(e.value).startswith("read ConfigMap nope: ") and '"nope" not found' in str(e.value)


async def test_creating_twice_is_a_conflict_that_says_already_exists(kube: client.ApiClient, namespace: str) -> None:
    k = Kube(kube)
    await k.call(k.core.create_namespaced_config_map, namespace, _cm("c"), action="create")
    with pytest.raises(Conflict) as e:
        await k.call(k.core.create_namespaced_config_map, namespace, _cm("c"), action="create")
    assert e.value.already_exists


async def test_a_stale_write_is_a_conflict_that_is_not_already_exists(kube: client.ApiClient, namespace: str) -> None:
    k = Kube(kube)
    made = await k.call(k.core.create_namespaced_config_map, namespace, _cm("s"), action="create")
    await k.call(k.core.patch_namespaced_config_map, "s", namespace, {"data": {"k": "w"}}, action="patch")
    stale = {"metadata": {"resourceVersion": made.metadata.resource_version}, "data": {"k": "x"}}
    with pytest.raises(Conflict) as e:
        await k.call(k.core.patch_namespaced_config_map, "s", namespace, stale, action="patch")
    assert not e.value.already_exists


async def test_an_invalid_object_is_invalid_naming_the_field(kube: client.ApiClient, namespace: str) -> None:
    k = Kube(kube)
    with pytest.raises(Invalid) as e:
        await k.call(k.core.create_namespaced_config_map, namespace, _cm("Not_A_Name"), action="create")
    assert e.value.status == 422 and "metadata.name" in e.value.message


async def test_no_answer_at_all_is_transient(kube: client.ApiClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    conf = client.Configuration()
    conf.host = f"http://127.0.0.1:{port}"
    conf.retries = False
    k = Kube(client.ApiClient(conf))
    with pytest.raises(Transient) as e:
        await k.call(k.core.list_namespace, action="list namespaces")
    assert e.value.status == 0 and e.value.transient


@pytest.mark.parametrize(("status", "cls"), [
    (400, BadRequest), (401, Unauthorized), (403, Forbidden), (404, NotFound), (405, BadRequest), (409, Conflict),
    (410, Gone), (418, ClientError), (422, Invalid), (429, Transient), (500, Transient), (503, Transient)])
def test_each_status_has_its_error(status: int, cls: type[KubeError]) -> None:
    e = kube_error(client.ApiException(status=status, reason="Why"), action="act")
    assert type(e) is cls
    assert e.status == status and e.message == "Why"


def test_something_that_is_not_a_kubernetes_failure_is_not_hidden_as_one() -> None:
    with pytest.raises(TypeError, match="ValueError is not a Kubernetes failure"):
        kube_error(ValueError("bug"), action="act")


@pytest.mark.parametrize(("error", "kind", "retryable"), [
    (Forbidden("a", "m", status=403), "KubernetesForbidden", False),
    (Invalid("a", "m", status=422), "KubernetesInvalid", False),
    (BadRequest("a", "m", status=415), "KubernetesUnsupportedMediaType", False),
    (Unauthorized("a", "m", status=401), "KubernetesUnauthorized", False),
    (NotFound("a", "m", status=404), "KubernetesTransient404", True),
    (Conflict("a", "m", status=409), "KubernetesTransient409", True),
    (Gone("a", "m", status=410), "KubernetesTransient410", True),
    (Transient("a", "m", status=503), "KubernetesTransient503", True),
    (Transient("a", "connection refused"), "KubernetesUnavailable", True),
])
def test_activities_retry_exactly_the_transient_failures(error: KubeError, kind: str, retryable: bool) -> None:
    app = application_error(error)
    assert (app.type, app.non_retryable) == (kind, not retryable)
    assert app.message == str(error)


def test_a_404_while_creating_is_permanent_the_namespace_is_gone() -> None:
    app = application_error(NotFound("create Job j", "namespaces \"x\" not found", status=404), creating=True)
    assert (app.type, app.non_retryable) == ("KubernetesNotFound", True)


async def test_a_kube_error_escaping_an_activity_leaves_as_an_application_error() -> None:
    @kube_activity
    async def step() -> None:
        raise Forbidden("create Role r", "forbidden: cannot escalate", status=403)

    with pytest.raises(ApplicationError) as e:
        await step()
    assert e.value.non_retryable and e.value.type == "KubernetesForbidden"
    assert isinstance(e.value.__cause__, Forbidden)


@pytest.mark.parametrize(("error", "code"), [
    (NotFound("a", "m", status=404), 404), (Conflict("a", "m", status=409), 409), (Forbidden("a", "m", status=403), 403),
    (Invalid("a", "m", status=422), 422), (BadRequest("a", "m", status=400), 400), (Gone("a", "m", status=410), 409),
    (Unauthorized("a", "m", status=401), 502), (Transient("a", "m", status=500), 503), (Transient("a", "down"), 503)])
def test_the_api_answers_each_failure_with_its_own_status(error: KubeError, code: int) -> None:
    assert http_status(error) == code


def test_finalizer_patches_carry_the_version_read_and_say_when_there_is_nothing_to_do() -> None:
    meta = {"finalizers": ["other"], "resourceVersion": "7"}
    assert finalizer_added(meta, "ours") == {"metadata": {"finalizers": ["other", "ours"], "resourceVersion": "7"}}
    assert finalizer_removed(meta, "ours") is None
    with_ours = {"finalizers": ["other", "ours"], "resourceVersion": "8"}
    assert finalizer_added(with_ours, "ours") is None
    assert finalizer_removed(with_ours, "ours") == {"metadata": {"finalizers": ["other"], "resourceVersion": "8"}}


def test_the_status_causes_are_kept_for_who_must_tell_one_refusal_from_another() -> None:
    body = ('{"kind":"Status","message":"the server rejected our request due to an error in our request",'
            '"reason":"Invalid","details":{"causes":[{"message":"testing value /metadata/uid failed: test failed"}]}}')
    e = kube_error(client.ApiException(status=422, reason="Unprocessable Entity"), action="a")
    assert e.causes == []
    exc = client.ApiException(status=422, reason="Unprocessable Entity")
    exc.body = body
    e = kube_error(exc, action="write status")
    assert isinstance(e, Invalid) and e.causes == ["testing value /metadata/uid failed: test failed"]
