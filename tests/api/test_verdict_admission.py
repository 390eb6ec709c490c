"""Authentic verdicts at admission (SPEC §4): the mutating webhook stamps who created a run and who wrote its
verdict, the validating one refuses verdicts on creation, forged stamps, and verdicts from anyone but the run's
gate hook or an approver of its policy — each refusal a 403 naming the rule and a `VerdictRefused` Event.

Like test_admission.py: the API app in-process, its Kubernetes client against the real localkube, where the
Agents, policies and the Events it records are real objects.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from api.main import State, create_app
from api.settings import ApiSettings
from cli.up import install_crds
from localkube.testing import Handle
from tests.api.test_admission import TOKEN, G, V, admit, review, run
from tests.metrics import sample

API_USER = "system:serviceaccount:agentrun-system:agentrun-api"
VERDICT, BY, CREATED_BY = "sympozium.ai/gate-verdict", "sympozium.ai/gate-verdict-by", "agentrun.dev/created-by"
APPROVE = json.dumps({"action": "approve"})
GATED = {"approvers": ["bob", "group:reviewers"], "requireDistinctApprover": True}


@pytest.fixture(scope="module")
def ns(localkube: Handle) -> Iterator[str]:
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    name = f"vadm-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
    for plural, kind, obj, spec in [
        ("sympoziumpolicies", "SympoziumPolicy", "review", {"gatePolicy": GATED}),
        ("agents", "Agent", "reviewed", {"agents": {"default": {"model": "m"}}, "policyRef": "review"}),
        ("agents", "Agent", "free", {"agents": {"default": {"model": "m"}}}),
    ]:
        custom.create_namespaced_custom_object(G, V, name, plural, {"apiVersion": f"{G}/{V}", "kind": kind,
                                                                    "metadata": {"name": obj}, "spec": spec})
    yield name
    core.delete_namespace(name)
    api.close()


@pytest.fixture(scope="module")
def state(localkube: Handle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[State]:
    tokens = tmp_path_factory.mktemp("verdict-admission") / "tokens"
    tokens.write_text(f"{TOKEN} alice@example.com\n")
    settings = ApiSettings(token_file=str(tokens), trusted_creators=[API_USER])
    kube = config.new_client_from_config(str(localkube.kubeconfig))
    yield State(settings, kube, None)
    kube.close()


@pytest.fixture
async def webhook(state: State) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(state.settings)
    app.state.agentrun = state
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


def as_user(body: dict[str, Any], username: str, *groups: str) -> dict[str, Any]:
    body["request"]["userInfo"] = {"username": username, "groups": [*groups, "system:authenticated"]}
    return body


def annotated(obj: dict[str, Any], **notes: str | None) -> dict[str, Any]:
    """`obj` with annotations set (a value) or removed (None): verdict, by (its writer), created_by."""
    out = copy.deepcopy(obj)
    current = out["metadata"].setdefault("annotations", {})
    for key, value in notes.items():
        real = {"verdict": VERDICT, "by": BY, "created_by": CREATED_BY}[key]
        if value is None:
            current.pop(real, None)
        else:
            current[real] = value
    return out


async def mutations(webhook: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]] | None:
    r = await webhook.post("/admission/agentruns/mutate", json=body)
    assert r.status_code == 200, r.text
    resp = r.json()["response"]
    assert resp["uid"] == body["request"]["uid"] and resp["allowed"] is True
    if "patch" not in resp:
        return None
    assert resp["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    return ops


def refused(resp: dict[str, Any], *texts: str) -> str:
    assert resp["allowed"] is False, resp
    assert (resp["status"]["code"], resp["status"]["reason"]) == (403, "Forbidden"), resp
    message: str = resp["status"]["message"]
    for text in texts:
        assert text in message, (text, message)
    return message


def refusal_events(ns: str, run_name: str, state: State) -> list[str]:
    events: Any = state.kube.core.list_namespaced_event(ns)
    return [e.message for e in events.items
            if e.reason == "VerdictRefused" and e.involved_object.name == run_name and e.type == "Warning"]


async def test_the_mutating_webhook_stamps_the_creator_unless_a_trusted_creator_already_did(
        webhook: httpx.AsyncClient, ns: str) -> None:
    bare = run(ns, "free", {"task": "t"})
    assert await mutations(webhook, as_user(review(ns, bare), "carol", "team-a")) == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by", "value": "carol"},
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by-groups",
         "value": '["team-a","system:authenticated"]'}]
    # Anyone else's claim is overwritten with who they are...
    claimed = annotated(bare, created_by="bob")
    assert await mutations(webhook, as_user(review(ns, claimed), "carol")) == [
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by", "value": "carol"},
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by-groups",
         "value": '["system:authenticated"]'}]
    # ...the API's stamp (its token's identity) is kept; without one the API itself is the creator.
    assert await mutations(webhook, as_user(review(ns, claimed), API_USER)) is None
    assert await mutations(webhook, as_user(review(ns, bare), API_USER)) == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by", "value": API_USER},
        {"op": "add", "path": "/metadata/annotations/agentrun.dev~1created-by-groups",
         "value": '["system:authenticated"]'}]


async def test_the_mutating_webhook_stamps_the_verdicts_writer_and_removes_the_stamp_with_the_verdict(
        webhook: httpx.AsyncClient, ns: str) -> None:
    old = annotated(run(ns, "reviewed", {"task": "t"}), created_by="alice")
    given = annotated(old, verdict=APPROVE, by="someone-else")
    assert await mutations(webhook, as_user(review(ns, given, op="UPDATE", old=old), "bob")) == [
        {"op": "add", "path": "/metadata/annotations/sympozium.ai~1gate-verdict-by", "value": "bob"}]
    stamped = annotated(old, verdict=APPROVE, by="bob")
    cleared = annotated(stamped, verdict=None)
    assert await mutations(webhook, as_user(review(ns, cleared, op="UPDATE", old=stamped), "worker")) == [
        {"op": "remove", "path": "/metadata/annotations/sympozium.ai~1gate-verdict-by"}]
    # Other writes (a finalizer, the status subresource, a deletion) are left alone.
    finalized = copy.deepcopy(stamped)
    finalized["metadata"]["finalizers"] = ["agentrun.dev/cleanup"]
    assert await mutations(webhook, as_user(review(ns, finalized, op="UPDATE", old=stamped), "worker")) is None
    status = as_user(review(ns, given, op="UPDATE", old=old), "worker")
    status["request"]["subResource"] = "status"
    assert await mutations(webhook, status) is None
    assert await mutations(webhook, as_user(review(ns, None, op="DELETE", old=old), "bob")) is None


async def test_a_verdict_on_a_new_run_is_refused_and_recorded(webhook: httpx.AsyncClient, ns: str,
                                                               state: State) -> None:
    name = f"born-{uuid.uuid4().hex[:6]}"
    for notes in ({"verdict": APPROVE}, {"by": "bob"}):
        body = as_user(review(ns, annotated(run(ns, "free", {"task": "t"}, name=name), **notes)), "bob")
        refused(await admit(webhook, body), "a verdict cannot be given at creation")
    events = refusal_events(ns, name, state)  # written before the answer
    assert len(events) == 2 and all(m.startswith("verdict from bob refused (admission): a verdict cannot be given at creation")
               for m in events), events


async def test_the_creator_stamp_must_be_the_writer_and_never_changes(webhook: httpx.AsyncClient, ns: str) -> None:
    new = annotated(run(ns, "free", {"task": "t"}), created_by="bob")
    refused(await admit(webhook, as_user(review(ns, new), "carol")), "agentrun.dev/created-by must name", '"carol"')
    assert (await admit(webhook, as_user(review(ns, new), "bob")))["allowed"] is True
    assert (await admit(webhook, as_user(review(ns, new), API_USER)))["allowed"] is True
    for changed in (annotated(new, created_by="carol"), annotated(new, created_by=None)):
        refused(await admit(webhook, as_user(review(ns, changed, op="UPDATE", old=new), API_USER)),
                "agentrun.dev/created-by cannot be set or changed after the run is created")


async def test_nobody_may_set_the_verdicts_writer_stamp_themselves(webhook: httpx.AsyncClient, ns: str,
                                                                   state: State) -> None:
    name = f"forged-{uuid.uuid4().hex[:6]}"
    old = annotated(run(ns, "reviewed", {"task": "t"}, name=name), created_by="alice")
    # bob is an approver, but the stamp must be his own: not someone else's, not alone, not left stale.
    for new in (annotated(old, verdict=APPROVE, by="carol"), annotated(old, by="bob")):
        refused(await admit(webhook, as_user(review(ns, new, op="UPDATE", old=old), "bob")),
                "sympozium.ai/gate-verdict-by is stamped by the admission webhook", '"bob"')
    stamped = annotated(old, verdict=APPROVE, by="bob")
    stale = annotated(stamped, verdict=json.dumps({"action": "reject", "response": "no"}))
    refused(await admit(webhook, as_user(review(ns, stale, op="UPDATE", old=stamped), "reviewer-x", "reviewers")),
            "sympozium.ai/gate-verdict-by")
    refused(await admit(webhook, as_user(review(ns, annotated(stamped, by=None), op="UPDATE", old=stamped), "bob")),
            "sympozium.ai/gate-verdict-by")
    assert len(refusal_events(ns, name, state)) == 4


async def test_only_the_gate_hook_or_an_approver_other_than_the_creator_may_give_the_verdict(
        webhook: httpx.AsyncClient, ns: str, state: State) -> None:
    name = f"gated-{uuid.uuid4().hex[:6]}"
    # The run's hooks came from its Agent, written by alice (recorded by the worker when the run started): its gate
    # hook may decide a run bob created (issue 27, hole 4: not one whose hooks bob wrote).
    old = annotated(run(ns, "reviewed", {"task": "t"}, name=name), created_by="bob")
    old["status"] = {"phase": "PostRunning", "lifecycleAuthor": "alice"}
    hook = f"system:serviceaccount:{ns}:sympozium-lifecycle-{name}"

    def verdict_by(user: str, *groups: str) -> dict[str, Any]:
        return as_user(review(ns, annotated(old, verdict=APPROVE, by=user), op="UPDATE", old=old), user, *groups)

    assert (await admit(webhook, verdict_by(hook)))["allowed"] is True
    assert (await admit(webhook, verdict_by("dave", "reviewers")))["allowed"] is True
    outsider = refused(await admit(webhook, verdict_by("mallory")), '"mallory"', 'policy "review"',
                       "(gatePolicy.approvers)")
    # bob is an approver, but created the run: requireDistinctApprover.
    refused(await admit(webhook, verdict_by("bob")), '"bob" created this run', "(gatePolicy.requireDistinctApprover)")
    events = refusal_events(ns, name, state)
    assert len(events) == 2 and f"verdict from mallory refused (admission): {outsider}" in events
    # Removing a verdict (the worker's gate step clears a stale one) is anyone's to do.
    stamped = annotated(old, verdict=APPROVE, by=hook)
    cleared = annotated(stamped, verdict=None, by=None)
    assert (await admit(webhook, as_user(review(ns, cleared, op="UPDATE", old=stamped), "mallory")))["allowed"]


async def test_without_gate_policy_approvers_only_the_gate_hook_may_give_the_verdict(
        webhook: httpx.AsyncClient, ns: str) -> None:
    old = annotated(run(ns, "free", {"task": "t"}, name="open"), created_by="alice")
    body = review(ns, annotated(old, verdict=APPROVE, by="alice"), op="UPDATE", old=old)
    refused(await admit(webhook, as_user(body, "alice")), "only its gate hook",
            f"system:serviceaccount:{ns}:sympozium-lifecycle-open", "has no policy")


async def test_refusals_are_counted_by_where_and_rule(webhook: httpx.AsyncClient, ns: str, state: State) -> None:
    before = state.refusals["admission gatePolicy.approvers"]
    old = annotated(run(ns, "reviewed", {"task": "t"}, name="counted"), created_by="alice")
    body = as_user(review(ns, annotated(old, verdict=APPROVE, by="eve"), op="UPDATE", old=old), "eve")
    refused(await admit(webhook, body))
    metrics = (await webhook.get("/metrics")).text
    assert state.refusals["admission gatePolicy.approvers"] == before + 1
    assert sample(metrics, "agentrun_verdicts_refused_total", via="admission", rule="gatePolicy.approvers") == before + 1


async def test_under_approvers_a_gate_hook_its_runs_creator_wrote_cannot_decide(
        webhook: httpx.AsyncClient, ns: str, state: State) -> None:
    """Issue 27, hole 4: with gatePolicy approvers, a verdict's authority comes from who wrote the hook that gave it.
    The run's own spec.lifecycle is its creator's (the worker records `lifecycleAuthor` when the run starts), and so
    is an Agent its creator wrote; a hook whose author was not recorded cannot decide either. Each refusal is an
    Event, a log line and a count, like the others."""
    name = f"own-{uuid.uuid4().hex[:6]}"
    hook = f"system:serviceaccount:{ns}:sympozium-lifecycle-{name}"
    gate = {"postRun": [{"name": "gate", "image": "busybox", "gate": True}],
            "rbac": [{"apiGroups": [G], "resources": ["agentruns"], "verbs": ["get", "patch"]}]}
    own = annotated(run(ns, "reviewed", {"task": "t", "lifecycle": gate}, name=name), created_by="bob")
    before = state.refusals["admission creators-gate-hook"]
    for status in ({"lifecycleAuthor": "bob"}, {}):
        old = {**own, "status": {"phase": "PostRunning", **status}}
        body = as_user(review(ns, annotated(old, verdict=APPROVE, by=hook), op="UPDATE", old=old), hook)
        message = refused(await admit(webhook, body), f"the run's gate hook ({hook}) may not decide it under "
                                                      'policy "review", which names approvers')
        assert ('its hooks were written by "bob", who created the run' if status else "was not recorded") in message
    assert state.refusals["admission creators-gate-hook"] == before + 2
    events = refusal_events(ns, name, state)
    assert len(events) == 2 and all(e.startswith(f"verdict from {hook} refused (admission): the run's gate hook")
                                    for e in events), events
    # An approver still may; and without approvers (Agent "free" has no policy) the run's own gate hook decides.
    old = {**own, "status": {"phase": "PostRunning", "lifecycleAuthor": "bob"}}
    body = as_user(review(ns, annotated(old, verdict=APPROVE, by="dave"), op="UPDATE", old=old), "dave", "reviewers")
    assert (await admit(webhook, body))["allowed"] is True
    free = {**annotated(run(ns, "free", {"task": "t", "lifecycle": gate}, name=name), created_by="bob"),
            "status": {"lifecycleAuthor": "bob"}}
    body = as_user(review(ns, annotated(free, verdict=APPROVE, by=hook), op="UPDATE", old=free), hook)
    assert (await admit(webhook, body))["allowed"] is True
