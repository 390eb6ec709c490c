"""Who may do what through the API and the console: Kubernetes RBAC decides (issue 27, hole 8), and wrong
credentials are throttled (hole 11), against the whole stack.

An API process of this module's own, with the throttle's defaults. Its tokens: `ann`, who holds the API's three
ClusterRoles in one namespace (A) only, and `nobody`, who holds none. Before, any valid token read another namespace's
runs, decided their gates and deleted them; now a call is a SubjectAccessReview for the caller's identity in the
namespace asked for. Kubernetes tokens (a ServiceAccount's, through a TokenReview) are callers too.

Throttling is per client address: each test that fails credentials on purpose sends from loopback addresses of its
own (127.0.0.0/8 all reaches this host), so the others are not slowed.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from cli.roles import bind, ensure_roles, user
from cli.stack import free_port
from tests.e2e.conftest import Stack, agent, agent_run, api_process
from tests.localkube.test_tokens_and_access_reviews import request_token, sa_subject
from tests.metrics import sample
from tests.waiting import wait_for

ANN, NOBODY = "t-ann-team-a-0123456789", "t-nobody-0123456789"
GATE = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}


@dataclass
class AccessApi:
    base: str
    log: Path


@pytest.fixture(scope="module")
def access_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AccessApi]:
    d = tmp_path_factory.mktemp("access")
    tokens = d / "tokens"
    tokens.write_text(f"{ANN} ann@example.com\n{NOBODY} nobody@example.com\n")
    port = free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port)}
    out = AccessApi(f"http://127.0.0.1:{port}", d / "api.log")
    ensure_roles(stack.api)
    with api_process(env, out.log, {out.base + "/readyz": True}):
        yield out


def http(token: str = "", *, source: str = "127.0.0.1") -> httpx.Client:
    """A client that sends from `source` (a loopback address: a client of its own, as the throttle counts)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(headers=headers, timeout=30, transport=httpx.HTTPTransport(local_address=source))


def gated(stack: Stack, ns: str, name: str) -> None:
    stack.create(ns, "agentruns", agent_run(name, lifecycle={"postRun": [GATE], "gateTimeout": "10m"}))


def runs_in(stack: Stack, ns: str) -> list[dict[str, Any]]:
    listed: Any = stack.custom.list_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns")
    return list(listed["items"])


def waiting(stack: Stack, ns: str, name: str) -> None:
    wait_for(lambda: (((stack.get_run(ns, name) or {}).get("status") or {}).get("gate") or {}).get("state")
             == "pending", timeout=60, what=f"{ns}/{name}'s gate to wait")


def test_a_token_reaches_only_the_namespaces_its_identity_may_act_in(
        stack: Stack, access_api: AccessApi, namespace: str, other_namespace: str) -> None:
    a, b = namespace, other_namespace
    bind(stack.api, "ann", [user("ann@example.com")], namespace=a)
    for ns in (a, b):
        stack.create(ns, "agents", agent())
        gated(stack, ns, "held")
    for ns in (a, b):
        waiting(stack, ns, "held")
    base = access_api.base
    with http(ANN) as ann:
        def call(method: str, path: str, ns: str, **kw: Any) -> httpx.Response:
            return ann.request(method, base + path, params={"namespace": ns}, **kw)

        # Namespace B: nothing, and each refusal names what RBAC would have to allow.
        refused = {
            "list": call("GET", "/api/v1/runs", b),
            "read": call("GET", "/api/v1/runs/held", b),
            "logs": call("GET", "/api/v1/runs/held/logs", b),
            "decide": call("POST", "/api/v1/runs/held/gate-verdict", b, json={"action": "approve"}),
            "delete": call("DELETE", "/api/v1/runs/held", b),
            "create": call("POST", "/api/v1/runs", b, json={"agentRef": "helper", "task": "x"}),
            "schedules": call("GET", "/api/v1/schedules", b),
            "new schedule": call("POST", "/api/v1/schedules", b, json={"name": "s", "agentRef": "helper",
                                                                        "schedule": "@daily", "task": "x"}),
        }
        assert {k: r.status_code for k, r in refused.items()} == dict.fromkeys(refused, 403), \
            {k: r.text for k, r in refused.items()}
        assert refused["list"].json()["detail"] == (
            f'"ann@example.com" may not list agentruns in namespace "{b}" (Kubernetes RBAC: agentrun-viewer grants '
            f"it, through a RoleBinding in {b})")
        assert refused["decide"].json()["detail"].startswith(f'"ann@example.com" may not approve agentruns "held" '
                                                             f'in namespace "{b}"')
        held_b = stack.get_run(b, "held") or {}
        assert held_b["status"]["gate"]["state"] == "pending", "the refused verdict reached the run"
        assert [r["metadata"]["name"] for r in runs_in(stack, b)] == ["held"]

        # Namespace A, where ann holds the roles: all of it.
        assert [r["name"] for r in call("GET", "/api/v1/runs", a).json()] == ["held"]
        assert call("GET", "/api/v1/runs/held", a).status_code == 200
        verdict = call("POST", "/api/v1/runs/held/gate-verdict", a, json={"action": "approve"})
        assert verdict.status_code == 200 and verdict.json()["decided_by"] == "ann@example.com", verdict.text
        made = call("POST", "/api/v1/runs", a, json={"agentRef": "helper", "task": "x"})
        assert made.status_code == 201, made.text
        assert call("DELETE", f"/api/v1/runs/{made.json()['metadata']['name']}", a).status_code == 204
        assert call("GET", "/api/v1/schedules", a).status_code == 200
    with http(NOBODY) as nobody:
        r = nobody.get(base + "/api/v1/runs", params={"namespace": a})
        assert r.status_code == 403 and "agentrun-viewer" in r.json()["detail"]
        # The codec shows payloads of any run: it needs read access in every namespace, which ann lacks too.
        assert nobody.post(base + "/codec/decode", json={"payloads": []}).status_code == 403
    with http(ANN) as ann:
        assert ann.post(base + "/codec/decode", json={"payloads": []}).status_code == 403
    metrics = httpx.get(base + "/metrics", timeout=10).text
    assert (sample(metrics, "agentrun_api_access_denied_total", verb="list", resource="agentruns") or 0) >= 2
    assert sample(metrics, "agentrun_api_access_denied_total", verb="approve", resource="agentruns") == 1


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m, page
    return m.group(1)


