"""Tool calls waiting for approval (SPEC §10) on the embedded stack: resume latency, and runs parked at a tool
approval; prints figures, asserts nothing.

    .venv/bin/python -m bench.approvals [--runs 20] [--concurrency 5] [--parked 200] [--park-window 40]
                                        [--park-seconds 60] [--json]

Starts its own stack as `bench.gate` does (Temporal dev server, localkube process with the agent image mapped to the
reference agent program, the worker and the bridge as processes, fallback poll 60 s, the HTTP API with a token file
whose identity may `approve` agentruns). Every run is the echo agent under a SympoziumPolicy whose toolGating asks
for `execute_command`, with one scripted call (task line `tool:execute_command {...}`) whose command prints the wall
clock (`date +%s.%N`); the agent journals the call, ends its container with the call in its marker, and the workflow
deletes the run's Jobs and waits (`status.toolApproval.state: pending`). A run counts as parked once a watch has seen
that state.

1. Resume latency: `--runs` runs, at most `--concurrency` in flight; each is approved through the API
   (`POST /api/v1/runs/{name}/tool-approvals` with the waiting call's id and argumentsSha256) once parked; the latency
   is the API's 200 (the decision accepted: the workflow's Update returned) → the wall clock the approved command
   printed (the pods are processes of this machine: one clock). It includes deleting nothing (the run's Jobs went
   when it parked), creating the resume Job, the pod's start, the agent's cold start and its journal replay. Also
   `history_bytes_per_approval`: the Temporal history of an approved run (its events' protobuf size) minus that of
   the same task run by an Agent whose policy allows the call: what one approval costs in history (the
   conversation stays in the journal on the run's volume).
2. Parked: `--parked` runs created with at most `--park-window` not yet parked; then, over `--park-seconds`, the
   pods of the parked runs (listed: any pod whose name starts with a parked run's name, whatever its phase), the
   Kubernetes API requests per minute (localkube's counters) with and without the shared watches and leases, and
   the RSS of the worker. The issue's figure for RSS is 1,000 parked runs (`--parked 1000`: parking goes at about
   1-2 runs/s on a 2-core machine); the default of 200 is its figure for pods and requests.

With `--json` the last line printed is one JSON object of the figures (keys in bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.gate import Api, TemporalQueries, _lat, _rss, peak_rss, stop_all
from bench.runs import (
    GROUP,
    NS,
    VERSION,
    Seen,
    Stack,
    Watcher,
    _percentile,
    _proc_status,
    _requests_line,
    common_args,
    first_figures,
    load_at_end,
    print_figures,
    put_away,
)
from worker.settings import WorkerSettings

TERMINAL = {"Succeeded", "Failed", "Skipped"}
RAN = re.compile(r"RAN=(\d+\.\d+)")
# One scripted call; its command prints the wall clock when it runs.
TASK = 'approve me\ntool:execute_command {"command": "echo RAN=$(date +%s.%N)"}'


def policy_manifest() -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SympoziumPolicy", "metadata": {"name": "asks"},
            "spec": {"toolGating": {"defaultAction": "allow",
                                    "rules": [{"tool": "execute_command", "action": "ask"}]},
                     "toolApproval": {"timeout": "24h", "onTimeout": "deny"}}}


def asker_manifest() -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Agent", "metadata": {"name": "asker"},
            "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo", "secret": ""}],
                     "policyRef": "asks"}}


def run_manifest(name: str, agent: str = "asker") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentRun", "metadata": {"name": name},
            "spec": {"agentRef": agent, "task": TASK, "timeout": "30m"}}


class ApprovalTracker(Seen):
    """What a watch on the bench namespace's AgentRuns saw, with perf_counter times."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: dict[str, str] = {}
        self.workflow_id: dict[str, str] = {}
        self.calls: dict[str, list[dict[str, Any]]] = {}  # the calls of a pending round
        self.pending_at: dict[str, float] = {}
        self.result: dict[str, str] = {}
        self.terminal_at: dict[str, float] = {}

    def on_run(self, typ: str, obj: dict[str, Any]) -> None:
        if typ == "DELETED":
            return
        now = time.perf_counter()
        name = str((obj.get("metadata") or {}).get("name"))
        st = obj.get("status") or {}
        with self.cond:
            phase = str(st.get("phase") or "")
            self.phase[name] = phase
            if st.get("workflowId"):
                self.workflow_id[name] = str(st["workflowId"])
            ta = st.get("toolApproval") or {}
            if ta.get("state") == "pending" and ta.get("calls"):
                self.calls[name] = list(ta["calls"])
                self.pending_at.setdefault(name, now)
            if phase == "Failed":
                self.errors[name] = str(st.get("error") or "")
            if phase in TERMINAL:
                self.result[name] = str(st.get("result") or "")
                self.terminal_at.setdefault(name, now)
            self.cond.notify_all()

    def parked(self, name: str) -> bool:
        return name in self.pending_at and self.phase.get(name) not in TERMINAL

    def over(self, name: str) -> bool:
        return self.phase.get(name) in TERMINAL


