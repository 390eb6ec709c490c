"""How the CLI prints objects: `-o table|wide|json|yaml`, one way for runs and schedules alike.

Tables are rich tables without borders (kubectl's look: a header line, then one line per object), so they read
well in a terminal and still split on whitespace in scripts; rich leaves colour out when stdout is not a terminal,
and a table piped into a file is never cut or wrapped to the terminal's width. `json` and `yaml` print the objects
themselves: one object for `get`, and for `list` a `{"apiVersion": "v1", "kind": "List", "items": [...]}` object as
`kubectl get -o json` prints one, so `jq '.items[]'` works the same on both.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "wide", "json", "yaml")


def console() -> Console:
    """A console on the current stdout: a terminal's width and colours, else no colour and no width limit."""
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=None if tty else 100_000,
                   no_color=not tty)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", show_header=True)
    for name in header:
        t.add_column(name, no_wrap=True, overflow="ignore")
    for row in rows:
        t.add_row(*row)
    c = console()
    if c.is_terminal:
        # As kubectl: a row wider than the terminal runs on (the terminal wraps it) rather than being squeezed into
        # columns too narrow to read.
        need = c.measure(t, options=c.options.update_width(100_000)).maximum
        if need > c.width:
            c = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=need)
        c.print(t)
        return
    # Without a terminal: plain lines without the padding rich gives the last column.
    with c.capture() as captured:
        c.print(t)
    for line in captured.get().splitlines():
        print(line.rstrip())


def document(obj: Any, fmt: str) -> None:
    """One object as JSON (indented) or YAML."""
    if fmt == "json":
        print(json.dumps(obj, indent=2))
    else:
        print(yaml.safe_dump(obj, sort_keys=False), end="")


def items(objs: list[Any], fmt: str) -> None:
    """A list as one `kind: List` object (what `kubectl get -o json|yaml` prints for a list)."""
    document({"apiVersion": "v1", "kind": "List", "items": objs}, fmt)


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's AGE: 12s, 5m, 3h, 2d."""
    if not timestamp:
        return ""
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