def test_the_console_shows_only_what_the_identity_may_see_and_says_why_it_refuses(
        stack: Stack, access_api: AccessApi, namespace: str, other_namespace: str) -> None:
    a, b = namespace, other_namespace
    bind(stack.api, "ann", [user("ann@example.com")], namespace=a)
    for ns in (a, b):
        stack.create(ns, "agents", agent())
        gated(stack, ns, "held")
    waiting(stack, b, "held")
    base = access_api.base
    with http() as browser:
        signed = browser.post(base + "/signin", data={"token": ANN, "next": f"/runs?namespace={a}"})
        assert signed.status_code == 303, signed.text
        mine = browser.get(base + "/runs", params={"namespace": a})
        assert mine.status_code == 200 and 'data-run="held"' in mine.text, mine.text
        offered = re.findall(r'<option value="([^"]+)">', mine.text)
        assert a in offered and b not in offered, offered
        csrf = _csrf(mine.text)

        page = browser.get(base + "/runs", params={"namespace": b})
        assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")
        assert "<h1>Not allowed</h1>" in page.text
        assert (f"&#34;ann@example.com&#34; may not list agentruns in namespace &#34;{b}&#34; (Kubernetes RBAC: "
                "agentrun-viewer grants it") in page.text, page.text
        for path in (f"/runs/held?namespace={b}", f"/runs/held/part/detail?namespace={b}",
                     f"/events?namespace={b}", f"/runs/held/log-stream?namespace={b}", f"/new-run?namespace={b}",
                     f"/schedules?namespace={b}", f"/agents?namespace={b}", f"/policies?namespace={b}"):
            r = browser.get(base + path)
            assert r.status_code == 403 and "Not allowed" in r.text, (path, r.status_code, r.text[:300])
        decided = browser.post(base + f"/runs/held/verdict?namespace={b}", data={"action": "approve", "csrf": csrf})
        deleted = browser.post(base + f"/runs/held/delete?namespace={b}", data={"csrf": csrf})
        created = browser.post(base + f"/new-run?namespace={b}", data={"agent": "helper", "task": "x", "csrf": csrf})
        assert (decided.status_code, deleted.status_code, created.status_code) == (403, 403, 403)
        held_b = stack.get_run(b, "held") or {}
        assert held_b["status"]["gate"]["state"] == "pending"
        assert len(runs_in(stack, b)) == 1

        waiting(stack, a, "held")
        ok = browser.post(base + f"/runs/held/verdict?namespace={a}", data={"action": "approve", "csrf": csrf})
        assert ok.status_code == 303, ok.text
        assert stack.wait_phase(a, "held")["status"]["gate"]["decidedBy"] == "ann@example.com"