class ApprovalsApi(Api):
    def approve_call(self, name: str, call: dict[str, Any]) -> tuple[int, str]:
        r = self.http.post(f"/api/v1/runs/{name}/tool-approvals", params={"namespace": NS},
                           json={"callId": call["id"], "action": "approve",
                                 "argumentsSha256": call["argumentsSha256"]})
        return r.status_code, r.text[:200]


def _history_bytes(queries: TemporalQueries, workflow_id: str) -> int:
    async def fetch() -> int:
        return sum([ev.ByteSize() async for ev in queries.client.get_workflow_handle(workflow_id)
                    .fetch_history_events()])
    return queries._call(fetch())


def _create(custom: Any, name: str, agent: str = "asker") -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", run_manifest(name, agent))


# -- phase 1: resume latency -----------------------------------------------------------------------------

def latency(stack: Stack, tracker: ApprovalTracker, api: ApprovalsApi, queries: TemporalQueries, runs: int,
            concurrency: int, *, label: str = "resume latency", prefix: str = "lat") -> dict[str, float | None]:
    custom: Any = client.CustomObjectsApi(stack.api)
    names = [f"{prefix}-{i}" for i in range(runs)]
    lat: dict[str, float] = {}
    call: dict[str, float] = {}
    problems: Counter[str] = Counter()
    examples: dict[str, str] = {}

    def problem(kind: str, name: str, detail: str = "") -> None:
        with tracker.cond:
            problems[kind] += 1
            examples.setdefault(kind, f"{name}{': ' + detail if detail else ''}")

    def one(name: str) -> None:
        _create(custom, name)
        if not tracker.wait(lambda: tracker.parked(name) or tracker.over(name), 300) or not tracker.parked(name):
            problem("not parked within 300 s", name, f"phase {tracker.phase.get(name)!r} "
                    f"{tracker.errors.get(name, '')}")
            return
        t = time.perf_counter()
        code, body = api.approve_call(name, tracker.calls[name][0])
        accepted = time.time()
        call[name] = time.perf_counter() - t
        if code != 200:
            problem(f"API answered {code}", name, body)
            return
        if not tracker.wait(lambda: name in tracker.terminal_at, 300):
            problem("not terminal within 300 s of the decision", name)
            return
        ran = RAN.search(tracker.result.get(name, ""))
        if tracker.phase.get(name) != "Succeeded" or ran is None:
            problem("ended otherwise", name, f"phase {tracker.phase.get(name)!r} result "
                    f"{tracker.result.get(name, '')[:120]!r} {tracker.errors.get(name, '')}")
            return
        lat[name] = float(ran.group(1)) - accepted

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, names))
    took = time.perf_counter() - t0
    values = list(lat.values())
    print(f"{label:<21} decision accepted (API 200) → the approved command ran: {_lat(values)}   "
          f"({len(values)} of {runs} runs, {concurrency} in flight, {took:.0f} s in all)")
    print(f"  the API call itself (200 once the workflow's Update accepted it): {_lat(list(call.values()))}")
    for kind, n in problems.items():
        print(f"  {n} {kind}, e.g. {examples[kind]}")
    figures: dict[str, float | None] = {
        "tool_resume_s_p50": statistics.median(values) if values else None,
        "tool_resume_s_p99": _percentile(values, 99) if values else None,
        "tool_resume_runs_ok": float(len(values))}
    # What an approval adds to the history: an approved run against the same task allowed outright.
    if values:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", run_manifest(f"{prefix}-plain",
                                                                                           "allower"))
        plain = f"{prefix}-plain"
        if tracker.wait(lambda: plain in tracker.terminal_at, 300) and plain in tracker.workflow_id:
            base = _history_bytes(queries, tracker.workflow_id[plain])
            sizes = [_history_bytes(queries, tracker.workflow_id[n]) for n in list(lat)[:10]]
            per = statistics.median(sizes) - base
            print(f"  history: {statistics.median(sizes):.0f} bytes for a run with one approval, {base} for the "
                  f"same task allowed outright: {per:.0f} bytes per approval")
            figures["history_bytes_per_approval"] = per
    return figures


