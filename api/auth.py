"""Who is calling: bearer tokens → identities, from the API's token file or from the cluster (SPEC §7).

The token file has lines `token identity`, optionally followed by comma-separated groups (`token identity
group1,group2`), and is re-read when it changes. A token not in the file is asked of the Kubernetes API server with a
TokenReview (unless turned off), so people can use the identity their cluster already gives them (a ServiceAccount's
token, an OIDC token the API server accepts); its answers are kept briefly. Either way the identity and its groups
are what RBAC authorises (api/access.py), what `gatePolicy` matches and what a verdict records as `decidedBy`.
Tokens are compared in constant time; with no token file and no TokenReview nobody is authorised (unless the API runs
--insecure).

Failed attempts are throttled per client and per token prefix (api/throttle.py), logged without the token (a short
digest tells them apart) and counted (`agentrun_api_auth_failures_total{via,reason}`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from kube import Kube, KubeError
from models.authorship import Author

from .throttle import FailureThrottle, Throttled, fingerprint, token_key

log = logging.getLogger("agentrun.api.auth")

# How long a TokenReview's answer is kept: a valid token for a minute (the API server's own webhook authenticator
# keeps them two), an invalid one briefly (so a repeated wrong token costs the cluster one review).
REVIEW_OK_SECONDS = 60.0
REVIEW_BAD_SECONDS = 10.0
REVIEW_TIMEOUT_SECONDS = 5.0
MAX_REVIEWS_KEPT = 10_000
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its identity and groups (and, from a TokenReview, uid and extra), as RBAC sees it."""

    identity: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Authenticated by the cluster (a TokenReview) rather than the token file.
    kubernetes: bool = False

    def stamp(self, plural: str) -> dict[str, str]:
        """The author stamp (models/authorship.py) the API writes on what it creates or rewrites for this caller: its
        identity and groups. The admission webhook keeps it from the API (AGENTRUN_TRUSTED__API) and checks the
        object's grants and Secrets against it; however callers are authenticated, this is where they become authors."""
        return Author(self.identity, self.groups).annotations(plural)


ANONYMOUS = Caller("anonymous")


@dataclass
class TokenFile:
    path: Path | None
    _mtime: float = -1.0
    _tokens: dict[str, Caller] = field(default_factory=dict)

    def tokens(self) -> dict[str, Caller]:
        if self.path is None:
            return {}
        try:
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            self._tokens, self._mtime = {}, -1.0
            return {}
        if mtime != self._mtime:
            self._tokens = parse_tokens(self.path.read_text())
            self._mtime = mtime
        return self._tokens

    def caller(self, token: str) -> Caller | None:
        for known, who in self.tokens().items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return who
        return None

    def identity(self, token: str) -> str | None:
        who = self.caller(token)
        return who.identity if who is not None else None


def parse_tokens(text: str) -> dict[str, Caller]:
    out: dict[str, Caller] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        token, who, groups, *_ = [*line.split(None, 2), "", ""]
        out[token] = Caller(who or ANONYMOUS.identity, tuple(g.strip() for g in groups.split(",") if g.strip()))
    return out


class ReviewUnavailable(Exception):
    """The API server could not be asked who a token is (it did not answer, or refused the API the question)."""


