"""The console's sign-in: an API token exchanged for a server-side session, and the session's CSRF token.

The browser holds only a random session ID (an HttpOnly, SameSite=Strict cookie, Secure over HTTPS); the token it
was signed in with never leaves the server, and the server keeps only its SHA-256. Each request looks the caller up
again from the token file through that digest, so a token removed from the file ends its sessions at once and a
changed identity or group list counts at once.

Sessions live in the API process's memory: a restart (or another replica) signs everyone out, which for a console
of operators is a fair price for holding no secret on disk. Each session has a random CSRF token that every
state-changing request must carry (a form's hidden field or the `X-CSRF-Token` header htmx sends), compared in
constant time: a cross-site form cannot read it, so it cannot forge a verdict.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from ..auth import ANONYMOUS, Caller, TokenFile

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
    identity: str  # as at sign-in; `SessionStore.caller` re-reads it from the token file

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())


@dataclass
class SessionStore:
    tokens: TokenFile
    insecure: bool = False
    seconds: float = SESSION_SECONDS
    _sessions: dict[str, Session] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        """An --insecure API without tokens: anyone may sign in (as anonymous), as anyone may call the JSON API."""
        return self.insecure and not self.tokens.tokens()

    def sign_in(self, token: str) -> Session | None:
        """A new session for a valid token (None for an invalid one)."""
        if self.open:
            who: Caller | None = ANONYMOUS
            d = b""
        else:
            who = self.tokens.caller(token) if token else None
            d = digest(token)
        if who is None:
            return None
        self._expire()
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        s = Session(id=secrets.token_urlsafe(32), token_digest=d, csrf=secrets.token_urlsafe(32),
                    expires=time.time() + self.seconds, identity=who.identity)
        self._sessions[s.id] = s
        return s

    def get(self, session_id: str | None) -> Session | None:
        s = self._sessions.get(session_id or "")
        if s is None:
            return None
        if s.expires <= time.time() or self.caller(s) is None:
            self._sessions.pop(s.id, None)
            return None
        return s

    def caller(self, s: Session) -> Caller | None:
        """Who the session's token belongs to now (None once it is no longer in the token file)."""
        if self.open and not s.token_digest:
            return ANONYMOUS
        for known, who in self.tokens.tokens().items():
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