# -- phase 2: parked runs ----------------------------------------------------------------------------------

def parked(stack: Stack, tracker: ApprovalTracker, count: int, window: int, seconds: float) -> dict[str, float | None]:
    custom: Any = client.CustomObjectsApi(stack.api)
    core: Any = client.CoreV1Api(stack.api)
    names = [f"park-{i}" for i in range(count)]

    def park(name: str) -> None:
        _create(custom, name)
        tracker.wait(lambda: tracker.parked(name) or tracker.over(name), 300)

    progress_stop = threading.Event()

    def progress() -> None:
        while not progress_stop.wait(30):
            print(f"  ... {tracker.count(tracker.parked, names)} of {count} parked after "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)

    t0 = time.perf_counter()
    threading.Thread(target=progress, name="progress", daemon=True).start()
    with ThreadPoolExecutor(window) as pool:
        list(pool.map(park, names))
    progress_stop.set()
    with tracker.cond:
        at = [tracker.pending_at[n] for n in names if tracker.parked(n)]
    took = (max(at) if at else time.perf_counter()) - t0
    print(f"parked                {len(at)} of {count} runs waiting at a tool approval {took:.0f} s after the first "
          f"create ({len(at) / max(took, 1e-9):.1f} runs/s, at most {window} not yet parked)")
    not_parked = [n for n in names if not tracker.parked(n)]
    if not_parked:
        n = not_parked[0]
        print(f"  {len(not_parked)} not parked, e.g. {n}: phase {tracker.phase.get(n)!r} {tracker.errors.get(n, '')}")
    sys.stdout.flush()

    # Parked: measure, touching nothing.
    time.sleep(2)  # let the last status writes settle
    stack.stats(reset=True)
    time.sleep(seconds)
    counts = stack.stats()
    shared = Counter({k: v for k, v in counts.items() if k.startswith("watch ") or k.endswith(" leases")})
    own = counts - shared
    per_run = max(len(at), 1)
    print(f"  while parked, over {seconds:.0f} s: " + _requests_line(counts, seconds / 60, "Kubernetes API requests/min")
          + "  [the bench's own watch reconnects every 120 s]")
    print(f"  of which not watches or leases: {sum(own.values()) / (seconds / 60) / per_run:.3f} per minute per parked run"
          + (f" ({', '.join(f'{k} {v}' for k, v in own.most_common(6))})" if own else ""))
    parked_names = {m for m in names if tracker.parked(m)}
    pods = core.list_namespaced_pod(NS).items
    theirs = [p.metadata.name for p in pods if any(p.metadata.name.startswith(m + "-") or p.metadata.name == m
                                                     for m in parked_names)]
    print(f"  pods of the parked runs (listed, any phase): {len(theirs)}" + (f", e.g. {theirs[0]}" if theirs else "")
          + f"; pods in the namespace: {len(pods)}")
    print(f"  RSS MB while parked: {_rss(stack, None)}")
    worker_pid = stack.pids().get("worker")
    return {"tool_parked": float(len(at)), "tool_park_runs_per_s": len(at) / max(took, 1e-9),
            "tool_parked_pods": float(len(theirs)),
            "tool_parked_requests_per_min_per_run": sum(own.values()) / (seconds / 60) / per_run,
            "tool_parked_requests_per_min": sum(counts.values()) / (seconds / 60),
            "worker_rss_mb_tool_parked": _proc_status(worker_pid, "VmRSS") if worker_pid else None}