class TokenReviews:
    """Kubernetes bearer tokens, through the API server's TokenReview; answers kept briefly, by the token's digest."""

    def __init__(self, kube: Kube, *, audiences: list[str] | None = None, clock: Callable[[], float] = time.monotonic,
                 max_kept: int = MAX_REVIEWS_KEPT) -> None:
        self.kube, self.audiences, self.clock, self.max_kept = kube, audiences or [], clock, max_kept
        self._kept: OrderedDict[bytes, tuple[Caller | None, float]] = OrderedDict()
        self._asking: dict[bytes, asyncio.Future[Caller | None]] = {}

    async def caller(self, token: str) -> Caller | None:
        """Who the cluster says `token` is; None when it is not a valid token. Raises ReviewUnavailable."""
        key = hashlib.sha256(token.encode()).digest()
        kept = self._kept.get(key)
        if kept is not None and kept[1] > self.clock():
            self._kept.move_to_end(key)
            return kept[0]
        asking = self._asking.get(key)
        if asking is not None:  # the same token asked by several requests at once: one review
            return await asyncio.shield(asking)
        future: asyncio.Future[Caller | None] = asyncio.get_running_loop().create_future()
        self._asking[key] = future
        try:
            who = await self._review(token)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._asking.pop(key, None)
        future.set_result(who)
        self._kept[key] = (who, self.clock() + (REVIEW_OK_SECONDS if who is not None else REVIEW_BAD_SECONDS))
        self._kept.move_to_end(key)
        while len(self._kept) > self.max_kept:
            self._kept.popitem(last=False)
        return who

    async def _review(self, token: str) -> Caller | None:
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = list(self.audiences)
        api = client.AuthenticationV1Api(self.kube.api)
        try:
            resp: Any = await self.kube.call(api.create_token_review, {"spec": spec}, _preload_content=False,
                                             _request_timeout=REVIEW_TIMEOUT_SECONDS, action="review a bearer token")
        except (KubeError, TimeoutError) as e:
            raise ReviewUnavailable(str(e)) from e
        status = json.loads(resp.data).get("status") or {}
        user = status.get("user") or {}
        if not status.get("authenticated") or not user.get("username"):
            return None
        groups = tuple(str(g) for g in user.get("groups") or [])
        extra = tuple(sorted((str(k), tuple(str(x) for x in v)) for k, v in (user.get("extra") or {}).items()))
        return Caller(str(user["username"]), groups, str(user.get("uid") or ""), extra, kubernetes=True)


class Unauthenticated(Exception):
    """No valid credentials: the message says what was wrong (never the token)."""


class Authenticator:
    """The one check of a presented token, for every door that takes one: the bearer header, the console's sign-in,
    the codec's cookie and login. Throttled per client and token prefix, failures logged and counted."""

    def __init__(self, tokens: TokenFile, *, reviews: TokenReviews | None, throttle: FailureThrottle | None = None,
                 count: Callable[[str, str], None] = lambda via, reason: None) -> None:
        self.tokens, self.reviews = tokens, reviews
        self.throttle = throttle if throttle is not None else FailureThrottle()  # (an empty one is falsy)
        self.count = count

    @property
    def configured(self) -> bool:
        """Some token can succeed: the file has tokens, or the cluster is asked."""
        return bool(self.tokens.tokens()) or self.reviews is not None

    async def authenticate(self, token: str, *, client: str, via: str) -> Caller:
        """The caller `token` belongs to. Raises Unauthenticated (no or a wrong token), Throttled (too many wrong
        ones from this client, or with this token's prefix) or ReviewUnavailable (the cluster cannot say)."""
        if not token:
            self.count(via, "missing")
            raise Unauthenticated("missing bearer token")
        keys = (f"client:{client}", token_key(token))
        try:
            self.throttle.check(*keys)
        except Throttled:
            self.count(via, "throttled")
            raise
        who = self.tokens.caller(token)
        if who is None and self.reviews is not None:
            who = await self.reviews.caller(token)
        if who is not None:
            return who
        self.throttle.failed(*keys)
        self.count(via, "invalid")
        try:
            self.throttle.check(*keys)
            slowed = ""
        except Throttled as e:
            slowed = f"; further attempts are throttled ({e.retry_after}s)"
        log.warning("authentication failed (%s) from %s: unknown token %s%s", via, client, fingerprint(token), slowed)
        raise Unauthenticated("invalid token")


def with_authenticated(who: Caller) -> tuple[str, ...]:
    """The caller's groups as the API server would give them: every authenticated user is in system:authenticated."""
    return who.groups if AUTHENTICATED in who.groups else (*who.groups, AUTHENTICATED)
