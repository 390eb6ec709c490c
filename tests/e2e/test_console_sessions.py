"""Console sessions shared by API processes (issue 26): real `python -m api` processes against localkube over HTTP.

A session signed in on one process is served by a restarted one and by a second one with the same cookie, a token
removed from the token file ends it on both at once, a sign-out on one ends it on the other, and what the Secret
holds gives away neither the session ID, nor the token (or its digest), nor the CSRF token. The expired ones are
swept by one deletecollection whose selector compares their expiry label (localkube serves it as kube-apiserver does).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from api.auth import Authenticator, TokenFile
from api.console.sessions import (
    ANNOTATION_IDENTITY,
    COOKIE,
    LABEL_EXPIRES,
    LABEL_SESSION,
    SECRET_TYPE,
    SecretSessions,
    SessionStore,
    secret_name,
    unseal,
)
from cli.stack import free_port
from kube import Kube
from tests.e2e.conftest import API_TOKENS, Stack, api_process

ALICE = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")
BOB = next(t for t, who in API_TOKENS.items() if who == "bob@example.com")


@pytest.fixture
def sessions_ns(stack: Stack) -> Iterator[str]:
    """A namespace of the test's own for the sessions' Secrets (deleted after)."""
    ns = f"sessions-{uuid.uuid4().hex[:8]}"
    core: Any = client.CoreV1Api(stack.api)
    core.create_namespace({"metadata": {"name": ns}})
    yield ns
    core.delete_namespace(ns)


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"{ALICE} alice@example.com\n{BOB} bob@example.com\n")
    return path


@contextmanager
def api(stack: Stack, tokens: Path, ns: str, log: Path) -> Iterator[str]:
    """One more API process keeping its sessions in `ns`; yields its base URL."""
    port = free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port),
           "AGENTRUN_SESSION_NAMESPACE": ns}
    base = f"http://127.0.0.1:{port}"
    with api_process(env, log, {base + "/readyz": True}):
        yield base


def sign_in(base: str, token: str) -> str:
    """The session cookie a sign-in sets."""
    r = httpx.post(base + "/signin", data={"token": token, "next": "/runs"}, timeout=10)
    assert r.status_code == 303, r.text
    return r.cookies[COOKIE]


def signed_in(base: str, cookie: str) -> tuple[str, str] | None:
    """(identity, CSRF token) the console shows for that cookie; None when it sends it to sign in."""
    r = httpx.get(base + "/runs", params={"namespace": "default"}, cookies={COOKIE: cookie}, timeout=10)
    if r.status_code == 303:
        assert r.headers["location"].startswith("/signin"), r.headers
        return None
    assert r.status_code == 200, r.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text)
    me = re.search(r"(alice|bob)@example\.com", r.text)
    assert csrf and me, r.text
    return me.group(0), csrf.group(1)


def signed_in_page(base: str, cookie: str) -> tuple[str, str] | None:
    """(identity, CSRF token) the sign-in page shows for that cookie (it needs no RBAC); None when signed out."""
    r = httpx.get(base + "/signin", cookies={COOKIE: cookie}, timeout=10)
    assert r.status_code == 200, r.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text)
    me = re.search(r"system:serviceaccount:[a-z0-9-]+:[a-z0-9-]+|(alice|bob)@example\.com", r.text)
    return (me.group(0), csrf.group(1)) if csrf and me else None


def sa_token(stack: Stack, ns: str, name: str) -> str:
    """A token of a new ServiceAccount `name` from a TokenRequest: a caller known through TokenReview."""
    core: Any = client.CoreV1Api(stack.api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    return str(core.create_namespaced_service_account_token(name, ns, {"spec": {}}).status.token)


def session_secrets(stack: Stack, ns: str) -> list[Any]:
    return list(client.CoreV1Api(stack.api).list_namespaced_secret(ns, label_selector=LABEL_SESSION).items)


def revoke(tokens: Path, keep: str) -> None:
    tokens.write_text(f"{keep}\n# the other token removed\n")
    os.utime(tokens, (1, 1))  # a new mtime: the token file is read again


def test_a_session_survives_a_restart_of_the_api_and_its_secret_holds_no_id_token_or_csrf_token(
        stack: Stack, tokens: Path, sessions_ns: str, tmp_path: Path) -> None:
    with api(stack, tokens, sessions_ns, tmp_path / "api-1.log") as base:
        cookie = sign_in(base, ALICE)
        before = signed_in(base, cookie)
        assert before is not None and before[0] == "alice@example.com"
    stored_holds_no_secret(stack, sessions_ns, cookie, before[1])
    with api(stack, tokens, sessions_ns, tmp_path / "api-2.log") as base:
        assert signed_in(base, cookie) == before  # the same session: the same identity and CSRF token
        r = httpx.post(base + "/signout", data={"csrf": before[1]}, cookies={COOKIE: cookie}, timeout=10)
        assert r.status_code == 303 and r.headers["location"] == "/signin"
        assert signed_in(base, cookie) is None
    assert session_secrets(stack, sessions_ns) == []


def test_two_api_processes_serve_one_session_and_a_removed_token_ends_it_on_both_at_once(
        stack: Stack, tokens: Path, sessions_ns: str, tmp_path: Path) -> None:
    with api(stack, tokens, sessions_ns, tmp_path / "a.log") as a, \
            api(stack, tokens, sessions_ns, tmp_path / "b.log") as b:
        alice = sign_in(a, ALICE)
        bob = sign_in(b, BOB)
        bob_again = sign_in(a, BOB)
        assert signed_in(a, alice) == signed_in(b, alice) is not None
        assert signed_in(a, bob) == signed_in(b, bob) is not None
        assert signed_in(b, alice)[0] == "alice@example.com"  # type: ignore[index]
        # A sign-out on one process ends the session on the other.
        csrf = signed_in(a, bob)[1]  # type: ignore[index]
        assert httpx.post(b + "/signout", data={"csrf": csrf}, cookies={COOKIE: bob}, timeout=10).status_code == 303
        assert signed_in(a, bob) is None and signed_in(b, bob) is None
        # A Kubernetes token (a TokenReview) makes a session both serve too, whose Secret holds that token sealed.
        token = sa_token(stack, sessions_ns, "operator")
        operator = sign_in(a, token)
        identity = f"system:serviceaccount:{sessions_ns}:operator"
        assert signed_in_page(a, operator) == signed_in_page(b, operator) is not None
        assert signed_in_page(b, operator)[0] == identity  # type: ignore[index]
        sealed = next(s for s in session_secrets(stack, sessions_ns) if s.metadata.name == secret_name(operator))
        assert sealed.metadata.annotations[ANNOTATION_IDENTITY] == identity
        for blob in (json.dumps(sealed.to_dict(), default=str), *(base64.b64decode(v).decode("latin-1")
                                                                  for v in sealed.data.values())):
            assert operator not in blob and token not in blob and token.split(".")[-1] not in blob
        httpx.post(a + "/signout", data={"csrf": signed_in_page(a, operator)[1]},  # type: ignore[index]
                   cookies={COOKIE: operator}, timeout=10)
        # Alice's token leaves the file: her session ends on both, on the next request, with no wait.
        revoke(tokens, f"{BOB} bob@example.com")
        assert signed_in(b, alice) is None and signed_in(a, alice) is None
        assert signed_in(a, bob_again) is not None and signed_in(b, bob_again) is not None
        # Her session's Secret went when it was read so; bob's other session is the one left.
        assert [s.metadata.name for s in session_secrets(stack, sessions_ns)] == [secret_name(bob_again)]


def stored_holds_no_secret(stack: Stack, ns: str, cookie: str, csrf: str) -> None:
    """The one session Secret in `ns` is the cookie's, names alice, and holds neither the cookie's value, nor alice's
    token, nor the CSRF token, nor a digest of any of them (but the name), in any spelling; it opens with the
    cookie's value only."""
    [secret] = session_secrets(stack, ns)
    core: Any = client.CoreV1Api(stack.api)
    raw = core.read_namespaced_secret(secret.metadata.name, ns, _preload_content=False).data.decode()
    stored = json.loads(raw)
    assert stored["metadata"]["name"] == "agentrun-session-" + hashlib.sha256(cookie.encode()).hexdigest()
    assert stored["type"] == SECRET_TYPE
    assert stored["metadata"]["annotations"][ANNOTATION_IDENTITY] == "alice@example.com"
    assert int(stored["metadata"]["labels"][LABEL_EXPIRES]) > 0
    # Everything stored, as the API server returns it and with each data value decoded, in every spelling a
    # secret could take there.
    decoded = [base64.b64decode(v) for v in stored["data"].values()]
    haystack = [raw.encode(), *decoded]
    for secret_value in (cookie, ALICE, csrf):
        needles = {secret_value.encode(), base64.b64encode(secret_value.encode()),
                   base64.urlsafe_b64encode(secret_value.encode()), hashlib.sha256(secret_value.encode()).digest(),
                   hashlib.sha256(secret_value.encode()).hexdigest().encode()}
        needles.discard(hashlib.sha256(cookie.encode()).hexdigest().encode())  # the name: the cookie's digest
        for blob in haystack:
            for needle in needles:
                assert needle not in blob, (secret_value[:4], needle[:8])
    # It opens with the session's ID only.
    assert unseal(cookie, stored) is not None and unseal(cookie, stored).csrf == csrf  # type: ignore[union-attr]
    assert unseal(cookie[:-1] + ("A" if cookie[-1] != "A" else "B"), stored) is None


async def test_expired_sessions_are_swept_at_sign_in_and_live_ones_kept(stack: Stack, tokens: Path,
                                                                        sessions_ns: str) -> None:
    auth = Authenticator(TokenFile(tokens), reviews=None)
    kube = Kube(stack.api)
    expired = SessionStore(auth, seconds=-60, kept=SecretSessions(kube, sessions_ns))
    old = await expired.sign_in(ALICE)
    assert old is not None and await expired.get(old.id) is None  # read expired: deleted there and then
    stale = await expired.sign_in(BOB)  # never read again (a browser that went away)
    assert stale is not None
    live = SessionStore(auth, kept=SecretSessions(kube, sessions_ns))
    fresh = await live.sign_in(ALICE)  # this process's first sign-in sweeps
    assert fresh is not None and await live.get(fresh.id) is not None
    assert [s.metadata.name for s in session_secrets(stack, sessions_ns)] == [secret_name(fresh.id)]
