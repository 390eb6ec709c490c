"""Failed credentials are throttled (SPEC §7): a client that keeps presenting wrong tokens is slowed to a trickle.

Without this the probe of issue 27 tried 530-680 wrong tokens a second against the bearer check, the console's
sign-in and the codec login, with no delay and no log line. Each failed attempt now costs a token from two buckets:
the client's (its address) and the presented token's prefix (so a guess at the rest of a token whose first
characters leaked is slowed wherever it comes from). A bucket holds `BURST` attempts and refills one every
`REFILL_SECONDS`; while either bucket of a request is empty the request is answered 429 with `Retry-After`, before its
credentials are even looked at (answering them would keep the guessing going). Successful attempts cost nothing, and
a client whose buckets are full is never slowed, so other clients never notice an attack on one.

Memory is bounded: at most `MAX_KEYS` buckets are kept, the least recently used dropped first (a dropped bucket is a
full one: the worst an attacker gains by flooding keys is a fresh burst for some of them).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

BURST = 10
REFILL_SECONDS = 6.0
MAX_KEYS = 10_000
# How much of a token names its bucket: enough to tell random tokens apart, far too little to use.
PREFIX_CHARS = 8


class Throttled(Exception):
    """Too many failed attempts from this client (or with this token's prefix): try again after `retry_after`."""

    def __init__(self, retry_after: int, key: str) -> None:
        super().__init__(f"too many failed attempts; retry in {retry_after}s")
        self.retry_after, self.key = retry_after, key


def token_key(token: str) -> str:
    """The bucket of a token's prefix, as a digest (no part of a token is kept). A JWT's first characters are the
    same for every token (its header), so its signature's are taken instead."""
    part = token.rsplit(".", 1)[-1] if token.count(".") == 2 else token
    return "token:" + hashlib.sha256(part[:PREFIX_CHARS].encode()).hexdigest()[:16]


def fingerprint(token: str) -> str:
    """What a log line says of a token: a short digest that tells one from another and reveals nothing."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


@dataclass
class _Bucket:
    tokens: float
    at: float


class FailureThrottle:
    def __init__(self, *, burst: int = BURST, refill_seconds: float = REFILL_SECONDS, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.refill_seconds, self.max_keys, self.clock = burst, refill_seconds, max_keys, clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def _level(self, key: str, now: float) -> float:
        b = self._buckets.get(key)
        if b is None:
            return float(self.burst)
        return min(float(self.burst), b.tokens + (now - b.at) / self.refill_seconds)

    def check(self, *keys: str) -> None:
        """Raises Throttled when any of `keys` has no attempt left."""
        now = self.clock()
        for key in keys:
            level = self._level(key, now)
            if level < 1.0:
                raise Throttled(max(1, math.ceil((1.0 - level) * self.refill_seconds)), key)

    def failed(self, *keys: str) -> None:
        """One failed attempt, charged to each of `keys`."""
        now = self.clock()
        for key in keys:
            level = self._level(key, now) - 1.0
            self._buckets[key] = _Bucket(max(level, 0.0), now)
            self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)
