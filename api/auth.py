"""Bearer tokens → identities, from a file that is re-read when it changes.

Lines are `token identity`, optionally followed by comma-separated groups (`token identity group1,group2`), so a
policy's `gatePolicy.approvers` entry `group:<name>` can name API users too. The identity is what a gate verdict
records as `decidedBy`. Tokens are compared in constant time; an empty or missing file means nobody is authorised
(unless the API runs --insecure).
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path

from models.authorship import Author


@dataclass(frozen=True)
class Caller:
    identity: str
    groups: tuple[str, ...] = ()

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
