"""The console's sign-in: an API token exchanged for a server-side session, and the session's CSRF token.

The browser holds only a random session ID (256 bits; an HttpOnly, SameSite=Strict cookie, Secure over HTTPS); the
token it was signed in with never leaves the server. For a token of the token file the session keeps only its SHA-256,
and each request looks the caller up again from the file through that digest, so a token removed from the file ends
its sessions at once and a changed identity or group list counts at once. A Kubernetes token (api/auth.py:
TokenReview) must be kept itself, to be asked of the cluster again once its last answer is a minute old (the
TokenReview cache's rule), so a token that expires or whose ServiceAccount is deleted ends its sessions too.

Where sessions live. With AGENTRUN_SESSION_NAMESPACE set (the chart sets the API's own namespace, through the
downward API; `agentrun up` sets `default`), each session is one Secret there, so a restarted API and every replica
of it serve the same sessions (`SecretSessions`). Without it they live in the process's memory (`MemorySessions`: a
restart signs everyone out). A Secret is:

- named `agentrun-session-<SHA-256 of the session ID>`: the cookie's value is never stored, and the name cannot be
  turned back into it (a 256-bit random value has no dictionary);
- sealed: the credential (the token file entry's digest, or the Kubernetes token), the CSRF token, the identity and
  the expiry are one AES-256-GCM ciphertext under a key derived from the session ID with HKDF-SHA256 (a different
  function from the name's, so the name gives no key), bound to the Secret's name as associated data. Whoever reads
  the namespace's Secrets learns who is signed in until when (the identity and expiry are also plain annotations,
  for an operator to see and to revoke: `kubectl delete secret -l agentrun.dev/console-session`), never a token, a
  digest to test guesses against, a CSRF token or a usable session; whoever can write them cannot make one either
  (the key needs an ID only the browser holds, and a changed field no longer opens). What decides is the sealed copy:
  the annotations are for people;
- labelled `agentrun.dev/console-session` and `agentrun.dev/console-session-expires=<unix seconds>`, so the expired
  ones go with one `deletecollection` whose selector compares that label (`...-expires<now`), at most once a minute
  per process, at sign-in: bounded work, and no `list`. `list` on Secrets returns their data, and RBAC cannot narrow
  it to a label, so it would let the API enumerate every Secret of its namespace; `deletecollection` with a selector
  names only the expired sessions. (`get` and `delete` cannot be narrowed by name either, the names being random: the
  API's Role is create, get, delete and deletecollection on Secrets of its own namespace only; run the chart in a
  namespace of its own.) An expired session that is read is deleted there and then.

No copy of a session is kept in the process: each request reads its Secret (one GET), so a sign-out on one replica
ends the session on every other at once, and the token file (or TokenReview, through its own short cache) is asked
again on every request as before, so removing a token ends its sessions on every replica at once too.

Each session has a random CSRF token that every state-changing request must carry (a form's hidden field or the
`X-CSRF-Token` header htmx sends), compared in constant time: a cross-site form cannot read it, so it cannot forge a
verdict.

Signing in goes through the one Authenticator of the API, so wrong tokens are throttled, logged and counted as on
every other door (api/throttle.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from kube import Kube, KubeError, NotFound
from models.names import LABEL_MANAGED

from ..auth import ANONYMOUS, Authenticator, Caller, Unauthenticated

log = logging.getLogger("agentrun.api.console")

COOKIE = "agentrun_session"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 10_000  # in memory, the oldest go first beyond this: a flood of sign-ins cannot grow the process
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"

# Sessions kept as Secrets (SecretSessions).
SECRET_PREFIX = "agentrun-session-"
SECRET_TYPE = "agentrun.dev/console-session"
LABEL_SESSION = "agentrun.dev/console-session"
LABEL_EXPIRES = "agentrun.dev/console-session-expires"
ANNOTATION_IDENTITY = "agentrun.dev/identity"
ANNOTATION_EXPIRES = "agentrun.dev/expires"
SEALED_KEY = "session"
SEAL_VERSION = "v1"
HKDF_INFO = b"agentrun console session v1"
SWEEP_SECONDS = 60.0
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")  # what secrets.token_urlsafe(32) makes  # expired sessions are swept at sign-in, at most this often per process


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass
class Session:
    id: str = field(repr=False)
    token_digest: bytes = field(repr=False)  # b"" for an --insecure API without tokens (everyone is anonymous)
    csrf: str = field(repr=False)
    expires: float
    identity: str  # as at sign-in; `SessionStore.caller` looks it up again
    # A Kubernetes token, asked of the cluster again (never shown: it is no part of the session's repr).
    kubernetes_token: str = field(default="", repr=False)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())


class SessionsUnavailable(Exception):
    """Where sessions are kept could not be reached (the Kubernetes API server, for SecretSessions)."""


class Sessions(Protocol):
    """Where sessions are kept: by session ID, each until it is deleted or expires."""

    async def put(self, s: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def delete(self, session_id: str) -> None: ...

    async def sweep(self) -> None: ...


@dataclass
class MemorySessions:
    """This process's memory: gone with it, and unseen by other replicas."""

    _sessions: dict[str, Session] = field(default_factory=dict)

    async def put(self, s: Session) -> None:
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        self._sessions[s.id] = s

    async def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    async def delete(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    async def sweep(self) -> None:
        now = time.time()
        for sid in [sid for sid, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[sid]

    def __len__(self) -> int:
        return len(self._sessions)


def secret_name(session_id: str) -> str:
    return SECRET_PREFIX + hashlib.sha256(session_id.encode()).hexdigest()


def _key(session_id: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(session_id.encode())


def seal(s: Session) -> dict[str, Any]:
    """The Secret of a session (module docstring): what it stores opens only with the session's ID."""
    name = secret_name(s.id)
    payload = json.dumps({"v": SEAL_VERSION, "token_digest": s.token_digest.hex(), "csrf": s.csrf,
                          "expires": s.expires, "identity": s.identity, "kubernetes_token": s.kubernetes_token})
    nonce = os.urandom(12)
    sealed = nonce + AESGCM(_key(s.id)).encrypt(nonce, payload.encode(), name.encode())
    return {"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
            "metadata": {"name": name,
                         "labels": {LABEL_SESSION: SEAL_VERSION, LABEL_EXPIRES: str(int(s.expires)),
                                    LABEL_MANAGED: "agentrun"},
                         "annotations": {ANNOTATION_IDENTITY: s.identity,
                                         ANNOTATION_EXPIRES: datetime.fromtimestamp(s.expires, UTC).isoformat()}},
            "data": {SEALED_KEY: base64.b64encode(sealed).decode()}}


def unseal(session_id: str, secret: dict[str, Any]) -> Session | None:
    """The session a Secret holds for that ID; None when it does not open with it (another ID, or altered)."""
    try:
        sealed = base64.b64decode((secret.get("data") or {}).get(SEALED_KEY) or "")
        plain = AESGCM(_key(session_id)).decrypt(sealed[:12], sealed[12:], secret_name(session_id).encode())
        d = json.loads(plain)
        return Session(id=session_id, token_digest=bytes.fromhex(d["token_digest"]), csrf=str(d["csrf"]),
                       expires=float(d["expires"]), identity=str(d["identity"]),
                       kubernetes_token=str(d.get("kubernetes_token") or ""))
    except (InvalidTag, ValueError, KeyError, TypeError):
        return None


class SecretSessions:
    """One sealed Secret per session in `namespace` (module docstring), shared by every API process."""

    def __init__(self, kube: Kube, namespace: str, *, clock: Any = time.time) -> None:
        self.kube, self.namespace, self.clock = kube, namespace, clock
        self._swept = float("-inf")

    async def put(self, s: Session) -> None:
        await self._call(self.kube.core.create_namespaced_secret, self.namespace, seal(s), action="keep a session")

    async def get(self, session_id: str) -> Session | None:
        try:
            resp = await self._call(self.kube.core.read_namespaced_secret, secret_name(session_id), self.namespace,
                                    _preload_content=False, action="read a session")
        except NotFound:
            return None
        return unseal(session_id, json.loads(resp.data))

    async def delete(self, session_id: str) -> None:
        try:
            resp = await self._call(self.kube.core.delete_namespaced_secret, secret_name(session_id), self.namespace,
                                    _preload_content=False, action="delete a session")
        except NotFound:
            return
        _ = resp.data  # read to the end: the connection goes back to the pool

    async def sweep(self) -> None:
        """Every expired session, in one request, at most once per SWEEP_SECONDS; a failure is logged (signing in
        goes on: an expired session opens for no one, it only takes room)."""
        now = self.clock()
        if now - self._swept < SWEEP_SECONDS:
            return
        self._swept = now
        try:
            resp = await self._call(self.kube.core.delete_collection_namespaced_secret, self.namespace,
                                    label_selector=f"{LABEL_SESSION},{LABEL_EXPIRES}<{int(now)}",
                                    _preload_content=False, action="delete expired sessions")
            _ = resp.data  # (the deleted sessions, still sealed: not looked at)
        except SessionsUnavailable as e:
            log.warning("expired console sessions were not swept from namespace %s: %s", self.namespace, e)

    async def _call(self, fn: Any, *args: Any, action: str, **kw: Any) -> Any:
        try:
            return await self.kube.call(fn, *args, action=action, **kw)
        except NotFound:
            raise
        except KubeError as e:
            raise SessionsUnavailable(str(e)) from e


@dataclass
class SessionStore:
    auth: Authenticator
    insecure: bool = False
    seconds: float = SESSION_SECONDS
    kept: Sessions = field(default_factory=MemorySessions)

    @property
    def open(self) -> bool:
        """An --insecure API without tokens: anyone may sign in (as anonymous), as anyone may call the JSON API."""
        return self.insecure and not self.auth.tokens.tokens()

    async def sign_in(self, token: str, *, client: str = "") -> Session | None:
        """A new session for a valid token (None for a missing or invalid one). Raises Throttled and
        ReviewUnavailable (api/auth.py) for the sign-in page to say, and SessionsUnavailable."""
        if self.open:
            who: Caller = ANONYMOUS
            d = b""
        else:
            try:
                who = await self.auth.authenticate(token, client=client, via="console")
            except Unauthenticated:
                return None
            d = digest(token)
        await self.kept.sweep()
        s = Session(id=secrets.token_urlsafe(32), token_digest=d, csrf=secrets.token_urlsafe(32),
                    expires=time.time() + self.seconds, identity=who.identity,
                    kubernetes_token=token if who.kubernetes else "")
        await self.kept.put(s)
        return s

    async def get(self, session_id: str | None) -> Session | None:
        """The live session of that ID; None (and the session gone) once it expired or its token is no longer
        valid. Raises SessionsUnavailable."""
        if not session_id or not SESSION_ID.fullmatch(session_id):
            return None  # not one this store made: no request to the cluster for it
        s = await self.kept.get(session_id)
        if s is None:
            return None
        if s.expires <= time.time() or await self.caller(s) is None:
            await self.kept.delete(s.id)
            return None
        return s

    async def caller(self, s: Session) -> Caller | None:
        """Who the session's token belongs to now (None once it is no longer valid). Raises ReviewUnavailable when the
        cluster cannot say for a Kubernetes token."""
        if self.open and not s.token_digest:
            return ANONYMOUS
        if s.kubernetes_token:
            return await self.auth.reviews.caller(s.kubernetes_token) if self.auth.reviews is not None else None
        for known, who in self.auth.tokens.tokens().items():
            if hmac.compare_digest(digest(known), s.token_digest):
                return who
        return None

    async def sign_out(self, session_id: str | None) -> None:
        if session_id:
            await self.kept.delete(session_id)

    def __len__(self) -> int:
        if not isinstance(self.kept, MemorySessions):
            raise TypeError("only sessions kept in memory are counted")
        return len(self.kept)