def test_a_kubernetes_token_is_its_service_account_with_that_accounts_rights(
        stack: Stack, access_api: AccessApi, namespace: str, other_namespace: str) -> None:
    """A token the cluster issued is accepted through a TokenReview: the caller is the ServiceAccount, RBAC decides
    for it, and a verdict records it; the token of an account that is gone is refused."""
    a, b = namespace, other_namespace
    core: Any = client.CoreV1Api(stack.api)
    for sa in ("release-bot", "gone"):
        core.create_namespaced_service_account(a, {"metadata": {"name": sa}})
    bind(stack.api, "bot", [sa_subject(a, "release-bot"), sa_subject(a, "gone")], namespace=a)
    token = str(request_token(stack.api, a, "release-bot", expirationSeconds=3600).status.token)
    stale = str(request_token(stack.api, a, "gone", expirationSeconds=3600).status.token)
    core.delete_namespaced_service_account("gone", a)
    stack.create(a, "agents", agent())
    gated(stack, a, "held")
    waiting(stack, a, "held")
    bot = f"system:serviceaccount:{a}:release-bot"
    with http(token) as api:
        assert [r["name"] for r in api.get(access_api.base + "/api/v1/runs", params={"namespace": a}).json()] == \
            ["held"]
        r = api.get(access_api.base + "/api/v1/runs", params={"namespace": b})
        assert r.status_code == 403 and r.json()["detail"].startswith(f'"{bot}" may not list agentruns')
        v = api.post(access_api.base + "/api/v1/runs/held/gate-verdict", params={"namespace": a},
                     json={"action": "approve"})
        assert v.status_code == 200 and v.json()["decided_by"] == bot, v.text
        assert stack.wait_phase(a, "held")["status"]["gate"]["decidedBy"] == bot
    with http(stale) as api:
        r = api.get(access_api.base + "/api/v1/runs", params={"namespace": a})
        assert r.status_code == 401 and r.json()["detail"] == "invalid token"


def test_wrong_tokens_are_throttled_per_client_logged_without_the_token_and_counted(
        stack: Stack, access_api: AccessApi, namespace: str) -> None:
    """Issue 27, hole 11: 530-680 wrong tokens a second went through unslowed and unlogged. After ten failures a
    client waits (429 with Retry-After) whatever it sends, the right token included; other clients are not slowed."""
    bind(stack.api, "ann", [user("ann@example.com")], namespace=namespace)
    runs = access_api.base + "/api/v1/runs"
    before = httpx.get(access_api.base + "/metrics", timeout=10).text

    def counted(via: str, reason: str) -> float:
        now = httpx.get(access_api.base + "/metrics", timeout=10).text
        return sum((sample(text, "agentrun_api_auth_failures_total", via=via, reason=reason) or 0) * sign
                   for text, sign in ((now, 1), (before, -1)))

    guesses = [secrets.token_urlsafe(24) for _ in range(40)]  # each of its own prefix: only the client counts
    with http(source="127.0.0.2") as attacker:
        codes = [attacker.get(runs, headers={"Authorization": f"Bearer {g}"}).status_code for g in guesses[:10]]
        assert codes == [401] * 10
        throttled = attacker.get(runs, headers={"Authorization": f"Bearer {guesses[10]}"})
        assert throttled.status_code == 429 and 1 <= int(throttled.headers["retry-after"]) <= 6, throttled.text
        right = attacker.get(runs, params={"namespace": namespace}, headers={"Authorization": f"Bearer {ANN}"})
        assert right.status_code == 429, "a throttled client learns nothing, not even from the right token"
    with http(ANN, source="127.0.0.3") as other:
        assert other.get(runs, params={"namespace": namespace}).status_code == 200

    # The console's sign-in and the codec's login are the same door.
    with http(source="127.0.0.4") as console:
        codes = [console.post(access_api.base + "/signin", data={"token": g}).status_code for g in guesses[11:22]]
        assert codes == [401] * 10 + [429]
        assert "Too many failed sign-ins" in console.post(access_api.base + "/signin", data={"token": ANN}).text
    with http(source="127.0.0.5") as codec:
        codes = [codec.post(access_api.base + "/codec/login", data={"token": g}).status_code for g in guesses[22:33]]
        assert codes == [401] * 10 + [429]

    # A guess at the rest of a token whose first characters are known is slowed wherever it comes from.
    for i in range(10):
        with http(source=f"127.0.1.{i + 1}") as one:
            assert one.get(runs, headers={"Authorization": f"Bearer leaked12-{i:06d}"}).status_code == 401
    with http(source="127.0.1.200") as fresh:
        assert fresh.get(runs, headers={"Authorization": "Bearer leaked12-xxxxxx"}).status_code == 429

    assert counted("bearer", "invalid") == 20 and counted("bearer", "throttled") == 3
    assert counted("console", "invalid") == 10 and counted("console", "throttled") == 2
    assert counted("codec", "invalid") == 10 and counted("codec", "throttled") == 1
    log = access_api.log.read_text()
    assert "authentication failed (bearer) from 127.0.0.2: unknown token" in log
    assert "authentication failed (console) from 127.0.0.4" in log and "further attempts are throttled" in log
    assert not any(g in log for g in guesses) and "leaked12" not in log
    assert not any(g in httpx.get(access_api.base + "/metrics", timeout=10).text for g in guesses)
