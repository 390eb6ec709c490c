"""`agentrun apply` and following runs to their end (`apply --wait`, `run --wait`, `demo`).

`apply` (cli/apply.py) is a Kubernetes write, declarative as `kubectl apply` is: it acts as the kubeconfig's user,
whom the admission webhook stamps as a run's creator. Following shows a status line per run — phase, gate state,
elapsed — live on a terminal (rich) and as a printed line per change otherwise, and the exact approve command when
a gate waits; one watch per namespace feeds every followed run of it.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

from kubernetes import watch

from kube import Gone, typed_errors
from models.agentrun import TERMINAL_PHASES
from models.names import AGENTRUNS, GROUP, VERSION
from models.timestamps import parse_rfc3339

from . import apply as applying
from . import output
from .runs import Session

APPROVE_HINT = ("approve with `agentrun approve {name} -n {ns}` (or reject/rewrite with --response TEXT, or retry "
                "with --feedback TEXT)")


# -- apply ----------------------------------------------------------------------------------------------------------


def apply(s: Session, files: list[Path], namespace: str, *, wait: bool, timeout: float,
          force_conflicts: bool = False) -> int:
    """`agentrun apply` (cli/apply.py), then with `wait` each AgentRun it created or found followed to its end."""
    applied, code = applying.apply(s, files, namespace, force_conflicts=force_conflicts)
    runs = [(a.namespace, a.name) for a in applied if a.kind == "AgentRun"]
    if not wait or not runs:
        return code
    phases = follow(s, runs, timeout=timeout)
    return code or (0 if all(p in ("Succeeded", "Skipped") for p in phases.values()) else 1)


# -- following runs -------------------------------------------------------------------------------------------------


@dataclass
class _Followed:
    ns: str
    name: str
    phase: str = ""
    gate: str = ""
    attempt: str = ""
    announced: bool = False
    done: bool = False
    deleted: bool = False
    run: dict[str, Any] = field(default_factory=dict)

    def line(self, now: float, started: float, wall: datetime | None = None) -> str:
        """The run's status line; the time is the run's age (since its creation, as `get`'s AGE), or, before its
        object is seen, how long it has been waited for."""
        gate = f"  gate {self.gate}" if self.gate else ""
        attempt = f"  attempt {self.attempt}" if self.attempt and self.attempt != "1" else ""
        created = parse_rfc3339((self.run.get("metadata") or {}).get("creationTimestamp"))
        seconds = ((wall or datetime.now(UTC)) - created).total_seconds() if created is not None else now - started
        return (f"agentrun/{self.name}: {self.phase or 'waiting to start'}{gate}{attempt}  "
                f"{output.elapsed(max(seconds, 0))}")


def follow(s: Session, runs: list[tuple[str, str]], *, timeout: float) -> dict[str, str]:
    """A status line per run (phase, gate state, elapsed) until each ends, the approve command when a gate
    waits, then each run's result or error and its Temporal UI link. Answers each run's last phase.

    On a terminal the lines are live (rich); otherwise a line is printed on every change."""
    started = time.monotonic()
    followed = {(ns, name): _Followed(ns, name) for ns, name in runs}
    events: queue.Queue[tuple[str, str, str, dict[str, Any]] | BaseException] = queue.Queue()
    stop = threading.Event()
    for ns in sorted({ns for ns, _ in runs}):
        names = {name for n, name in runs if n == ns}
        threading.Thread(target=_watch_namespace, args=(s, ns, names, events, stop), daemon=True,
                         name=f"follow-{ns}").start()
    live = _Live(followed, started)
    try:
        deadline = started + timeout
        while not all(f.done for f in followed.values()) and time.monotonic() < deadline:
            try:
                item = events.get(timeout=1)
            except queue.Empty:
                live.tick()
                continue
            if isinstance(item, BaseException):
                raise item
            ns, name, kind, obj = item
            f = followed[(ns, name)]
            if f.done:
                continue
            if kind == "DELETED":
                f.done, f.deleted = True, True
                live.note(f"agentrun/{name} deleted")
                continue
            st = obj.get("status") or {}
            f.run = obj
            changed = (st.get("phase") or "", (st.get("gate") or {}).get("state") or "",
                       str(st.get("attempt") or "")) != (f.phase, f.gate, f.attempt)
            f.phase, f.gate, f.attempt = (st.get("phase") or "", (st.get("gate") or {}).get("state") or "",
                                          str(st.get("attempt") or ""))
            f.done = f.phase in TERMINAL_PHASES
            if changed:
                live.changed(f)
            if f.gate == "pending" and not f.announced:
                f.announced = True
                live.note(f"agentrun/{name}: waiting for approval — " + APPROVE_HINT.format(name=name, ns=ns))
    finally:
        stop.set()
        live.close()
    for f in followed.values():
        if f.deleted:
            continue
        if f.done:
            _summary(s, f.run)
        else:
            print(f"agentrun/{f.name}: still {f.phase or 'not started'} after {timeout:.0f}s", file=sys.stderr)
    return {f.name: f.phase for f in followed.values()}


class _Live:
    """The status lines: rich's Live display on a terminal, a printed line per change otherwise."""

    def __init__(self, followed: dict[tuple[str, str], _Followed], started: float) -> None:
        self.followed, self.started = followed, started
        self.console = output.console()
        self.live: Any = None
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self.live.start()

    def _render(self) -> Any:
        from rich.text import Text

        now = time.monotonic()
        return Text("\n".join(f.line(now, self.started) for f in self.followed.values()))

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(self._render())

    def changed(self, f: _Followed) -> None:
        if self.live is not None:
            self.live.update(self._render())
        else:
            print(f.line(time.monotonic(), self.started), flush=True)

    def note(self, text: str) -> None:
        if self.live is not None:
            self.live.console.print(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()


def _watch_namespace(s: Session, ns: str, names: set[str], events: queue.Queue[Any], stop: threading.Event) -> None:
    """One watch per namespace feeds the followed runs' objects to the queue (resumed when the server ends it)."""
    rv = ""
    try:
        while not stop.is_set():
            w = watch.Watch()
            try:
                with typed_errors(f"watch AgentRuns in {ns}"):
                    if not rv:
                        listed = cast(dict[str, Any], s.custom.list_namespaced_custom_object(GROUP, VERSION, ns,
                                                                                             AGENTRUNS))
                        rv = str(listed["metadata"]["resourceVersion"])
                        for obj in listed.get("items", []):
                            if obj["metadata"]["name"] in names:
                                events.put((ns, obj["metadata"]["name"], "ADDED", obj))
                    for ev in w.stream(s.custom.list_namespaced_custom_object, GROUP, VERSION, ns, AGENTRUNS,
                                       resource_version=rv, timeout_seconds=5):
                        obj = ev["raw_object"]
                        rv = str(obj["metadata"]["resourceVersion"])
                        if obj["metadata"]["name"] in names and ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            events.put((ns, obj["metadata"]["name"], ev["type"], obj))
                        if stop.is_set():
                            break
            except Gone:
                rv = ""  # list again
            finally:
                w.stop()
    except BaseException as e:  # handed to the main thread, which raises it
        events.put(e)


def _summary(s: Session, run: dict[str, Any]) -> None:
    st = run.get("status") or {}
    name = (run.get("metadata") or {}).get("name", "")
    if st and name:
        print(f"agentrun/{name}: {st.get('phase')}" + (f" (gate {st['gate']['state']})" if st.get("gate") else ""))
    if st.get("result"):
        print(f"result:\n{st['result']}")
    if st.get("error"):
        print(f"error: {st['error']}")
    for c in st.get("conditions") or []:
        if c.get("type") in ("PostRunFailed", "StepFailed") and c.get("status") == "True":
            print(f"condition {c['type']}: {c.get('message', '')}")
    if st.get("workflowId") and s.temporal_ui:
        print(f"temporal: {s.temporal_ui}/namespaces/default/workflows/{quote(st['workflowId'], safe='')}")
