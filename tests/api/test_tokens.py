"""The API's token file: `token identity` lines as before, optionally with comma-separated groups."""

from __future__ import annotations

from api.auth import Caller, parse_tokens


def test_token_lines_may_carry_groups_and_old_lines_stay_valid() -> None:
    tokens = parse_tokens("# token identity [groups]\n"
                          "t1 alice@example.com\n"
                          "t2 bob@example.com reviewers,release-managers  # a comment\n"
                          "t3\n")
    assert tokens == {"t1": Caller("alice@example.com"),
                      "t2": Caller("bob@example.com", ("reviewers", "release-managers")),
                      "t3": Caller("anonymous")}
