"""The API's Prometheus metrics at /metrics: its requests, the gate verdicts it takes, the runs it watches, and the
tool-call decisions (SPEC §10) their statuses record.

Each app has its own registry (tests build several apps in one process, and the global registry would mix them).
The run gauges are read from the API's one watch of runs (api/runwatch.py) at each scrape, so they cost no request.
Verdicts are counted by source and outcome: those sent through the API where the API takes them (at once); those
decided elsewhere (an annotation, the gate hook, a timeout, Temporal) as their runs' terminal statuses arrive
through the watch, once per run (`status.gate.source` says which). Runs already finished when the API started are
not counted: the counter counts what this process saw happen, as Prometheus counters do. Tool decisions are counted
the same way, by action and source, from `status.toolApprovals` as new entries arrive through the watch (whatever door
they came through), with how long their call waited (decidedAt minus the round's requestedAt).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from models import telemetry
from models.agentrun import TERMINAL_PHASES
from models.evaluate import agent_name_of
from models.names import lifecycle_subject
from models.run import Phase
from models.timestamps import parse_rfc3339

from .runwatch import RunWatch

log = logging.getLogger("agentrun.api.metrics")

Obj = dict[str, Any]
# Seconds: a verdict is a Temporal Update (a round trip through the worker); a request may be a list of many runs.
# What generate_latest writes, under the name every Prometheus knows (the library's newest name, version=1.0.0, is
# one older servers do not).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Seconds a tool call waits for a person: from seconds to a day.
WAIT_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


class Counts:
    """Counted and read by one key, as the API's code always counted (`counts[key] += 1`; a test reads
    `counts[key]`); each step is handed to `count(key, step)`, which moves the Prometheus counters."""

    def __init__(self, count: Callable[[str, int], None]) -> None:
        self._count = count
        self._seen: Tally[str] = Tally()  # the same counts by key, to read back (a Counter's value is private)

    def __getitem__(self, key: str) -> int:
        return self._seen[key]

    def __setitem__(self, key: str, value: int) -> None:
        step = value - self._seen[key]
        if step < 0:
            raise ValueError(f"a count only goes up ({key}: {self._seen[key]} -> {value})")
        self._seen[key] = value
        self._count(key, step)


class _RunGauges(Collector):
    """Runs by namespace and phase, and runs waiting for a verdict, as the watch holds them at the scrape."""

    def __init__(self, watch: RunWatch) -> None:
        self.watch = watch

    def collect(self) -> Iterable[Metric]:
        phases = GaugeMetricFamily("agentrun_runs", "AgentRuns by namespace and phase (a run without a status yet "
                                   "is Pending).", labels=["namespace", "phase"])
        waiting = GaugeMetricFamily("agentrun_runs_awaiting_verdict", "AgentRuns whose gate waits for a verdict.",
                                    labels=["namespace"])
        tools = GaugeMetricFamily("agentrun_runs_awaiting_tool_approval", "AgentRuns whose agent is parked until "
                                  "people decide on its tool calls (no pod of the run exists).", labels=["namespace"])
        synced = GaugeMetricFamily("agentrun_api_runwatch_synced", "1 once the API's watch of runs has listed "
                                   "them (the run gauges are empty before).")
        by_phase: Tally[tuple[str, str]] = Tally()
        by_ns: Tally[str] = Tally()
        parked: Tally[str] = Tally()
        for run in self.watch.peek():
            ns = str((run.get("metadata") or {}).get("namespace") or "")
            st = run.get("status") or {}
            phase = str(st.get("phase") or Phase.PENDING)
            by_phase[ns, phase] += 1
            if (st.get("gate") or {}).get("state") == "pending" and phase not in TERMINAL_PHASES:
                by_ns[ns] += 1
            if (st.get("toolApproval") or {}).get("state") == "pending" and phase not in TERMINAL_PHASES:
                parked[ns] += 1
        for (ns, phase), n in sorted(by_phase.items()):
            phases.add_metric([ns, phase], n)
        for ns, n in sorted(by_ns.items()):
            waiting.add_metric([ns], n)
        for ns, n in sorted(parked.items()):
            tools.add_metric([ns], n)
        synced.add_metric([], 1 if self.watch.synced else 0)
        return [phases, waiting, tools, synced]


class _SpanCounters(Collector):
    """The API process's own spans (models/telemetry.py): exported, and dropped (the collector unreachable, the queue
    full)."""

    def collect(self) -> Iterable[Metric]:
        t = telemetry.current()
        exported = CounterMetricFamily("agentrun_otel_spans_exported", "Spans this process exported to the OTLP "
                                       "collector.", labels=["component"])
        dropped = CounterMetricFamily("agentrun_otel_spans_dropped", "Spans this process could not export (the "
                                      "collector unreachable or refusing, the queue full) and dropped.",
                                      labels=["component"])
        if t is not None:
            exported.add_metric([t.component], t.exported)
            dropped.add_metric([t.component], t.dropped)
        return [exported, dropped]


def run_usage(run: Obj) -> list[tuple[str, dict[str, int], float | None]]:
    """(model, tokens by type, cost in USD or None) of a run's status: per model when it says, else in one."""
    usage = (run.get("status") or {}).get("tokenUsage") or {}
    models = [m for m in usage.get("models") or [] if isinstance(m, dict)]
    if not models:
        spec_model = ((run.get("spec") or {}).get("model") or {})
        models = [{**usage, "model": str(spec_model.get("model") or spec_model.get("name") or "unknown")}]
    out = []
    for m in models:
        tokens = {"input": _int(m.get("inputTokens")), "output": _int(m.get("outputTokens")),
                  "cached": _int(m.get("cachedInputTokens"))}
        out.append((str(m.get("model") or "unknown"), tokens, _usd(m.get("estimatedCostUSD"))))
    return out


