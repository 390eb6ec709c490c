"""AgentRun throughput, latency, Kubernetes API load and memory on the embedded stack; prints
figures, asserts nothing.

    .venv/bin/python -m bench.runs [--runs 200] [--parked 100] [--concurrency 20] [--park-seconds 60] [--json]

Starts its own stack in a temporary state directory (Temporal dev server, tuned as `agentrun up`
does; localkube as a process with the CRDs and the agent image mapped to the reference agent
program; the worker and the bridge as processes) and stops it all at the end. Then:

1. AgentRuns: `--runs` runs, each one preRun hook (`sh -c true`), the echo agent and one postRun
   hook, created with at most `--concurrency` in flight; latency is create → `status.phase:
   Succeeded` seen by a watch.
2. The ceiling: as many bare Temporal workflows, each running as many no-op activities in a row
   as one AgentRun workflow does (counted from a real run's history), on the same server, with an
   in-process worker on its own task queue.
3. The floor: a plain script (threads, the `kubernetes` client, one Job watch) doing the same
   Kubernetes calls without Temporal: create the AgentRun, PVC, preRun Job, wait, agent Job,
   wait, list its pod and read its log, postRun Job, wait, patch the status, then delete the
   Jobs (one request, by the run-uid label, as the worker does) and the PVC. It has no Agent
   lookup, finalizer or per-phase status writes, and no pod watch (the worker's view of pods
   saves it the pod list).
4. Kubernetes API requests per run (localkube's request counters), and requests per minute
   while `--parked` runs sit in agent Jobs that sleep (task `sleep:600`); then they are deleted.
5. Worker and bridge RSS (VmRSS now, VmHWM peak), and CPU seconds per phase of every process.

With `--json` the last line printed is one JSON object of the figures (keys in bench/README.md), for
comparing one run of the bench with another.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import yaml
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.worker import Worker

    from activities import manifests as mf
    from activities.results import agent_outcome
    from cli.stack import LocalKubeProcess, TemporalDevServer, stop_process
    from cli.up import install_crds
    from localkube.testing import admin_request
    from models.agent import normalize_agent
    from models.names import LABEL_RUN_UID
    from models.resolve import resolve_run
    from worker.settings import DEFAULT_AGENT_IMAGE, KubeSettings

GROUP, VERSION = "sympozium.ai", "v1alpha1"
NS = "bench"  # the bridge watches only this namespace
FLOOR_NS = "floor"  # the plain script's runs: invisible to the bridge
FINALIZER = "agentrun.dev/cleanup"
TERMINAL = {"Succeeded", "Failed", "Skipped"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the ceiling: a bare workflow of no-op activities ------------------------------------------------

@activity.defn(name="bench_noop")
async def noop(step: int) -> int:
    return step


@workflow.defn(name="BenchCeiling")
class CeilingWorkflow:
    @workflow.run
    async def run(self, steps: int) -> int:
        for i in range(steps):
            await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(seconds=60))
        return steps


# -- small helpers -------------------------------------------------------------------------------------

def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def _lat(values: list[float]) -> str:
    if not values:
        return "p50      - s   p99      - s"
    return f"p50 {statistics.median(values):6.2f} s   p99 {_percentile(values, 99):6.2f} s"


def agent_manifest() -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Agent", "metadata": {"name": "helper"},
            "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo", "secret": ""}]}}


def run_manifest(name: str, task: str) -> dict[str, Any]:
    def hook(hook_name: str) -> dict[str, Any]:
        return {"name": hook_name, "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentRun", "metadata": {"name": name},
            "spec": {"agentRef": "helper", "task": task, "timeout": "30m",
                     "lifecycle": {"preRun": [hook("prepare")], "postRun": [hook("report")]}}}


def _proc_status(pid: int, key: str) -> float:
    """A `kB` line of /proc/<pid>/status, in MB (0 if the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu(pid: int) -> tuple[float, float]:
    """(own CPU seconds, CPU seconds of reaped children) of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK


class Watcher:
    """One list-then-watch of a kind on a thread; every ADDED/MODIFIED/DELETED goes to `on_event`.

    Without bookmarks on purpose: localkube ends a timed-out watch with a BOOKMARK at its newest
    resourceVersion even when events are still queued for that watch, so a client resuming from
    the bookmark skips them (the bench would then miss phases it is timing).
    """

    def __init__(self, api: client.ApiClient, list_fn: Callable[..., Any], on_event: Callable[[str, dict[str, Any]], None],
                 **kwargs: Any) -> None:
        self.api = api
        self.list_fn = list_fn
        self.on_event = on_event
        self.kwargs = kwargs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                if not rv:
                    listed = self.list_fn(**self.kwargs)
                    if not isinstance(listed, dict):
                        listed = self.api.sanitize_for_serialization(listed)
                    for item in listed.get("items") or []:
                        self.on_event("ADDED", item)
                    rv = str(listed["metadata"]["resourceVersion"])
                for ev in w.stream(self.list_fn, resource_version=rv, timeout_seconds=120, **self.kwargs):
                    obj = ev["raw_object"]
                    rv = str(obj["metadata"]["resourceVersion"])
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.on_event(ev["type"], obj)
                    if self._stop.is_set():
                        break
            except ApiException as e:
                if e.status == 410:
                    rv = ""
                else:
                    self._stop.wait(0.2)
            except Exception:  # a dropped watch resumes from the last resourceVersion
                self._stop.wait(0.2)
            finally:
                w.stop()


class Seen:
    """What a bench's watches saw, under one condition variable that its threads wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.phase: dict[str, str] = {}

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout=timeout)

    def count(self, predicate: Callable[[str], bool], names: list[str]) -> int:
        with self.cond:
            return sum(1 for n in names if predicate(n))


