"""A run's logs over HTTP: the agent's or one hook's container log, read from its pod, followed while it runs.

`GET /api/v1/runs/{name}/logs?hook=&attempt=&follow=` answers the log as plain text (streamed; with `follow=true`
until the container ends), for the CLI and the console alike. Pods are found as `agentrun logs` finds them: by the
Job the run's component has for that attempt (models/names.py), the newest pod of that Job. Pods go with their
Jobs when the run is cleaned up (unless `cleanup: keep`); the worker's cleanup keeps the tail of each container's
log in the run's ConfigMap `<run>-logs` first (models/run_logs.py), and that is what is answered once the pod is gone.
A run with neither (cleaned up by an older worker, or with AGENTRUN_KEEP_LOG_BYTES=0) answers 404 saying so.

Each follow reads on a thread of its own (never the event loop's shared pool, which a few idle follows would
exhaust): the thread hands chunks to the loop, and a reader that goes away shuts the response down, which ends the
thread's read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import StreamingResponse

from kube import Kube, NotFound, typed_errors
from models import run_logs
from models.names import AGENTRUNS, Component, agent_job_of, hook_container, job_name

from .deps import CallerDep, Namespace, StateDep
from .runops import read_run

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])
CHUNK = 16 * 1024


@dataclass(frozen=True)
class LogTarget:
    """The container of one run's component whose log is wanted: the agent's (hook None) or a hook's."""

    job: str
    container: str
    hook: str | None
    attempt: int


class NoLog(LookupError):
    pass


def hooks(run: dict[str, Any]) -> list[tuple[str, str]]:
    """(phase, hook) of every lifecycle hook the run has, in the order they run (preRun, postRun)."""
    lifecycle = (run.get("spec") or {}).get("lifecycle") or {}
    return [(phase, str(h.get("name"))) for phase, key in (("preRun", "preRun"), ("postRun", "postRun"))
            for h in lifecycle.get(key) or [] if h.get("name")]


def log_target(run: dict[str, Any], hook: str | None, attempt: int | None) -> LogTarget:
    """Where the log of `hook` (None: the agent) of `attempt` (None: the last one run) is."""
    name = str((run.get("metadata") or {}).get("name") or "")
    # A retried run's agent and gate hook ran once per attempt, each in Jobs of their own: the last, unless asked.
    last = int((run.get("status") or {}).get("attempt") or 1)
    attempt = attempt or last
    if attempt < 1 or attempt > last:
        raise NoLog(f"run {name} has no attempt {attempt} (it ran {last})")
    if hook is None:
        return LogTarget(agent_job_of(run, attempt), "agent", None, attempt)
    lifecycle = (run.get("spec") or {}).get("lifecycle") or {}
    pre = {h.get("name") for h in lifecycle.get("preRun") or []}
    post = {h.get("name") for h in lifecycle.get("postRun") or []}
    gated = {h.get("name") for h in lifecycle.get("postRun") or [] if h.get("gate")}
    if hook not in pre | post:
        raise NoLog(f'run {name} has no hook "{hook}"')
    # With a gate, the other postRun hooks run after the verdict in a Job of their own.
    component: Component = "prerun" if hook in pre else "post-gate" if gated and hook not in gated else "post-run"
    return LogTarget(job_name(name, component, attempt if component == "post-run" else 1),
                     hook_container(component, hook), hook, attempt)


async def find_pod(kube: Kube, namespace: str, target: LogTarget) -> str | None:
    """The newest pod of the target's Job, or None when it has none (not started yet, or cleaned up)."""
    pods: Any = await kube.call(kube.core.list_namespaced_pod, namespace, label_selector=f"job-name={target.job}",
                                action=f"list pods of Job {target.job}")
    if not pods.items:
        return None
    return str(sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)[-1].metadata.name)


async def kept_log(kube: Kube, namespace: str, run: dict[str, Any], target: LogTarget) -> str | None:
    """The tail the worker kept of the target's log when it cleaned the run up; None when it kept none."""
    meta = run.get("metadata") or {}
    try:
        cm: Any = await kube.call(kube.core.read_namespaced_config_map, run_logs.logs_name(str(meta.get("name"))),
                                  namespace, action="read the run's kept logs")
    except NotFound:
        return None
    return run_logs.kept_log(kube.api.sanitize_for_serialization(cm), run_uid=str(meta.get("uid") or ""),
                             job=target.job, container=target.container)


async def _text(text: str) -> AsyncIterator[bytes]:
    yield text.encode()


async def open_log(kube: Kube, namespace: str, pod: str, container: str, *, follow: bool) -> AsyncIterator[bytes]:
    """The container's log in chunks (followed until the container ends when `follow`). Opening it raises the
    typed Kubernetes error (e.g. BadRequest while the container has not started) before the first chunk."""
    action = f"read log of {pod}/{container}"
    resp: Any = await kube.call(kube.core.read_namespaced_pod_log, pod, namespace, container=container,
                                follow=follow, _preload_content=False, action=action)
    return _chunks(resp, action)


async def _chunks(resp: Any, action: str) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
    stop = threading.Event()

    def hand(item: bytes | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        try:
            with typed_errors(action):
                # read1: whatever has arrived, at most CHUNK (stream(CHUNK) would wait for CHUNK bytes, holding a
                # followed log's lines back until the container ends).
                while not stop.is_set() and (chunk := resp.read1(CHUNK)):
                    hand(chunk)
        except Exception as e:
            if not stop.is_set():
                hand(e)
        finally:
            hand(None)

    thread = threading.Thread(target=pump, name="log-follow", daemon=True)
    thread.start()
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            resp.shutdown()  # ends a read that waits for the next line of a running container
        with contextlib.suppress(Exception):
            resp.release_conn()


async def run_log(kube: Kube, namespace: str, run: dict[str, Any], *, hook: str | None, attempt: int | None,
                  follow: bool) -> tuple[LogTarget, AsyncIterator[bytes]]:
    target = log_target(run, hook, attempt)
    pod = await find_pod(kube, namespace, target)
    if pod is not None:
        return target, await open_log(kube, namespace, pod, target.container, follow=follow)
    kept = await kept_log(kube, namespace, run, target)
    if kept is None:
        raise NoLog(f"no pod for Job {target.job} and no log kept of it (not started yet, or cleaned up without "
                    "keeping logs)")
    return target, _text(kept)  # the container ended before its pod went: nothing more to follow


@router.get("/{name}/logs", response_class=StreamingResponse,
            responses={200: {"content": {"text/plain": {}}, "description": "the log (streamed)"},
                       404: {"description": "no such run, hook or attempt, or no log (not started, or cleaned up "
                                             "without keeping it)"}})
async def get_logs(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default",
                   hook: str | None = None, attempt: int | None = Query(None, ge=1),
                   follow: bool = False) -> StreamingResponse:
    """The agent's log (or `hook`'s) of the last attempt (or `attempt`), followed while it runs with `follow`. Reading
    a run's logs is reading the run (`get agentruns`)."""
    await state.allow(who, "get", AGENTRUNS, namespace, name=name)
    run = await read_run(state, namespace, name)
    try:
        _target, chunks = await run_log(state.kube, namespace, run, hook=hook, attempt=attempt, follow=follow)
    except NoLog as e:
        raise HTTPException(status_code=404, detail=str(e)) from e
    return StreamingResponse(chunks, media_type="text/plain; charset=utf-8",
                             headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
