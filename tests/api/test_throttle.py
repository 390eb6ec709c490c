"""The throttle of failed credentials (api/throttle.py): a burst, then one attempt per refill, per key; memory bounded.
Through the live API, every door that takes a token: tests/e2e/test_api_access.py."""

from __future__ import annotations

import pytest

from api.throttle import FailureThrottle, Throttled, fingerprint, token_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_burst_then_one_attempt_per_refill_and_others_are_untouched() -> None:
    clock = Clock()
    t = FailureThrottle(burst=3, refill_seconds=6.0, clock=clock)
    for _ in range(3):
        t.check("client:a")
        t.failed("client:a")
    with pytest.raises(Throttled) as e:
        t.check("client:a")
    assert e.value.retry_after == 6 and e.value.key == "client:a"
    t.check("client:b")  # another client is not slowed
    clock.now += 4.5
    with pytest.raises(Throttled) as e:
        t.check("client:a", "client:b")
    assert e.value.retry_after == 2
    clock.now += 1.5
    t.check("client:a")  # one attempt has come back
    t.failed("client:a")
    with pytest.raises(Throttled):
        t.check("client:a")
    clock.now += 600
    t.check("client:a")  # refilled, never beyond the burst
    for _ in range(3):
        t.failed("client:a")
    with pytest.raises(Throttled):
        t.check("client:a")


def test_only_failures_cost_and_memory_is_bounded() -> None:
    t = FailureThrottle(burst=1, max_keys=100)
    for i in range(1000):
        t.failed(f"client:{i}")
    assert len(t) == 100
    with pytest.raises(Throttled):
        t.check("client:999")
    t.check("client:0")  # forgotten first: a full bucket again


def test_a_tokens_bucket_is_its_prefix_and_a_jwt_is_keyed_by_its_signature() -> None:
    assert token_key("abcdefgh-one") == token_key("abcdefgh-two") != token_key("abcdefgX-one")
    header = "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9"
    assert token_key(f"{header}.eyJzdWIiOiJhIn0.SIGNATURE-1") != token_key(f"{header}.eyJzdWIiOiJhIn0.OTHERSIG-1")
    assert "abcdefgh" not in token_key("abcdefgh-one") and "abcdefgh" not in fingerprint("abcdefgh-one")
    assert fingerprint("a") != fingerprint("b") and len(fingerprint("a")) == 12
