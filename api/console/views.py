"""What the console's templates show of a run: plain values computed from the object, no HTML (the templates
escape everything they print)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from models.agentrun import PHASES, TERMINAL_PHASES
from models.evaluate import agent_name_of
from models.names import ANNOTATION_CREATED_BY, LABEL_SCHEDULE
from models.timestamps import parse_rfc3339

# The verdict banner's colour per gate label (Sympozium's: approved green, rejected red, rewritten blue,
# timeout/error red).
BANNER = {"approved": "ok", "allowed-by-default": "ok", "rewritten": "info", "retried": "info",
          "rejected": "bad", "timeout": "bad", "error": "bad", "retries-exhausted": "bad"}
SORTS = ("name", "agent", "phase", "gate", "schedule", "created")
# A run whose gate kept the agent's response from going out still ends `Succeeded` (Sympozium's phase, kept for
# compatibility): the console says what happened instead of a green badge (models/gate.py's labels).
OUTCOMES = {"rejected": "response rejected", "timeout": "response blocked: the gate timed out",
            "error": "response blocked: the gate hook failed", "retries-exhausted": "response rejected: retries used up"}
ERROR_CHARS = 120  # of a run's error in the runs list (the run's page shows it whole)


@dataclass(frozen=True)
class RunRow:
    name: str
    namespace: str
    agent: str
    phase: str
    gate: str  # "" without a gate
    verdict: str
    schedule: str
    created: str
    age: str
    error: str = ""
    tools: str = ""  # status.toolApproval.state: "pending" while tool calls wait for a decision (SPEC §10)

    @property
    def awaiting(self) -> bool:
        return self.gate == "pending"

    @property
    def awaiting_tools(self) -> bool:
        return self.tools == "pending" and self.phase not in TERMINAL_PHASES

    @property
    def outcome(self) -> str:
        """What a gate made of a run that ended `Succeeded` without its response ("" otherwise)."""
        return OUTCOMES.get(self.verdict, "") if self.phase == "Succeeded" else ""


@dataclass(frozen=True)
class Step:
    phase: str
    at: str  # RFC 3339, "" when the status does not say
    duration: str  # until the next step (or now, for the current one)
    current: bool


def age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def since(ts: str | None, now: datetime | None = None) -> float | None:
    t = parse_rfc3339(ts)
    return None if t is None else ((now or datetime.now(UTC)) - t).total_seconds()


def row(obj: dict[str, Any], now: datetime | None = None) -> RunRow:
    meta = obj.get("metadata") or {}
    st = obj.get("status") or {}
    return RunRow(name=str(meta.get("name") or ""), namespace=str(meta.get("namespace") or ""),
                  agent=agent_name_of(obj), phase=str(st.get("phase") or ""),
                  gate=str((st.get("gate") or {}).get("state") or ""), verdict=str(st.get("gateVerdict") or ""),
                  schedule=str((meta.get("labels") or {}).get(LABEL_SCHEDULE) or ""),
                  created=str(meta.get("creationTimestamp") or ""),
                  age=age(since(meta.get("creationTimestamp"), now)), error=short(str(st.get("error") or "")),
                  tools=str((st.get("toolApproval") or {}).get("state") or ""))


def short(text: str, limit: int = ERROR_CHARS) -> str:
    """The first line of `text`, cut to `limit` characters (with an ellipsis when cut)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Filters:
    phase: str = ""
    agent: str = ""
    awaiting: bool = False
    schedule: str = ""
    sort: str = "created"
    desc: bool = True
    tools: bool = False  # only runs whose tool calls wait for a decision

    def keep(self, r: RunRow) -> bool:
        return ((not self.phase or r.phase == self.phase) and (not self.agent or r.agent == self.agent)
                and (not self.awaiting or r.awaiting) and (not self.schedule or r.schedule == self.schedule)
                and (not self.tools or r.awaiting_tools))

    def apply(self, rows: list[RunRow]) -> list[RunRow]:
        key = self.sort if self.sort in SORTS else "created"
        kept = [r for r in rows if self.keep(r)]
        kept.sort(key=lambda r: (getattr(r, key), r.name), reverse=self.desc)
        return kept


def timeline(obj: dict[str, Any], now: datetime | None = None) -> list[Step]:
    """Pending → Running → PostRunning → the terminal phase, with what the status says of when each began: the
    creation, `startedAt`, the gate's `requestedAt` (a run without a gate does not record when PostRunning began),
    `completedAt`."""
    now = now or datetime.now(UTC)
    meta = obj.get("metadata") or {}
    st = obj.get("status") or {}
    phase = str(st.get("phase") or "Pending")
    gate = st.get("gate") or {}
    known: list[tuple[str, str]] = [("Pending", str(meta.get("creationTimestamp") or ""))]
    # Running only if the run got that far: `startedAt` is written with Pending, so a run refused when it started
    # (an invalid spec, a policy) has one and never ran.
    ran = (st.get("jobName") or st.get("podName") or gate.get("requestedAt")
           or phase in ("Running", "PostRunning", "Succeeded"))
    if ran:
        known.append(("Running", str(st.get("startedAt") or "")))
    if gate.get("requestedAt") or phase == "PostRunning":
        known.append(("PostRunning", str(gate.get("requestedAt") or "")))
    if phase in TERMINAL_PHASES:
        known.append((phase, str(st.get("completedAt") or "")))
    order = {p: i for i, p in enumerate(PHASES)}
    known.sort(key=lambda k: min(order.get(k[0], 9), 3))
    steps = []
    for i, (p, at) in enumerate(known):
        current = p == phase
        start = parse_rfc3339(at)
        end = parse_rfc3339(known[i + 1][1]) if i + 1 < len(known) else (None if p in TERMINAL_PHASES else now)
        dur = age((end - start).total_seconds()) if start is not None and end is not None else ""
        steps.append(Step(p, at, dur, current))
    return steps


