"""Files under the context directory (``/workspace/context``), as the agent sees them.

preRun hooks fetch material for the agent into ``/workspace/context`` (SPEC §3.3-3.4);
this module is the one place that lists and reads it, with bounds, so a large or binary
file cannot blow up the prompt or crash the run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 256 * 1024


@dataclass(frozen=True)
class ContextFile:
    """One context file: its path relative to the context dir (``/``-separated) and its text."""

    name: str
    text: str
    truncated: bool

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def load_context(directory: Path) -> list[ContextFile]:
    """Regular files under ``directory`` (recursively), sorted by relative name.

    Each is read as UTF-8 (undecodable bytes replaced), at most MAX_FILE_BYTES per file and
    MAX_TOTAL_BYTES in all; unreadable files are logged and left out. A missing directory
    means no context.
    """
    if not directory.is_dir():
        return []
    files: list[ContextFile] = []
    budget = MAX_TOTAL_BYTES
    for path in sorted(directory.rglob("*"), key=lambda p: p.relative_to(directory).as_posix()):
        if not path.is_file():
            continue
        name = path.relative_to(directory).as_posix()
        limit = min(MAX_FILE_BYTES, budget)
        try:
            with path.open("rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            log.warning("context file %s could not be read, left out: %s", name, exc)
            continue
        truncated = len(data) > limit
        data = data[:limit]
        budget -= len(data)
        files.append(ContextFile(name=name, text=data.decode("utf-8", errors="replace"),
                                 truncated=truncated))
    return files
