"""Container logs: kept per container and restart in the CRI file format (`<time> <stream> <F|P> <text>`, lines
longer than containerd's limit split into partial entries), and served to the API's `/log` as the kubelet serves
them (`tailLines`, `follow`, `timestamps`, `sinceSeconds`, `limitBytes`, `previous`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..errors import bad_request
from ..util import now, parse_time
from .runtime import ContainerRun, PodRun

Obj = dict[str, Any]

MAX_LOG_ENTRY = 16 * 1024  # containerd splits longer lines into partial entries


def cri_message(line: bytes) -> bytes:
    """The text of one CRI log entry (`<time> <stream> <F|P> <text>`), with its newline unless partial."""
    parts = line.split(b" ", 3)
    if len(parts) < 4:
        return b""
    return parts[3] if parts[2] == b"P" else parts[3] + b"\n"


async def pump(proc: asyncio.subprocess.Process, cr: ContainerRun) -> None:
    """Copy the container's output into its CRI log: one entry per line, and lines longer
    than MAX_LOG_ENTRY split into partial (P) entries, as container runtimes do."""
    assert proc.stdout is not None
    buf = b""
    with cr.log_path.open("ab", buffering=0) as f:

        def entry(data: bytes, tag: bytes) -> None:
            stamp = now().strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
            f.write(stamp.encode() + b" stdout " + tag + b" " + data + b"\n")

        while True:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                break
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if 0 <= nl <= MAX_LOG_ENTRY:
                    entry(buf[:nl], b"F")
                    buf = buf[nl + 1:]
                elif len(buf) > MAX_LOG_ENTRY:
                    entry(buf[:MAX_LOG_ENTRY], b"P")
                    buf = buf[MAX_LOG_ENTRY:]
                else:
                    break
            cr.changed.set()
        if buf:
            entry(buf, b"P")
        cr.changed.set()


class PodLogs:
    """The log files under the kubelet's pods directory; `runs`: the pods running now (the kubelet's)."""

    def __init__(self, pods_dir: Path, runs: dict[str, PodRun]) -> None:
        self.pods_dir = pods_dir
        self.runs = runs

    def _log_files(self, pod: Obj, container: str) -> list[Path]:
        d = self.pods_dir / pod["metadata"]["uid"] / "logs"
        files = sorted(d.glob(f"{container}-*.log"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        return files

    def check(self, pod: Obj, container: str, previous: bool) -> None:
        files = self._log_files(pod, container)
        if previous:
            if len(files) < 2:
                raise bad_request(f'previous terminated container "{container}" in pod "{pod["metadata"]["name"]}" '
                                  "not found")
            return
        if not files:
            raise bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start: '
                              + self._waiting_reason(pod, container))

    def _waiting_reason(self, pod: Obj, container: str) -> str:
        st = pod.get("status") or {}
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            if cs["name"] == container:
                w = (cs.get("state") or {}).get("waiting") or {}
                return str(w.get("reason") or "ContainerCreating")
        return "ContainerCreating"

    async def stream(self, pod: Obj, container: str, *, follow: bool, tail: int | None, timestamps: bool,
                     since_seconds: int | None, limit_bytes: int | None,
                     disconnected: asyncio.Event, previous: bool = False) -> AsyncIterator[bytes]:
        files = self._log_files(pod, container)
        path = files[-2] if previous else files[-1]
        run = self.runs.get(pod["metadata"]["uid"])
        cr = run.containers.get(container) if run else None
        if cr is not None and cr.log_path != path:
            cr = None
        since = (now() - dt.timedelta(seconds=since_seconds)) if since_seconds else None
        sent = 0

        def render(raw: bytes) -> bytes | None:
            parts = raw.split(b" ", 3)
            if len(parts) < 4:
                return None
            ts, _stream, tag, text = parts
            if since is not None and parse_time(ts.decode()[:26] + "Z") < since:
                return None
            body = text if tag == b"P" else text + b"\n"
            if tag == b"P" and body.endswith(b"\n"):
                body = body[:-1]
            return (ts + b" " + body) if timestamps else body

        data = path.read_bytes()
        offset = len(data)
        lines = [ln for ln in data.split(b"\n") if ln]
        if tail is not None and tail >= 0:
            lines = lines[-tail:] if tail else []
        for ln in lines:
            out = render(ln)
            if out is None:
                continue
            if limit_bytes is not None:
                if sent >= limit_bytes:
                    return
                out = out[: limit_bytes - sent]
            sent += len(out)
            yield out
        if not follow or cr is None:
            return
        while not disconnected.is_set():
            cr.changed.clear()
            with path.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
            if chunk:
                complete, _, rest = chunk.rpartition(b"\n")
                if complete or not rest:
                    offset += len(complete) + 1 if complete else 0
                    for ln in complete.split(b"\n"):
                        if ln:
                            out = render(ln)
                            if out is not None:
                                if limit_bytes is not None:
                                    if sent >= limit_bytes:
                                        return
                                    out = out[: limit_bytes - sent]
                                sent += len(out)
                                yield out
            if cr.finished.is_set():
                with path.open("rb") as f:
                    f.seek(offset)
                    rest_data = f.read()
                for ln in rest_data.split(b"\n"):
                    if ln:
                        out = render(ln)
                        if out is not None:
                            yield out
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cr.changed.wait(), timeout=0.5)
