"""`apply --wait`'s status lines: the run's phase, gate and age."""

from __future__ import annotations

from datetime import UTC, datetime

from cli.follow import _Followed


def test_a_status_line_shows_the_runs_age_not_the_time_since_following_began() -> None:
    """A run applied a while ago (or found already there) is as old as its object, whenever `--wait` started."""
    f = _Followed("team", "weekly", phase="PostRunning", gate="pending",
                  run={"metadata": {"creationTimestamp": "2026-03-01T11:58:45Z"}})
    wall = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    assert f.line(1000.0, 1000.0, wall) == "agentrun/weekly: PostRunning  gate pending  1m15s"
    # Not seen yet: how long it has been waited for.
    assert _Followed("team", "new").line(1012.0, 1000.0, wall) == "agentrun/new: waiting to start  12s"