def _int(v: Any) -> int:
    try:
        return max(int(v), 0)
    except (TypeError, ValueError):
        return 0


def _usd(v: Any) -> float | None:
    try:
        return float(Decimal(str(v))) if v is not None else None
    except (ArithmeticError, ValueError):
        return None


def verdict_source(run: Obj) -> str:
    """The source label of a run's final gate: its `status.gate.source`, an annotation its own gate hook wrote as
    `gate-hook`, `unknown` for a status written before the source was recorded."""
    meta, gate = run.get("metadata") or {}, (run.get("status") or {}).get("gate") or {}
    source = str(gate.get("source") or "unknown")
    if source == "annotation" and gate.get("decidedBy") == lifecycle_subject(meta.get("namespace", ""),
                                                                            meta.get("name", "")):
        return "gate-hook"
    return source


def _decided(run: Obj) -> bool:
    st = run.get("status") or {}
    return st.get("phase") in TERMINAL_PHASES and (st.get("gate") or {}).get("state") not in (None, "pending")


class ApiMetrics:
    def __init__(self, watch: RunWatch) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("agentrun_api_requests", "API requests by route and status.", ["route", "code"],
                                registry=r)
        self.request_seconds = Histogram("agentrun_api_request_duration_seconds", "API request latency (until the "
                                         "response starts) by route template and method.", ["route", "method"],
                                         buckets=LATENCY_BUCKETS, registry=r)
        self.gate_verdicts = Counter("agentrun_gate_verdicts", "Gate verdicts through the API, by outcome (the gate's "
                                     "state after it, or refused by the workflow).", ["outcome"], registry=r)
        self.verdicts = Counter("agentrun_verdicts", "Gate verdicts by source (api, annotation, gate-hook, temporal, "
                                "timeout) and outcome: the API's as it takes them, the others from the runs' "
                                "terminal statuses, once per run.", ["source", "outcome"], registry=r)
        self.verdict_seconds = Histogram("agentrun_verdict_duration_seconds", "Latency of a verdict through the API "
                                         "(the Temporal Update to the run's workflow).", buckets=LATENCY_BUCKETS,
                                         registry=r)
        self.refused = Counter("agentrun_verdicts_refused", "Verdicts refused before they reached a workflow (at "
                               "admission or by the API), by where and the rule.", ["via", "rule"], registry=r)
        self.auth_failures = Counter("agentrun_api_auth_failures", "Credentials refused, by where they were presented "
                                     "(bearer, console, codec) and why (missing, invalid, throttled: too many failed "
                                     "attempts from the client or with the token's prefix).", ["via", "reason"],
                                     registry=r)
        self.access_denied = Counter("agentrun_api_access_denied", "Calls RBAC refused (403), by verb and resource "
                                     "(a SubjectAccessReview for the caller).", ["verb", "resource"], registry=r)
        # What runs used and cost (SPEC §12), counted once per run as its terminal status arrives (below).
        self.tokens = Counter("agentrun_run_tokens", "Tokens of finished AgentRuns by namespace, Agent, model and type "
                              "(input: cached included; output; cached: the input read from the provider's cache), "
                              "counted once per run as its terminal status arrives.",
                              ["namespace", "agent", "model", "type"], registry=r)
        self.cost = Counter("agentrun_run_cost_usd", "Estimated cost in USD of finished AgentRuns "
                            "(status.tokenUsage.estimatedCostUSD, priced by the worker) by namespace, Agent and "
                            "model, counted once per run as its terminal status arrives; runs without an estimate "
                            "add nothing.", ["namespace", "agent", "model"], registry=r)
        self.runs_unpriced = Counter("agentrun_runs_unpriced", "Finished AgentRuns that used tokens but have no cost "
                                     "estimate (a model without a known price), by namespace and Agent.",
                                     ["namespace", "agent"], registry=r)
        self.tool_decisions = Counter("agentrun_tool_decisions", "Decisions on tool calls that waited for approval, by "
                                      "action (approve, reject, edit) and source (api, annotation, temporal, "
                                      "timeout), as the runs' statuses record them.", ["action", "source"], registry=r)
        self.tool_wait_seconds = Histogram("agentrun_tool_approval_wait_seconds", "How long a tool call waited for its "
                                           "decision (with no pod of the run).", buckets=WAIT_BUCKETS, registry=r)
        r.register(_RunGauges(watch))
        r.register(_SpanCounters())
        # What the API's code counts by key: verdicts by outcome, refusals by "<via> <rule>".
        self.verdicts_by_outcome = Counts(self._verdicts_taken)
        self.refusals = Counts(lambda key, n: self.refused.labels(*key.split(" ", 1)).inc(n))
        self.watch = watch
        self._counted: set[str] = set()  # uids of finished runs whose verdict is counted (or was before we looked)
        self._used: set[str] = set()  # uids of finished runs whose tokens and cost are counted (or were before)
        self._decisions: dict[str, set[tuple[str, str, str]]] = {}  # uid -> tool decisions counted (or seen before)
        self._task: asyncio.Task[None] | None = None
        self.following = asyncio.Event()  # the verdict count follows the watch: runs decided from now on count
        self.resyncs = 0  # how often the count fell behind the watch and went over its whole list

    # -- what the API's code counts --------------------------------------------------------------------------

    def _verdicts_taken(self, outcome: str, n: int) -> None:
        """Verdicts through the API came back with `outcome` (the gate's state after, or "refused")."""
        self.gate_verdicts.labels(outcome).inc(n)
        if outcome not in ("refused", "none"):
            self.verdicts.labels("api", outcome).inc(n)

    def observe_request(self, route: str, method: str, code: int, seconds: float) -> None:
        self.requests.labels(route, str(code)).inc()
        self.request_seconds.labels(route, method).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # -- verdicts decided elsewhere, from the watch -------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._count_verdicts(), name="metrics-verdicts")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @staticmethod
    def _tool_records(run: Obj) -> list[tuple[tuple[str, str, str], Obj]]:
        st = run.get("status") or {}
        return [((str(d.get("callId")), str(d.get("attempt") or ""), str(d.get("decidedAt"))), d)
                for d in st.get("toolApprovals") or [] if isinstance(d, dict)]

    def _count_tools(self, run: Obj) -> None:
        uid = str((run.get("metadata") or {}).get("uid") or "")
        seen = self._decisions.setdefault(uid, set())
        requested = parse_rfc3339(((run.get("status") or {}).get("toolApproval") or {}).get("requestedAt"))
        for key, d in self._tool_records(run):
            if key in seen:
                continue
            seen.add(key)
            self.tool_decisions.labels(str(d.get("action") or ""), str(d.get("source") or "")).inc()
            decided = parse_rfc3339(d.get("decidedAt"))
            if requested is not None and decided is not None and decided >= requested:
                self.tool_wait_seconds.observe((decided - requested).total_seconds())

    def _count(self, run: Obj) -> None:
        self._count_usage(run)
        self._count_tools(run)
        uid = str((run.get("metadata") or {}).get("uid") or "")
        if uid in self._counted or not _decided(run):
            return
        self._counted.add(uid)
        source = verdict_source(run)
        if source != "api":  # counted by verdict_taken when the API took it
            self.verdicts.labels(source, str(run["status"]["gate"]["state"])).inc()

    def _count_usage(self, run: Obj) -> None:
        """A finished run's tokens and cost, once, by its models (status.tokenUsage.models; a status without them
        counts under the run's spec model, or "unknown")."""
        st = run.get("status") or {}
        uid = str((run.get("metadata") or {}).get("uid") or "")
        if uid in self._used or st.get("phase") not in TERMINAL_PHASES:
            return
        self._used.add(uid)
        ns, agent = str((run.get("metadata") or {}).get("namespace") or ""), agent_name_of(run)
        for model, tokens, cost in run_usage(run):
            for kind, n in tokens.items():
                if n > 0:
                    self.tokens.labels(ns, agent, model, kind).inc(n)
            if cost is not None:  # 0 too (a local model's): the series shows the model ran
                self.cost.labels(ns, agent, model).inc(cost)
        usage = st.get("tokenUsage") or {}
        if (usage.get("inputTokens") or usage.get("outputTokens")) and usage.get("estimatedCostUSD") is None:
            self.runs_unpriced.labels(ns, agent).inc()

    def _known(self, runs: Iterator[Obj]) -> None:
        """What was decided (or finished) before we looked is not counted, but remembered as seen."""
        for run in runs:
            uid = str((run.get("metadata") or {}).get("uid") or "")
            if _decided(run):
                self._counted.add(uid)
            if (run.get("status") or {}).get("phase") in TERMINAL_PHASES:
                self._used.add(uid)
            self._decisions[uid] = {key for key, _ in self._tool_records(run)}

    async def _count_verdicts(self) -> None:
        while not await self.watch.wait_synced(60):
            log.info("metrics: the watch of runs has not listed them yet")
        with self.watch.subscribe() as sub:
            self._known(self.watch.peek())  # (no event comes between subscribing and this: both on the loop)
            self.following.set()
            async for ev in sub:
                if ev.type == "DELETED":
                    uid = str((ev.obj.get("metadata") or {}).get("uid") or "")
                    self._counted.discard(uid)
                    self._used.discard(uid)
                    self._decisions.pop(uid, None)
                elif ev.type == "RESYNC":
                    self.resyncs += 1
                    held = {str((r.get("metadata") or {}).get("uid") or ""): r for r in self.watch.peek()}
                    self._counted &= held.keys()
                    self._used &= held.keys()
                    self._decisions = {u: d for u, d in self._decisions.items() if u in held}
                    for run in held.values():
                        self._count(run)
                else:
                    self._count(ev.obj)


def _of(request: Request) -> ApiMetrics | None:
    """The app's metrics (api/deps.py State.metrics), once its lifespan has made them."""
    state = getattr(request.app.state, "agentrun", None)
    return getattr(state, "metrics", None)


def install(app: FastAPI) -> None:
    """The request counter and latency middleware, and GET /metrics."""

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Any:
        started = time.perf_counter()
        response = await call_next(request)
        metrics = _of(request)
        if metrics is not None:
            route = getattr(request.scope.get("route"), "path", "other")
            metrics.observe_request(route, request.method, response.status_code, time.perf_counter() - started)
        return response

    @app.get("/metrics", tags=["probes"], response_class=Response,
             responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}})
    async def metrics(request: Request) -> Response:
        m = _of(request)
        body = m.exposition() if m is not None else b""
        return Response(body, media_type=CONTENT_TYPE)
