"""Who may decide a gate (SPEC §4: authentic verdicts, separation of duties), against the whole stack.

The API's admission webhooks are registered in localkube as `agentrun up` registers them (cli/webhooks.py), with
the name the session's bridge looks for, but only for the test's namespace: a verdict annotation is then admitted
only from the run's gate hook or an approver of its policy, stamped with its writer, and the bridge makes that
writer `decidedBy`. People act as ServiceAccounts with tokens from TokenRequest. Without the webhooks the same
annotation verdict is `unverified`. Through the HTTP API, the token's identity must pass the same `gatePolicy`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from cli import webhooks
from cli.stack import free_port
from localkube.certs import ensure_tls
from tests.e2e.conftest import Stack, agent, agent_run, allow, api_process
from tests.e2e.test_gate import RBAC, annotate, gate_hook
from tests.e2e.test_requests import audit_lines, requests_of
from tests.localkube.test_tokens_and_access_reviews import client_as, grant, request_token, sa_subject
from tests.metrics import sample
from tests.waiting import wait_for

G, V = "sympozium.ai", "v1alpha1"
VERDICT, BY = "sympozium.ai/gate-verdict", "sympozium.ai/gate-verdict-by"
APPROVE = json.dumps({"action": "approve", "reason": "reviewed"})
# Bearer tokens of this module's API process: identity and groups.
TOKENS = {"t-alice-authority-01": "alice@example.com", "t-bob-authority-02": "bob@example.com",
          "t-carol-authority-03": "carol@example.com reviewers", "t-eve-authority-04": "eve@example.com",
          # An identity named like a group entry (issue 27, hole 12), in no group.
          "t-mallory-authority-05": "group:reviewers"}
ALICE, BOB, CAROL, EVE, MALLORY = TOKENS


@dataclass
class AuthorityApi:
    base: str
    webhook: str
    ca_pem: str


@pytest.fixture(scope="module")
def authority_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorityApi]:
    """`python -m api` as `agentrun up` runs it: the API on HTTP, its webhooks on TLS, the admin kubeconfig trusted
    as the creator it stamps."""
    d = tmp_path_factory.mktemp("authority")
    # RBAC lets every token approve (and create) everywhere: what is under test is what gatePolicy narrows.
    allow(stack.api, *TOKENS.values(), binding="authority")
    tls = ensure_tls(d / "tls")
    tokens = d / "tokens"
    tokens.write_text("".join(f"{t} {who}\n" for t, who in TOKENS.items()))
    port, webhook_port = free_port(), free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port),
           "AGENTRUN_WEBHOOK_PORT": str(webhook_port), "AGENTRUN_TLS_CERT_FILE": str(tls.cert),
           "AGENTRUN_TLS_KEY_FILE": str(tls.key), "AGENTRUN_TRUSTED_CREATORS": '["admin"]'}
    out = AuthorityApi(f"http://127.0.0.1:{port}", f"https://127.0.0.1:{webhook_port}", tls.ca_pem)
    with api_process(env, d / "api.log", {out.base + "/readyz": True}):
        yield out


@pytest.fixture
def protected(stack: Stack, authority_api: AuthorityApi, namespace: str) -> Iterator[str]:
    """The webhook pair registered for this test's namespace only (Fail: every answer below is the webhook's)."""
    configs = webhooks.configurations(authority_api.webhook, authority_api.ca_pem, failure_policy="Fail",
                                      namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}})
    webhooks.register(stack.api, configs)
    try:
        yield namespace
    finally:
        webhooks.unregister(stack.api, configs)


def policy(name: str, **gate: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "SympoziumPolicy", "metadata": {"name": name},
            "spec": {"gatePolicy": gate}}


def reviewed_agent(stack: Stack, ns: str, *, lifecycle: dict[str, Any] | None = None, **gate: Any) -> None:
    """Agent `helper` under policy "review" with `gatePolicy` = `gate` (and default `lifecycle` for its runs)."""
    stack.create(ns, "sympoziumpolicies", policy("review", **gate))
    body = agent("helper", lifecycle=lifecycle) if lifecycle else agent()
    body["spec"]["policyRef"] = "review"
    stack.create(ns, "agents", body)


def waiting(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        run = stack.get_run(ns, name) or {}
        return run if ((run.get("status") or {}).get("gate") or {}).get("state") == "pending" else None
    return wait_for(probe, timeout=60, interval=0.1, what=f"run {name}'s gate to wait for a verdict")


def person(stack: Stack, ns: str, name: str) -> str:
    """A ServiceAccount that may get and patch agentruns (all kubectl needs to annotate a verdict); its token."""
    client.CoreV1Api(stack.api).create_namespaced_service_account(ns, {"metadata": {"name": name}})  # type: ignore[arg-type]
    grant(stack.api, ns, f"{name}-runs", RBAC, sa_subject(ns, name))
    return str(request_token(stack.api, ns, name, expirationSeconds=3600).status.token)


def annotate_as(stack: Stack, token: str, ns: str, run: str, notes: dict[str, str]) -> dict[str, Any]:
    with client_as(stack.kube, token=token) as api:
        out: Any = client.CustomObjectsApi(api).patch_namespaced_custom_object(
            G, V, ns, "agentruns", run, {"metadata": {"annotations": notes}})
    return cast(dict[str, Any], out)


def refused(call: Any) -> str:
    with pytest.raises(ApiException) as e:
        call()
    assert e.value.status == 403, e.value.body
    message: str = json.loads(str(e.value.body))["message"]
    return message


def refusal_events(stack: Stack, ns: str, run: str) -> list[str]:
    events: Any = stack.core.list_namespaced_event(ns)
    return [e.message for e in events.items if e.reason == "VerdictRefused" and e.involved_object.name == run]


def test_a_run_created_with_a_verdict_is_refused_and_the_refusal_recorded(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    body = agent_run("early", lifecycle={"postRun": [gate_hook("true")]})
    body["metadata"]["annotations"] = {VERDICT: APPROVE}
    message = refused(lambda: stack.create(ns, "agentruns", body))
    assert "denied the request: a verdict cannot be given at creation" in message, message
    assert stack.get_run(ns, "early") is None
    assert refusal_events(stack, ns, "early") == [
        "verdict from admin refused (admission): a verdict cannot be given at creation: sympozium.ai/gate-verdict "
        "may not be set on a new run (a verdict counts only while its gate waits)"]


def test_patch_rights_are_no_standing_to_decide_and_only_an_approver_may_with_its_own_name(
        stack: Stack, protected: str) -> None:
    ns = protected
    approver = f"system:serviceaccount:{ns}:approver"
    reviewed_agent(stack, ns, approvers=[approver])
    stack.create(ns, "agentruns", agent_run("held", lifecycle={"postRun": [gate_hook("true")], "gateTimeout": "5m"}))
    waiting(stack, ns, "held")
    mallory, approver_token = person(stack, ns, "mallory"), person(stack, ns, "approver")

    # mallory may patch the run, but is neither its gate hook nor an approver: refused at admission.
    message = refused(lambda: annotate_as(stack, mallory, ns, "held", {VERDICT: APPROVE}))
    assert f'"system:serviceaccount:{ns}:mallory" may not decide this gate' in message, message
    assert 'approvers of policy "review" (gatePolicy.approvers)' in message, message
    # Nobody writes the stamp themselves, approver or not.
    for token in (mallory, approver_token):
        message = refused(lambda t=token: annotate_as(stack, t, ns, "held", {BY: approver}))
        assert "sympozium.ai/gate-verdict-by is stamped by the admission webhook" in message, message
    events = refusal_events(stack, ns, "held")  # (listed by their generated names: in no particular order)
    assert sorted(m.split(": ", 1)[0] for m in events) == [
        f"verdict from system:serviceaccount:{ns}:approver refused (admission)",
        f"verdict from system:serviceaccount:{ns}:mallory refused (admission)",
        f"verdict from system:serviceaccount:{ns}:mallory refused (admission)"], events
    assert sum("(gatePolicy.approvers)" in m for m in events) == 1, events
    run = stack.get_run(ns, "held") or {}
    assert run["status"]["gate"]["state"] == "pending" and "gateVerdict" not in run["status"]
    assert VERDICT not in (run["metadata"].get("annotations") or {})

    # The approver may; a stamp it claims for someone else is replaced with its own name.
    stamped = annotate_as(stack, approver_token, ns, "held", {VERDICT: APPROVE, BY: "someone-else"})
    assert stamped["metadata"]["annotations"][BY] == approver
    st = stack.wait_phase(ns, "held", timeout=60)["status"]
    assert (st["phase"], st["gateVerdict"], st["gate"]["decidedBy"]) == ("Succeeded", "approved", approver), st
    assert st["result"] == "echo: hello"


def test_the_gate_hooks_own_verdict_is_decided_by_its_service_account(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("self", lifecycle={
        "postRun": [gate_hook(annotate({"action": "reject", "response": "not this"}))], "rbac": RBAC}))
    st = stack.wait_phase(ns, "self", timeout=90)["status"]
    assert (st["gateVerdict"], st["result"]) == ("rejected", "not this"), st
    assert st["gate"]["decidedBy"] == f"system:serviceaccount:{ns}:sympozium-lifecycle-self", st["gate"]
    assert refusal_events(stack, ns, "self") == []


def test_without_the_webhooks_an_annotation_verdict_is_unverified_whatever_it_claims(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    patch = {"metadata": {"annotations": {VERDICT: APPROVE, BY: "alice@example.com"}}}
    script = f"kubectl patch agentrun \"$AGENT_RUN_ID\" --type=merge -p '{json.dumps(patch)}'"
    stack.create(ns, "agentruns", agent_run("claims", lifecycle={"postRun": [gate_hook(script)], "rbac": RBAC}))
    st = stack.wait_phase(ns, "claims", timeout=90)["status"]
    assert (st["gateVerdict"], st["gate"]["decidedBy"]) == ("approved", "unverified"), st


def _verdict(api: AuthorityApi, token: str, ns: str, run: str) -> httpx.Response:
    return httpx.post(f"{api.base}/api/v1/runs/{run}/gate-verdict", params={"namespace": ns}, timeout=30,
                      headers={"Authorization": f"Bearer {token}"}, json={"action": "approve", "reason": "ok"})


def _create(api: AuthorityApi, token: str, ns: str) -> str:
    r = httpx.post(f"{api.base}/api/v1/runs", params={"namespace": ns}, headers={"Authorization": f"Bearer {token}"},
                   json={"agentRef": "helper", "task": "hello"}, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["metadata"]["name"])


def test_the_api_lets_only_approvers_decide_and_never_the_runs_creator(
        stack: Stack, authority_api: AuthorityApi, protected: str) -> None:
    ns = protected
    # The gate hook comes from the Agent's defaults: the API creates runs of a task alone.
    reviewed_agent(stack, ns, lifecycle={"postRun": [gate_hook("true")], "gateTimeout": "5m"},
                   approvers=["alice@example.com", "bob@example.com", "group:reviewers"], requireDistinctApprover=True)
    first, second = _create(authority_api, ALICE, ns), _create(authority_api, ALICE, ns)
    # The API's creator stamp (its token's identity) survives the mutating webhook: the API is a trusted creator.
    assert (stack.get_run(ns, first) or {})["metadata"]["annotations"]["agentrun.dev/created-by"] == "alice@example.com"
    waiting(stack, ns, first)

    outsider = _verdict(authority_api, EVE, ns, first)
    assert outsider.status_code == 403
    assert outsider.json()["detail"] == ('"eve@example.com" may not decide this gate: it is not among the approvers of '
                                         'policy "review" (gatePolicy.approvers)')
    creator = _verdict(authority_api, ALICE, ns, first)
    assert creator.status_code == 403
    assert creator.json()["detail"] == ('"alice@example.com" created this run and may not decide its gate under '
                                        'policy "review" (gatePolicy.requireDistinctApprover)')
    assert sorted(m.split(": ", 1)[0] for m in refusal_events(stack, ns, first)) == [
        "verdict from alice@example.com refused (api)", "verdict from eve@example.com refused (api)"]
    ok = _verdict(authority_api, BOB, ns, first)
    assert ok.status_code == 200, ok.text
    assert (ok.json()["gate_verdict"], ok.json()["decided_by"]) == ("approved", "bob@example.com")
    assert stack.wait_phase(ns, first)["status"]["gate"]["decidedBy"] == "bob@example.com"

    # A group entry names API users whose token line carries the group.
    waiting(stack, ns, second)
    by_group = _verdict(authority_api, CAROL, ns, second)
    assert by_group.status_code == 200, by_group.text
    assert by_group.json()["decided_by"] == "carol@example.com"
    metrics = httpx.get(authority_api.base + "/metrics", timeout=10).text
    assert sample(metrics, "agentrun_verdicts_refused_total", via="api", rule="gatePolicy.approvers") == 1
    assert sample(metrics, "agentrun_verdicts_refused_total", via="api", rule="gatePolicy.requireDistinctApprover") == 1


def test_an_identity_named_like_an_approving_group_is_no_member_of_it(
        stack: Stack, authority_api: AuthorityApi, protected: str) -> None:
    """Users and groups are matched as what they are: a token whose identity is literally "group:reviewers" is
    refused by a policy that lets the group `reviewers` decide; a member of the group is not."""
    ns = protected
    reviewed_agent(stack, ns, lifecycle={"postRun": [gate_hook("true")], "gateTimeout": "5m"},
                   approvers=["group:reviewers"])
    run = _create(authority_api, ALICE, ns)
    waiting(stack, ns, run)
    spoof = _verdict(authority_api, MALLORY, ns, run)
    assert spoof.status_code == 403, spoof.text
    assert spoof.json()["detail"] == ('"group:reviewers" may not decide this gate: it is not among the approvers of '
                                      'policy "review" (gatePolicy.approvers)')
    member = _verdict(authority_api, CAROL, ns, run)
    assert member.status_code == 200, member.text
    assert stack.wait_phase(ns, run)["status"]["gate"]["decidedBy"] == "carol@example.com"


def test_an_api_verdict_reads_its_run_agent_and_policy_from_the_apis_views(
        stack: Stack, authority_api: AuthorityApi, namespace: str) -> None:
    """Deciding costs the API no read: the run comes from its watch of runs, the Agent and policy from its watch of
    definitions, which follows a change of the policy (an approver added later is taken once the view has it)."""
    ns = namespace
    reviewed_agent(stack, ns, lifecycle={"postRun": [gate_hook("true")], "gateTimeout": "5m"},
                   approvers=["alice@example.com"])
    run = _create(authority_api, ALICE, ns)
    waiting(stack, ns, run)
    client.CustomObjectsApi(stack.api).patch_namespaced_custom_object(
        G, V, ns, "sympoziumpolicies", "review", {"spec": {"gatePolicy": {"approvers": ["alice@example.com",
                                                                                       "eve@example.com"]}}})
    since = audit_lines(stack.kube)

    def taken() -> httpx.Response | None:
        r = _verdict(authority_api, EVE, ns, run)
        assert r.status_code in (200, 403), r.text  # 403: the view has not seen the new approver yet
        return r if r.status_code == 200 else None

    ok = wait_for(taken, timeout=30, interval=0.2, what="eve's verdict taken once the API's view has the new policy")
    assert ok.json()["decided_by"] == "eve@example.com"
    reads = {k: n for k, n in requests_of(stack.kube, ns, since, "agentrun-api").items() if k.startswith("GET ")}
    assert reads == {}, reads


def test_the_mutating_webhook_is_served_on_the_webhook_listener_only(authority_api: AuthorityApi) -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "resource": {"group": G, "version": V, "resource": "agentruns"}, "namespace": "default",
        "operation": "CREATE", "userInfo": {"username": "dave"},
        "object": {"metadata": {"name": "r"}, "spec": {"agentRef": "helper", "task": "t"}}}}
    assert httpx.post(authority_api.base + "/admission/agentruns/mutate", json=review, timeout=10).status_code == 404
    trust = ssl.create_default_context(cadata=authority_api.ca_pem)
    answer = httpx.post(authority_api.webhook + "/admission/agentruns/mutate", json=review, timeout=10, verify=trust)
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"]["patchType"] == "JSONPatch"


def test_the_module_does_not_leave_its_webhooks_behind(stack: Stack) -> None:
    admission: Any = client.AdmissionregistrationV1Api(stack.api)
    names = [m.metadata.name for m in admission.list_mutating_webhook_configuration().items]
    assert "agentrun-agentruns" not in names, "the session bridge would trust stamps in other tests' namespaces"