class RunTracker(Seen):
    """What a watch on AgentRuns saw: when each run first reached each phase, and when it was let go."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, str], float] = {}
        self.uid: dict[str, str] = {}
        self.released: dict[str, float] = {}  # cleanup done: terminal and our finalizer gone
        self.deleted: dict[str, float] = {}
        self.errors: dict[str, str] = {}

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        with self.cond:
            if typ == "DELETED":
                self.deleted.setdefault(name, now)
            else:
                status = obj.get("status") or {}
                phase = str(status.get("phase") or "")
                self.uid[name] = str(meta.get("uid"))
                self.phase[name] = phase
                if phase:
                    self.seen.setdefault((name, phase), now)
                if phase == "Failed":
                    self.errors[name] = str(status.get("error") or "")
                if phase in TERMINAL and FINALIZER not in (meta.get("finalizers") or []):
                    self.released.setdefault(name, now)
            self.cond.notify_all()

    def wait_progress(self, predicate: Callable[[str], bool], names: list[str], *, stall: float,
                      limit: float) -> int:
        """Wait until `predicate` holds for all `names`, or for `stall` s no more did, or `limit` s passed."""
        deadline = time.monotonic() + limit
        last, since = -1, time.monotonic()
        while True:
            n = self.count(predicate, names)
            now = time.monotonic()
            if n >= len(names):
                return n
            if now > deadline or (n == last and now - since > stall):
                return n
            if n != last:
                last, since = n, now
            self.wait(partial(self._changed, predicate, names, n), 2.0)

    @staticmethod
    def _changed(predicate: Callable[[str], bool], names: list[str], before: int) -> bool:
        return sum(1 for x in names if predicate(x)) != before


class JobTracker:
    """Finished Jobs by name (True = Complete), from one watch on the floor namespace."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.done: dict[str, bool] = {}

    def on_event(self, typ: str, obj: dict[str, Any]) -> None:
        if typ == "DELETED":
            return
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                with self.cond:
                    self.done[obj["metadata"]["name"]] = c["type"] == "Complete"
                    self.cond.notify_all()
                return

    def wait(self, name: str, timeout: float) -> bool:
        with self.cond:
            if not self.cond.wait_for(lambda: name in self.done, timeout=timeout):
                raise TimeoutError(f"Job {name} did not finish in {timeout}s")
            return self.done[name]


# -- the stack -----------------------------------------------------------------------------------------

