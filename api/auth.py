"""Bearer tokens → identities, from a file that is re-read when it changes.

The identity is what a gate verdict records as `decidedBy`. Tokens are compared in constant
time; an empty or missing file means nobody is authorised (unless the API runs --insecure).
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TokenFile:
    path: Path | None
    _mtime: float = -1.0
    _tokens: dict[str, str] = field(default_factory=dict)

    def tokens(self) -> dict[str, str]:
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

    def identity(self, token: str) -> str | None:
        for known, who in self.tokens().items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return who
        return None


def parse_tokens(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        token, _, who = line.partition(" ")
        out[token] = who.strip() or "anonymous"
    return out
