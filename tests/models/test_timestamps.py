"""models/timestamps.py: Kubernetes timestamps written and read in UTC, whatever the machine's zone."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from models.timestamps import parse_rfc3339, rfc3339, rfc3339_exact, rfc3339_micro

ROOT = Path(__file__).resolve().parents[2]
T = datetime(2026, 3, 29, 1, 30, 5, 250000, tzinfo=UTC)


def test_formats() -> None:
    assert rfc3339(T) == "2026-03-29T01:30:05Z"
    assert rfc3339_micro(T) == "2026-03-29T01:30:05.250000Z"
    assert rfc3339_exact(T) == "2026-03-29T01:30:05.250000Z"
    assert rfc3339_exact(T.replace(microsecond=0)) == "2026-03-29T01:30:05Z"


def test_other_zones_are_written_in_utc_and_naive_means_utc() -> None:
    plus_two = T.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(plus_two) == rfc3339(T)
    assert rfc3339(T.replace(tzinfo=None)) == rfc3339(T)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-29T01:30:05Z", T.replace(microsecond=0)),
    ("2026-03-29T01:30:05.250000Z", T),
    ("2026-03-29T03:30:05.25+02:00", T),
    ("2026-03-29T01:30:05", T.replace(microsecond=0)),
    ("", None), (None, None), (17, None), ("yesterday", None),
])
def test_parse(text: object, expected: datetime | None) -> None:
    got = parse_rfc3339(text)
    assert got == expected
    assert got is None or got.tzinfo is UTC


@pytest.mark.parametrize("zone", ["UTC", "Europe/London", "America/New_York", "Pacific/Chatham"])
def test_the_apis_run_age_does_not_depend_on_the_servers_zone(zone: str) -> None:
    created = rfc3339(datetime.now(UTC) - timedelta(seconds=100))
    code = ("from api.main import _summary\n"
            f"print(_summary({{'metadata': {{'name': 'r', 'namespace': 'n', 'creationTimestamp': '{created}'}}}})"
            ".age_seconds)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TZ": zone})
    assert out.returncode == 0, out.stderr
    assert 100 <= int(out.stdout) <= 130