def banner(obj: dict[str, Any]) -> dict[str, str] | None:
    """The verdict banner of a decided gate: its label, colour, who decided and when, why."""
    gate = (obj.get("status") or {}).get("gate") or {}
    state = str(gate.get("state") or "")
    if not state or state == "pending":
        return None
    return {"label": state, "tone": BANNER.get(state, "bad"), "by": str(gate.get("decidedBy") or ""),
            "at": str(gate.get("decidedAt") or ""), "reason": str(gate.get("reason") or "")}


def created_by(obj: dict[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CREATED_BY) or "")


def gate_open(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    return (st.get("gate") or {}).get("state") == "pending" and st.get("phase") not in TERMINAL_PHASES


def has_retry(obj: dict[str, Any]) -> bool:
    return bool(((obj.get("spec") or {}).get("lifecycle") or {}).get("retry"))


@dataclass(frozen=True)
class WaitingCall:
    """A tool call that waits for a decision, as the approval bar shows it (the template escapes every field)."""

    id: str
    tool: str
    sha256: str
    arguments: str  # pretty JSON, for reading and as the start of an edit


def waiting_calls(obj: dict[str, Any]) -> list[WaitingCall]:
    """The run's tool calls waiting for a decision now (none once the run ended)."""
    st = obj.get("status") or {}
    ta = st.get("toolApproval") or {}
    if ta.get("state") != "pending" or st.get("phase") in TERMINAL_PHASES:
        return []
    out = []
    for c in ta.get("calls") or []:
        if not isinstance(c, dict):
            continue
        text = str(c.get("arguments") or "{}")
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        out.append(WaitingCall(str(c.get("id") or ""), str(c.get("tool") or ""), str(c.get("argumentsSha256") or ""),
                               text))
    return out
def trace_link(template: str, trace_id: object) -> str:
    """The run's trace where AGENTRUN_TRACE_URL_TEMPLATE shows traces ("" : no template, or no valid trace ID: the
    status is anyone's to write, so only 32 hex digits are put in a URL)."""
    if not template or not isinstance(trace_id, str) or not re.fullmatch(r"[0-9a-f]{32}", trace_id):
        return ""
    return template.replace("{traceID}", trace_id)


@dataclass
class Day:
    label: str  # YYYY-MM-DD
    tokens: int
    cost: Decimal
    height: int  # of its bar, 0..CHART_HEIGHT


@dataclass
class AgentUsage:
    runs: int  # finished runs of the last CHART_DAYS days
    tokens: int
    cost: Decimal
    unpriced: int  # finished runs that used tokens without an estimate (their cost is not in `cost`)
    days: list[Day]
    # A day's bar is a <meter> up to this: an HTML element, not an image or inline SVG, so the page holds no
    # image a hostile name could pass for (the console's pages are checked for none) and needs no inline style.
    bar_max: int = 50


CHART_DAYS = 30
CHART_HEIGHT = AgentUsage.bar_max


def agent_usage(runs: list[dict[str, Any]], now: datetime | None = None) -> AgentUsage:
    """What an Agent's finished runs of the last 30 days used and cost, per day (by completion): from the runs the
    API's watch holds (those still kept: pruned runs are not counted; the Prometheus counters keep the rest)."""
    now = now or datetime.now(UTC)
    today = now.date()
    first = today.toordinal() - CHART_DAYS + 1
    tokens = [0] * CHART_DAYS
    costs = [Decimal(0)] * CHART_DAYS
    count = unpriced = 0
    for run in runs:
        st = run.get("status") or {}
        if st.get("phase") not in TERMINAL_PHASES:
            continue
        when = parse_rfc3339(str(st.get("completedAt") or st.get("startedAt") or ""))
        if when is None or not first <= when.date().toordinal() <= today.toordinal():
            continue
        i = when.date().toordinal() - first
        usage = st.get("tokenUsage") or {}
        count += 1
        tokens[i] += int(usage.get("totalTokens") or 0)
        try:
            costs[i] += Decimal(str(usage["estimatedCostUSD"]))
        except (KeyError, ArithmeticError, ValueError):
            unpriced += 1 if usage.get("totalTokens") else 0
    top = max(costs) if max(costs) > 0 else Decimal(0)
    days = [Day(date.fromordinal(first + i).isoformat(), tokens[i], costs[i],
                int(costs[i] / top * CHART_HEIGHT) if top else 0) for i in range(CHART_DAYS)]
    return AgentUsage(count, sum(tokens), sum(costs, Decimal(0)), unpriced, days)