# -- main ---------------------------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs for the resume latency")
    p.add_argument("--concurrency", type=int, default=5, help="latency runs in flight at once")
    p.add_argument("--parked", type=int, default=200, help="runs parked at a tool approval (RSS: pass 1000)")
    p.add_argument("--park-window", type=int, default=40, help="parked runs created but not yet parked, at most")
    p.add_argument("--park-seconds", type=float, default=60, help="how long to measure while parked")
    common_args(p)
    args = p.parse_args()
    figures = first_figures(args)
    state = Path(tempfile.mkdtemp(prefix="agentrun-bench-approvals-"))
    widest = max(args.concurrency, args.park_window)
    stack = Stack(state, concurrency=widest, max_pods=widest + 16, kube_qps=args.kube_qps)
    print(f"setup: {os.cpu_count()} CPUs; embedded stack in {state}: Temporal dev server, localkube process, worker + "
          f"bridge processes (fallback poll 60 s, worker cache {WorkerSettings().max_cached_workflows} workflows), "
          "API process; a run = echo agent whose policy asks for execute_command, one scripted call", flush=True)
    print(f"chosen: --runs {args.runs} ({args.concurrency} in flight), --parked {args.parked} (at most "
          f"{args.park_window} not yet parked), --park-seconds {args.park_seconds:g}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    api: ApprovalsApi | None = None
    queries: TemporalQueries | None = None
    ok = False
    try:
        t = time.perf_counter()
        stack.start()
        assert stack.temporal is not None
        custom: Any = client.CustomObjectsApi(stack.api)
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "sympoziumpolicies", policy_manifest())
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agents", asker_manifest())
        allower = {**asker_manifest(), "metadata": {"name": "allower"}}
        allower["spec"] = {k: v for k, v in allower["spec"].items() if k != "policyRef"}
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agents", allower)
        api = ApprovalsApi(stack, widest)
        queries = TemporalQueries(stack.temporal.address)
        print(f"stack up in {time.perf_counter() - t:.1f} s; RSS MB: {_rss(stack, api)}", flush=True)
        tracker = ApprovalTracker()
        watcher = Watcher(stack.api, custom.list_namespaced_custom_object, tracker.on_run, group=GROUP,
                          version=VERSION, namespace=NS, plural="agentruns").start()
        latency(stack, tracker, api, queries, 2, 2, label="warm-up", prefix="warm")  # imports, caches, first pods
        if args.runs > 0:
            figures.update(latency(stack, tracker, api, queries, args.runs, args.concurrency))
            sys.stdout.flush()
        if args.parked > 0:
            figures.update(parked(stack, tracker, args.parked, args.park_window, args.park_seconds))
        watcher.stop()
        peak_rss(stack, api)
        load_at_end(figures)
        ok = True
    finally:
        stop_all(stack, api, queries)
        put_away(state, ok=ok, keep=args.keep_state)
    if args.json:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