@dataclass
class Stack:
    state: Path
    concurrency: int
    max_pods: int
    kube_qps: float
    temporal: TemporalDevServer | None = None
    kube: LocalKubeProcess | None = None
    worker: subprocess.Popen[bytes] | None = None
    bridge: subprocess.Popen[bytes] | None = None
    api: Any = None
    peak_rss: dict[str, float] = field(default_factory=dict)
    _sampler_stop: threading.Event = field(default_factory=threading.Event)

    @property
    def kubeconfig(self) -> Path:
        assert self.kube is not None
        return self.kube.kubeconfig

    def start(self) -> None:
        image_map = self.state / "image-map.yaml"
        image_map.write_text(yaml.safe_dump({DEFAULT_AGENT_IMAGE: [sys.executable, "-m", "agentrunner"]}))
        self.temporal = TemporalDevServer(self.state / "temporal", headless=True).start()
        self.kube = LocalKubeProcess(self.state / "localkube", persist=True, extra_args=[
            "--image-map", str(image_map), "--job-backoff-seconds", "1", "--max-pods", str(self.max_pods)]).start()
        install_crds(self.kubeconfig)
        env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": self.temporal.address,
               "AGENTRUN_KUBE__KUBECONFIG": str(self.kubeconfig), "AGENTRUN_FALLBACK_POLL_SECONDS": "60",
               "AGENTRUN_KUBE__QPS": str(self.kube_qps), "AGENTRUN_KUBE__BURST": str(max(1, int(self.kube_qps * 2))),
               "AGENTRUN_NAMESPACES": f'["{NS}"]', "PYTHONUNBUFFERED": "1"}
        self.worker = self._spawn("worker", env)
        self.bridge = self._spawn("bridge", env)
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = self.concurrency + 8
        self.api = client.ApiClient(cfg)
        core: Any = client.CoreV1Api(self.api)
        for ns in (NS, FLOOR_NS):
            core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        core.create_namespaced_service_account(FLOOR_NS, mf.agent_service_account(FLOOR_NS))
        custom: Any = client.CustomObjectsApi(self.api)
        for ns in (NS, FLOOR_NS):
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, "agents", agent_manifest())
        self._wait_healthy()
        threading.Thread(target=self._sample, name="rss", daemon=True).start()

    def _spawn(self, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.state / f"{name}.log").open("ab")
        return subprocess.Popen([sys.executable, "-m", name], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def _wait_healthy(self) -> None:
        marks = {"worker": "worker polling", "bridge": "became leader"}
        deadline = time.monotonic() + 60
        ready: set[str] = set()
        while len(ready) < 2:
            if time.monotonic() > deadline:
                raise SystemExit(f"worker/bridge not healthy within 60s; logs in {self.state}")
            for name, proc in (("worker", self.worker), ("bridge", self.bridge)):
                assert proc is not None
                if proc.poll() is not None:
                    raise SystemExit(f"{name} exited with code {proc.returncode}; see {self.state / (name + '.log')}")
                log = self.state / f"{name}.log"
                if log.exists() and marks[name] in log.read_text(errors="replace"):
                    ready.add(name)
            time.sleep(0.1)

    def pids(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, proc in (("temporal", self.temporal.proc if self.temporal else None),
                           ("localkube", self.kube.proc if self.kube else None),
                           ("worker", self.worker), ("bridge", self.bridge)):
            if proc is not None:
                out[name] = proc.pid
        return out

    def _sample(self) -> None:
        while not self._sampler_stop.wait(0.5):
            for name, pid in self.pids().items():
                self.peak_rss[name] = max(self.peak_rss.get(name, 0.0), _proc_status(pid, "VmRSS"))

    def cpu(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pid in self.pids().items():
            own, children = _cpu(pid)
            out[name] = own
            if name == "localkube":
                out["pods"] = children
        t = os.times()
        out["bench"] = t.user + t.system
        return out

    def stats(self, reset: bool = False) -> Counter[str]:
        data = admin_request(self.kubeconfig, "DELETE" if reset else "GET", "/localkube/stats")
        return Counter({k: int(v) for k, v in (data.get("requests") or {}).items()})

    def stop(self) -> None:
        self._sampler_stop.set()
        stop_process(self.bridge)
        stop_process(self.worker)
        if self.kube is not None:
            self.kube.stop()
        if self.temporal is not None:
            self.temporal.stop()


def _cpu_line(before: dict[str, float], after: dict[str, float], runs: int) -> str:
    parts = [f"{k} {(after[k] - before.get(k, 0.0)) / max(runs, 1) * 1000:.0f}" for k in after
             if after[k] - before.get(k, 0.0) >= 0.005]
    return "  CPU ms per run: " + ", ".join(parts)


def _requests_line(counts: Counter[str], per: float, unit: str, top: int = 14) -> str:
    total = sum(counts.values())
    items = ", ".join(f"{k} {v / per:.1f}" for k, v in counts.most_common(top))
    rest = total - sum(v for _, v in counts.most_common(top))
    if rest:
        items += f", other {rest / per:.1f}"
    return f"{total / per:.1f} {unit} ({items})"


# -- phase 1: AgentRuns --------------------------------------------------------------------------------

def _create_runs(stack: Stack, names: list[str], task: str) -> dict[str, float]:
    """Create runs with bounded concurrency, not waiting for them; name → time of the create call."""
    custom: Any = client.CustomObjectsApi(stack.api)
    started: dict[str, float] = {}

    def one(name: str) -> None:
        started[name] = time.perf_counter()
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", run_manifest(name, task))

    with ThreadPoolExecutor(stack.concurrency) as pool:
        list(pool.map(one, names))
    return started


@dataclass
class History:
    kinds: Counter[str]
    gap: float  # the longest wait between two consecutive events
    gap_at: str  # which two


def histories(stack: Stack, tracker: RunTracker, names: list[str]) -> list[History]:
    """What the (finished) workflows of these runs did: event counts by type, and their longest wait."""
    def label(ev: Any) -> str:
        kind = EventType.Name(ev.event_type).removeprefix("EVENT_TYPE_")
        if ev.HasField("activity_task_scheduled_event_attributes"):
            kind += f"({ev.activity_task_scheduled_event_attributes.activity_type.name})"
        return kind

    async def fetch() -> list[History]:
        assert stack.temporal is not None
        temporal = await Client.connect(stack.temporal.address)
        out: list[History] = []
        for name in names:
            handle = temporal.get_workflow_handle(f"agentrun/{NS}/{name}/{tracker.uid[name]}")
            with contextlib.suppress(WorkflowFailureError):  # a Failed run's workflow fails: its history is read
                await handle.result()
            h = History(Counter(), 0.0, "")
            prev: Any = None
            async for ev in handle.fetch_history_events():
                h.kinds[EventType.Name(ev.event_type)] += 1
                if ev.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
                    h.kinds[LOCAL_ACTIVITY_MARKER] += 1
                if prev is not None:
                    gap = ev.event_time.ToMicroseconds() / 1e6 - prev.event_time.ToMicroseconds() / 1e6
                    if gap > h.gap:
                        h.gap, h.gap_at = gap, f"{label(prev)} -> {label(ev)}"
                prev = ev
            out.append(h)
        return out
    return asyncio.run(fetch())


# The marker a local activity's result is recorded in (the SDK core's name for it).
LOCAL_ACTIVITY_MARKER = "core_local_activity"


def warm_up(stack: Stack, tracker: RunTracker) -> tuple[int, int]:
    """One run end to end before measuring; returns how many activities its workflow ran (all of them, and
    how many of those were local activities)."""
    name = "warm-0"
    t0 = time.perf_counter()
    _create_runs(stack, [name], "hello")
    if not tracker.wait(lambda: name in tracker.released, 120):
        raise SystemExit(f"the warm-up run did not finish in 120s (phase {tracker.phase.get(name)!r}); "
                         f"logs in {stack.state}")
    if tracker.phase[name] != "Succeeded":
        raise SystemExit(f"the warm-up run ended {tracker.phase[name]}: {tracker.errors.get(name)}")
    took = tracker.seen[(name, "Succeeded")] - t0

    kinds = histories(stack, tracker, [name])[0].kinds
    local = kinds[LOCAL_ACTIVITY_MARKER]
    activities = kinds["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] + local
    print(f"warm-up run: Succeeded {took:.2f} s after create; its workflow: {activities} activities ({local} local), "
          f"{kinds['EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED']} signals, "
          f"{kinds['EVENT_TYPE_WORKFLOW_TASK_COMPLETED']} workflow tasks, {sum(kinds.values())} history events")
    return activities, local


def agent_runs(stack: Stack, tracker: RunTracker, runs: int) -> dict[str, float | None]:
    custom: Any = client.CustomObjectsApi(stack.api)
    names = [f"run-{i}" for i in range(runs)]
    started: dict[str, float] = {}
    stack.stats(reset=True)
    cpu0 = stack.cpu()

    def one(name: str) -> None:
        started[name] = time.perf_counter()
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", run_manifest(name, "hello"))
        # A run whose workflow never writes a phase was never started: do not hold its slot for long.
        if tracker.wait(lambda: bool(tracker.phase.get(name)), 90):
            tracker.wait(lambda: tracker.phase.get(name) in TERMINAL, 600)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(stack.concurrency) as pool:
        list(pool.map(one, names))
    ok = [n for n in names if tracker.phase.get(n) == "Succeeded"]
    lat = [tracker.seen[(n, "Succeeded")] - started[n] for n in ok]
    end = max((tracker.seen[(n, "Succeeded")] for n in ok), default=time.perf_counter())
    cpu1 = stack.cpu()
    # Cleanup (Jobs, PVC, finalizer) runs after Succeeded; count its requests too.
    tracker.wait_progress(lambda n: n in tracker.released, ok, stall=60, limit=300)
    cleaned = max((tracker.released.get(n, time.perf_counter()) for n in ok), default=end) - end
    counts = stack.stats()
    never = [n for n in names if not tracker.phase.get(n)]
    failed = [n for n in names if tracker.phase.get(n) and tracker.phase.get(n) != "Succeeded"]
    slow = sum(1 for x in lat if x > 60)
    print(f"AgentRun (Temporal)   {len(ok) / (end - t0):6.2f} runs/s   {_lat(lat)}   ({runs} runs; "
          f"{slow} took over 60 s; cleanup of all done {cleaned:.1f} s after the last Succeeded)")
    if slow:
        # Each Job's end should arrive as a signal from the bridge; a missed one waits for the fallback check.
        slow_h = histories(stack, tracker, [n for n in ok if tracker.seen[(n, "Succeeded")] - started[n] > 60][:30])
        fallback = sum(1 for h in slow_h if h.kinds["EVENT_TYPE_TIMER_FIRED"])
        print(f"  {fallback} of the {len(slow_h)} inspected waited for the 60 s fallback check "
              "(a timer fired: the bridge's Job-finished signal did not come in time)")
        gaps = Counter(h.gap_at for h in slow_h)
        print("  their longest wait between two history events: " + "; ".join(
            f"{at} ({n} runs, up to {max(h.gap for h in slow_h if h.gap_at == at):.0f} s)"
            for at, n in gaps.most_common(4)))
    if never:
        print(f"  {len(never)} never started (no phase after 90 s: the bridge started no workflow), "
              f"e.g. {', '.join(never[:3])}")
    if failed:
        n = failed[0]
        print(f"  {len(failed)} not Succeeded, e.g. {n}: phase {tracker.phase.get(n)!r} {tracker.errors.get(n, '')}")
    print(_cpu_line(cpu0, cpu1, runs))
    print("  Kubernetes API requests per run: " + _requests_line(counts, runs, "requests"))
    figures: dict[str, float | None] = {"runs_per_s": len(ok) / (end - t0), "runs_ok": float(len(ok)),
               "run_latency_p50_s": statistics.median(lat) if lat else None,
               "run_latency_p99_s": _percentile(lat, 99) if lat else None,
               "k8s_requests_per_run": sum(counts.values()) / runs}
    try:
        custom.delete_collection_namespaced_custom_object(GROUP, VERSION, NS, "agentruns")
    except ApiException:
        for n in [*names, "warm-0"]:
            custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", n)
    return figures


# -- phase 4: parked runs --------------------------------------------------------------------------------

def parked_runs(stack: Stack, tracker: RunTracker, parked: int, seconds: float) -> dict[str, float]:
    custom: Any = client.CustomObjectsApi(stack.api)
    core: Any = client.CoreV1Api(stack.api)
    names = [f"park-{i}" for i in range(parked)]
    t0 = time.perf_counter()
    _create_runs(stack, names, "sleep:600")
    in_phase = tracker.wait_progress(lambda n: tracker.phase.get(n) == "Running", names, stall=90, limit=600)
    running = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NS, label_selector=f"{mf.LABEL_COMPONENT}=agent-run").items
        running = sum(1 for p in pods if p.status.phase == "Running")
        if running >= in_phase:
            break
        time.sleep(1)
    ready = time.perf_counter() - t0
    not_running = [n for n in names if tracker.phase.get(n) != "Running"]
    stack.stats(reset=True)
    cpu0 = stack.cpu()
    time.sleep(seconds)
    counts = stack.stats()
    cpu1 = stack.cpu()
    print(f"parked                {in_phase} runs in phase Running with {running} agent pods sleeping, "
          f"{ready:.0f} s after the first create" + (f" ({len(not_running)} of {parked} not Running, e.g. "
                                                    f"{not_running[0]}: phase {tracker.phase.get(not_running[0])!r})"
                                                    if not_running else ""))
    print(f"  over {seconds:.0f} s: " + _requests_line(counts, seconds / 60, "Kubernetes API requests/min"))
    cpu = ", ".join(f"{k} {(cpu1[k] - cpu0.get(k, 0.0)) / seconds * 100:.1f}%" for k in cpu1)
    print(f"  CPU while parked (of one core): {cpu}")
    figures = {"parked": float(in_phase),
               "parked_requests_per_min_per_run": sum(counts.values()) / (seconds / 60) / max(in_phase, 1)}
    t1 = time.perf_counter()

    def delete(name: str) -> None:
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", name)
        except ApiException as e:
            if e.status != 404:
                raise

    with ThreadPoolExecutor(stack.concurrency) as pool:
        list(pool.map(delete, names))
    gone = tracker.wait_progress(lambda n: n in tracker.deleted, names, stall=60, limit=300)
    took = max((tracker.deleted.get(n, 0.0) for n in names), default=t1) - t1
    print(f"  deleted them: {gone} of {parked} gone (the last {took:.1f} s after the deletes began; Jobs killed, "
          f"workspaces removed, workflows cancelled)")
    left = [n for n in names if n not in tracker.deleted]
    if left:
        # The bridge did not see these deletions; any new event on the object makes it look again.
        print(f"  {len(left)} stayed (deletionTimestamp set, workflow not cancelled, e.g. {left[0]}); "
              "touching each with an annotation:")
        t2 = time.perf_counter()
        patch = {"metadata": {"annotations": {"bench/nudge": "1"}}}
        with ThreadPoolExecutor(stack.concurrency) as pool:
            list(pool.map(lambda n: custom.patch_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", n, patch),
                          left))
        gone = tracker.wait_progress(lambda n: n in tracker.deleted, left, stall=60, limit=300)
        took = max((tracker.deleted.get(n, 0.0) for n in left), default=t2) - t2
        print(f"  then {gone} of {len(left)} gone, the last {took:.1f} s after the touch")
    return figures


# -- phase 2: the Temporal ceiling -------------------------------------------------------------------------

async def _ceiling(address: str, runs: int, steps: int, concurrency: int,
                   wf: Any, act: Any) -> tuple[list[float], float]:
    temporal = await Client.connect(address)
    queue = f"bench-ceiling-{uuid.uuid4().hex[:6]}"
    worker = Worker(temporal, task_queue=queue, workflows=[wf], activities=[act], max_concurrent_activities=200)
    latencies: list[float] = []
    sem = asyncio.Semaphore(concurrency)
    async with worker:
        await temporal.execute_workflow(wf.run, steps, id=f"{queue}-warm", task_queue=queue)

        async def one(i: int) -> None:
            async with sem:
                t = time.perf_counter()
                await temporal.execute_workflow(wf.run, steps, id=f"{queue}-{i}", task_queue=queue)
                latencies.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(runs)))
        elapsed = time.perf_counter() - t0
    return latencies, elapsed


def ceiling(stack: Stack, runs: int, steps: int) -> dict[str, float]:
    assert stack.temporal is not None
    # Workflows must come from an importable module for the sandbox, not from __main__.
    import bench.runs as this

    cpu0 = stack.cpu()
    lat, elapsed = asyncio.run(_ceiling(stack.temporal.address, runs, steps, stack.concurrency,
                                        this.CeilingWorkflow, this.noop))
    cpu1 = stack.cpu()
    print(f"Temporal ceiling      {runs / elapsed:6.2f} wf/s     {_lat(lat)}   ({runs} workflows of {steps} "
          f"no-op activities in a row, in-process worker, {runs * steps / elapsed:.0f} activities/s)")
    print(_cpu_line(cpu0, cpu1, runs))
    return {"ceiling_wf_per_s": runs / elapsed}


# -- phase 3: the plain-script floor ------------------------------------------------------------------------

def floor(stack: Stack, runs: int) -> dict[str, float]:
    core: Any = client.CoreV1Api(stack.api)
    batch: Any = client.BatchV1Api(stack.api)
    custom: Any = client.CustomObjectsApi(stack.api)
    profile = normalize_agent(agent_manifest())
    jobs = JobTracker()
    watcher = Watcher(stack.api, batch.list_namespaced_job, jobs.on_event, namespace=FLOOR_NS).start()
    deleter = ThreadPoolExecutor(4)
    pending: list[Any] = []
    latencies: list[float] = []
    ends: list[float] = []
    errors: list[str] = []

    def one(i: int) -> None:
        name = f"floor-{i}"
        t = time.perf_counter()
        uid = ""
        try:
            obj = custom.create_namespaced_custom_object(GROUP, VERSION, FLOOR_NS, "agentruns",
                                                         run_manifest(name, "hello"))
            uid = obj["metadata"]["uid"]
            run = resolve_run(obj, profile, default_image=DEFAULT_AGENT_IMAGE)
            core.create_namespaced_persistent_volume_claim(FLOOR_NS, mf.workspace_pvc(run))
            pre = batch.create_namespaced_job(FLOOR_NS, mf.prerun_job(run, workflow_id=""))
            if not jobs.wait(pre.metadata.name, 300):
                raise RuntimeError(f"preRun Job {pre.metadata.name} failed")
            agent = batch.create_namespaced_job(FLOOR_NS, mf.agent_job(run, workflow_id=""))
            agent_ok = jobs.wait(agent.metadata.name, 300)
            pods = core.list_namespaced_pod(FLOOR_NS,
                                            label_selector=f"batch.kubernetes.io/controller-uid={agent.metadata.uid}")
            log = core.read_namespaced_pod_log(pods.items[0].metadata.name, FLOOR_NS, container="agent",
                                               tail_lines=1000)
            outcome = agent_outcome(log, 0 if agent_ok else 1)
            post = batch.create_namespaced_job(FLOOR_NS, mf.postrun_job(
                run, workflow_id="", agent_exit_code=outcome.exit_code, agent_result=outcome.response))
            if not jobs.wait(post.metadata.name, 300):
                raise RuntimeError(f"postRun Job {post.metadata.name} failed")
            status = {"phase": "Succeeded" if outcome.status == "success" else "Failed",
                      "result": outcome.response, "exitCode": outcome.exit_code,
                      "completedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            custom.patch_namespaced_custom_object_status(GROUP, VERSION, FLOOR_NS, "agentruns", name,
                                                         {"status": status})
            if outcome.status != "success":
                raise RuntimeError(f"agent: {outcome.error}")
            ends.append(time.perf_counter())
            latencies.append(ends[-1] - t)
        except Exception as e:
            errors.append(f"{name}: {e}")
        if uid:
            pending.append(deleter.submit(cleanup, name, uid))

    def cleanup(name: str, uid: str) -> None:
        # As the worker does: the run's Jobs in one request (by the run-uid label), then its workspace.
        batch.delete_collection_namespaced_job(FLOOR_NS, label_selector=f"{LABEL_RUN_UID}={uid}",
                                               propagation_policy="Foreground")
        core.delete_namespaced_persistent_volume_claim(f"{name}-workspace", FLOOR_NS)

    stack.stats(reset=True)
    cpu0 = stack.cpu()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(stack.concurrency) as pool:
        list(pool.map(one, range(runs)))
    end = max(ends, default=time.perf_counter())
    cpu1 = stack.cpu()
    for f in pending:
        f.result()
    cleaned = time.perf_counter() - end
    counts = stack.stats()
    deleter.shutdown()
    watcher.stop()
    print(f"plain-script floor    {len(latencies) / (end - t0):6.2f} runs/s   {_lat(latencies)}   ({runs} runs, "
          f"{len(errors)} failed; deletes of all done {cleaned:.1f} s after the last status patch)")
    if errors:
        print(f"  e.g. {errors[0]}")
    print(_cpu_line(cpu0, cpu1, runs))
    print("  Kubernetes API requests per run: " + _requests_line(counts, runs, "requests"))
    return {"floor_runs_per_s": len(latencies) / (end - t0), "floor_k8s_requests_per_run": sum(counts.values()) / runs}


# -- main ---------------------------------------------------------------------------------------------------

def print_figures(figures: dict[str, float | None]) -> None:
    """The `--json` line: one object, floats to four places."""
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}))


