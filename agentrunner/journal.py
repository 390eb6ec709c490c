"""The run's journal: every model response and every tool call's start and result, appended before the loop goes
on, so an agent container started again (its pod lost, or after a wait) continues instead of starting over.

The only module that knows the format. ``<AGENT_STATE_DIR>/journal.jsonl``, one JSON object per line, appended
and ``fsync``'d, never rewritten: a round adds only its own records (no copy of the history), and a torn last line
(the process killed mid-write) is dropped when the journal is read. Records:

- ``{"k": "start", "v": 1, "task": <sha256 of TASK>}`` — the journal belongs to this task (another task's journal
  is refused, not continued);
- ``{"k": "model", "round": n, "text", "calls": [{id, name, arguments}], "usage": {...}, "model", "native"}`` — a
  model response (``native`` is the provider library's own message, for a faithful replay);
- ``{"k": "call", "round", "id", "name", "arguments"}`` — a tool call is about to run;
- ``{"k": "result", "round", "id", "name", "content", "status"}`` — its result, as the model reads it (a call is
  known by its round and id: local servers reuse ids like ``call_0`` every round);
- ``{"k": "wait", "round", "kind", "calls": [{id, tool, arguments, argumentsSha256}]}`` — the round's calls that
  wait for a person (SPEC §10, agentrunner/approvals.py): the container ends here, and one started again with the
  decisions continues from this round;
- ``{"k": "decision", "round", "id", "action", "sha256", "arguments", "reason", "by", "source"}`` — a decision on a
  waiting call, recorded by the container started again before it acts on it (the first one recorded counts);
- ``{"k": "end", "result": {...}}`` — the run's result (a container started again only reports it again).

Every record carries ``active_ms``: the agent's active time so far, across all its containers (SPEC §10: parked
time is not run time), from which a restarted agent computes what is left of ``RUN_TIMEOUT``.

On restart a recorded model response is never requested again and a recorded result never executed again; a call
with a ``call`` record but no ``result`` is re-run only if its tool is read-only, and otherwise answered to the
model as interrupted (it may or may not have happened).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE = "journal.jsonl"
VERSION = 1


class JournalError(Exception):
    """The journal cannot be used for this run; the message says why."""


@dataclass
class Replay:
    """What an earlier container of the run recorded."""

    turns: list[dict[str, Any]] = field(default_factory=list)  # model records, in order
    started: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_key -> call record
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_key -> result record
    end: dict[str, Any] | None = None
    waits: dict[int, dict[str, Any]] = field(default_factory=dict)  # round -> its wait record (the last one)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_key -> the first decision recorded
    active_ms: int = 0
    records: int = 0


def call_key(round_: int, call_id: str) -> str:
    return f"{round_}/{call_id}"


def task_hash(task: str) -> str:
    return hashlib.sha256(task.encode()).hexdigest()


class Journal:
    """Append-only JSON lines; ``path`` None keeps nothing (no AGENT_STATE_DIR)."""

    def __init__(self, directory: Path | None) -> None:
        self.path = directory / FILE if directory else None
        self._fd: int | None = None
        self.bytes_written = 0

    def open(self, task: str) -> Replay:
        """Read what is recorded (dropping a torn last line) and get ready to append."""
        replay = Replay()
        if self.path is None:
            return replay
        self.path.parent.mkdir(parents=True, exist_ok=True)
        good = 0
        if self.path.exists():
            data = self.path.read_bytes()
            for line in data.splitlines(keepends=True):
                if not line.endswith(b"\n"):
                    break
                try:
                    record = json.loads(line)
                except ValueError:
                    break
                good += len(line)
                self._apply(replay, record, task)
            if good < len(data):
                log.warning("journal %s: dropped a torn last record (%d bytes)", self.path, len(data) - good)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if good < os.fstat(self._fd).st_size:
            os.ftruncate(self._fd, good)
        if replay.records == 0:
            self.append({"k": "start", "v": VERSION, "task": task_hash(task)}, active_ms=0)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the new file's name is durable too
            finally:
                os.close(dir_fd)
        return replay

    @staticmethod
    def _apply(replay: Replay, record: dict[str, Any], task: str) -> None:
        replay.records += 1
        replay.active_ms = max(replay.active_ms, int(record.get("active_ms") or 0))
        kind = record.get("k")
        if kind == "start":
            if record.get("v") != VERSION:
                raise JournalError(f"the journal has version {record.get('v')}, this agent reads {VERSION}")
            if record.get("task") != task_hash(task):
                raise JournalError("the journal in AGENT_STATE_DIR belongs to another task; refusing to continue it")
        elif kind == "model":
            replay.turns.append(record)
        elif kind == "call":
            replay.started[call_key(record.get("round", 0), record["id"])] = record
        elif kind == "result":
            replay.results[call_key(record.get("round", 0), record["id"])] = record
        elif kind == "wait":
            replay.waits[int(record.get("round") or 0)] = record
        elif kind == "decision":
            replay.decisions.setdefault(call_key(record.get("round", 0), record["id"]), record)
        elif kind == "end":
            replay.end = record.get("result")

    def append(self, record: dict[str, Any], *, active_ms: int) -> None:
        """Append one record durably (written and fsync'd before this returns)."""
        if self.path is None or self._fd is None:
            return
        line = (json.dumps({**record, "active_ms": active_ms}, separators=(",", ":"), ensure_ascii=False)
                + "\n").encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)
        self.bytes_written += len(line)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
