from datetime import timedelta

import pytest

from models.duration import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3), ("2h45m30.5s", 9930.5),
    ("0", 0), ("-1m", -60), (".5s", 0.5), ("1h0m0s", 3600),
])
def test_go_durations_parse_to_their_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "m5", "1h 30m", "1d", "abc", "1.2.3s"])
def test_malformed_durations_are_refused_with_the_input_named(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_format_duration_writes_go_style() -> None:
    assert format_duration(timedelta(minutes=90)) == "1h30m0s"
    assert format_duration(timedelta(seconds=5)) == "5s"
    assert format_duration(timedelta(minutes=5)) == "5m0s"
    assert format_duration(timedelta(0)) == "0s"


@pytest.mark.parametrize("text", ["99999999999999999h", "2562048h", "9999999999999999999999s"])
def test_durations_longer_than_go_allows_are_refused_not_crashing(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