def common_args(p: argparse.ArgumentParser) -> None:
    """The options every stack bench takes (bench.runs, bench.gate, bench.approvals)."""
    p.add_argument("--kube-qps", type=float, default=KubeSettings().qps,
                   help="the worker's client-side Kubernetes rate limit (burst = 2x; 0 = none)")
    p.add_argument("--keep-state", action="store_true", help="keep the temporary state directory (logs)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object, as the last line")


def first_figures(args: argparse.Namespace) -> dict[str, float | None]:
    """The figures every stack bench starts with: its `--runs`, `--concurrency` and the load before the stack."""
    return {"runs": args.runs, "concurrency": args.concurrency, "load_avg_1m_start": os.getloadavg()[0]}


def load_at_end(figures: dict[str, float | None]) -> None:
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min)")
    figures["load_avg_1m_end"] = os.getloadavg()[0]


def put_away(state: Path, *, ok: bool, keep: bool) -> None:
    """The state directory removed after a run that went well, unless asked to keep it; else kept and named."""
    if ok and not keep:
        shutil.rmtree(state, ignore_errors=True)
    else:
        print(f"state and logs kept in {state}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=200, help="runs for the AgentRun, ceiling and floor figures")
    p.add_argument("--parked", type=int, default=100, help="runs parked in sleeping agent Jobs")
    p.add_argument("--park-seconds", type=float, default=60, help="how long to count requests while parked")
    p.add_argument("--concurrency", type=int, default=20, help="runs in flight at once")
    common_args(p)
    args = p.parse_args()
    figures = first_figures(args)

    state = Path(tempfile.mkdtemp(prefix="agentrun-bench-"))
    max_pods = args.parked + 2 * args.concurrency + 16
    stack = Stack(state, concurrency=args.concurrency, max_pods=max_pods, kube_qps=args.kube_qps)
    print(f"setup: {os.cpu_count()} CPUs; embedded stack in {state}: Temporal dev server (tuned, SQLite file), "
          f"localkube process (persist, max {max_pods} pods), worker + bridge processes (fallback poll 60 s, "
          f"worker's kube client {f'{args.kube_qps:g} QPS' if args.kube_qps > 0 else 'unlimited'}); a run = preRun hook `sh -c true` + echo agent + postRun hook `sh -c true`; "
          f"{args.concurrency} runs in flight; load average {os.getloadavg()[0]:.1f}", flush=True)
    ok = False
    try:
        t = time.perf_counter()
        stack.start()
        print(f"stack up in {time.perf_counter() - t:.1f} s", flush=True)
        tracker = RunTracker()
        watcher = Watcher(stack.api, client.CustomObjectsApi(stack.api).list_namespaced_custom_object,
                          tracker.on_event, group=GROUP, version=VERSION, namespace=NS, plural="agentruns").start()
        steps, local = warm_up(stack, tracker)
        figures["activities_per_run"], figures["local_activities_per_run"] = steps, local
        figures.update(agent_runs(stack, tracker, args.runs))
        sys.stdout.flush()
        if args.parked > 0:
            figures.update(parked_runs(stack, tracker, args.parked, args.park_seconds))
            sys.stdout.flush()
        watcher.stop()
        figures.update(ceiling(stack, args.runs, steps))
        sys.stdout.flush()
        figures.update(floor(stack, args.runs))
        runs_per_s, floor_per_s = figures["runs_per_s"], figures["floor_runs_per_s"]
        figures["runs_to_floor"] = runs_per_s / floor_per_s if runs_per_s is not None and floor_per_s else None
        pids = stack.pids()
        rss = ", ".join(f"{name} {_proc_status(pid, 'VmRSS'):.0f} / "
                        f"{max(_proc_status(pid, 'VmHWM'), stack.peak_rss.get(name, 0.0)):.0f}"
                        for name, pid in pids.items())
        print(f"RSS MB now / peak: {rss}")
        for name in ("worker", "bridge"):
            if name in pids:
                figures[f"{name}_rss_mb_peak"] = max(_proc_status(pids[name], "VmHWM"), stack.peak_rss.get(name, 0.0))
        load_at_end(figures)
        ok = True
    finally:
        stack.stop()
        put_away(state, ok=ok, keep=args.keep_state)
    if args.json:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
