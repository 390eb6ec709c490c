"""The console's sign-in: an API token exchanged for a server-side session, and the session's CSRF token.

The browser holds only a random session ID (an HttpOnly, SameSite=Strict cookie, Secure over HTTPS); the token it
was signed in with never leaves the server. For a token of the token file the server keeps only its SHA-256, and each
request looks the caller up again from the file through that digest, so a token removed from the file ends its
sessions at once and a changed identity or group list counts at once. A Kubernetes token (api/auth.py: TokenReview)
is kept in the session, in memory only, and asked of the cluster again once its last answer is a minute old, so a
token that expires or whose ServiceAccount is deleted ends its sessions too.

Sessions live in the API process's memory: a restart (or another replica) signs everyone out, which for a console
of operators is a fair price for holding no secret on disk. Each session has a random CSRF token that every
state-changing request must carry (a form's hidden field or the `X-CSRF-Token` header htmx sends), compared in
constant time: a cross-site form cannot read it, so it cannot forge a verdict.

Signing in goes through the one Authenticator of the API, so wrong tokens are throttled, logged and counted as on
every other door (api/throttle.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from ..auth import ANONYMOUS, Authenticator, Caller, Unauthenticated

COOKIE = "agentrun_session"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 10_000  # the oldest go first beyond this: a flood of sign-ins cannot grow the process without end
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass
class Session:
    id: str
    token_digest: bytes  # b"" for an --insecure API without tokens (everyone is anonymous)
    csrf: str
    expires: float
    identity: str  # as at sign-in; `SessionStore.caller` looks it up again
    # A Kubernetes token, asked of the cluster again (never shown: it is no part of the session's repr).
    kubernetes_token: str = field(default="", repr=False)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())


@dataclass
class SessionStore:
    auth: Authenticator
    insecure: bool = False
    seconds: float = SESSION_SECONDS
    _sessions: dict[str, Session] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        """An --insecure API without tokens: anyone may sign in (as anonymous), as anyone may call the JSON API."""
        return self.insecure and not self.auth.tokens.tokens()

    async def sign_in(self, token: str, *, client: str = "") -> Session | None:
        """A new session for a valid token (None for a missing or invalid one). Raises Throttled and
        ReviewUnavailable (api/auth.py) for the sign-in page to say."""
        if self.open:
            who: Caller = ANONYMOUS
            d = b""
        else:
            try:
                who = await self.auth.authenticate(token, client=client, via="console")
            except Unauthenticated:
                return None
            d = digest(token)
        self._expire()
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        s = Session(id=secrets.token_urlsafe(32), token_digest=d, csrf=secrets.token_urlsafe(32),
                    expires=time.time() + self.seconds, identity=who.identity,
                    kubernetes_token=token if who.kubernetes else "")
        self._sessions[s.id] = s
        return s

    async def get(self, session_id: str | None) -> Session | None:
        """The live session of that ID; None (and the session gone) once it expired or its token is no longer
        valid."""
        s = self._sessions.get(session_id or "")
        if s is None:
            return None
        if s.expires <= time.time() or await self.caller(s) is None:
            self._sessions.pop(s.id, None)
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

    def sign_out(self, session_id: str | None) -> None:
        self._sessions.pop(session_id or "", None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _expire(self) -> None:
        now = time.time()
        for sid in [sid for sid, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[sid]
