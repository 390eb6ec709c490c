"""Reading what the agent and the hooks said: the result marker and the skip marker (SPEC §3.4, §3.6).

The agent prints `__SYMPOZIUM_RESULT__{json}__SYMPOZIUM_END__` on stdout; the last occurrence
wins. Without a marker, the container's exit code and the last log lines decide.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from models.approvals import AgentWait
from models.pricing import MODELS_KEPT, model_name
from models.steps import RESULT_MAX_BYTES, AgentOutcome, Metrics, ModelTokens

from .manifests import SKIP_MARKER, cut_utf8

START = "__SYMPOZIUM_RESULT__"
END = "__SYMPOZIUM_END__"
METRIC_CAP = 10_000_000_000
DEFAULT_SKIP_REASON = "preRun hook requested skip"


def parse_marker(log: str) -> dict[str, object] | None:
    start = log.rfind(START)
    if start < 0:
        return None
    body_start = start + len(START)
    end = log.find(END, body_start)
    if end < 0:
        return None
    try:
        data = json.loads(log[body_start:end])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _metric(raw: object) -> int:
    try:
        value = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0
    return min(value, METRIC_CAP)


def _metrics(raw: object) -> Metrics:
    """The marker's token counts, and its tokens per model (`models[]`). Nothing else is read: a cost the marker
    claims is ignored, the control plane prices the tokens itself (models/pricing.py)."""
    if not isinstance(raw, dict):
        return Metrics()
    values = [_metric(raw.get(k)) for k in ("inputTokens", "outputTokens", "toolCalls", "durationMs",
                                            "cachedInputTokens", "activeMs")]
    if any(v < 0 for v in values):
        return Metrics()
    return Metrics(input_tokens=values[0], output_tokens=values[1], tool_calls=values[2], duration_ms=values[3],
                   cached_input_tokens=min(values[4], values[0]), active_ms=values[5],
                   models=_models(raw.get("models")))


def _models(raw: object) -> list[ModelTokens]:
    """Per model, merged by name, at most MODELS_KEPT (the rest is left out: its tokens are in the totals)."""
    if not isinstance(raw, list):
        return []
    merged: dict[str, ModelTokens] = {}
    for item in raw:
        if not isinstance(item, dict):
            continue
        counts = [_metric(item.get(k)) for k in ("calls", "inputTokens", "outputTokens", "cachedInputTokens")]
        if any(v < 0 for v in counts):
            continue
        name = model_name(item.get("model"))
        m = merged.get(name)
        if m is None:
            if len(merged) >= MODELS_KEPT:
                continue
            m = merged[name] = ModelTokens(model=name)
        m.calls += counts[0]
        m.input_tokens += counts[1]
        m.output_tokens += counts[2]
        m.cached_input_tokens = min(m.cached_input_tokens + counts[3], m.input_tokens)
    return list(merged.values())


def _wait(raw: object) -> AgentWait | None:
    """The marker's `wait` (agentrunner/approvals.py), or None when it is no wait the control plane knows."""
    if not isinstance(raw, dict):
        return None
    try:
        return AgentWait.model_validate(raw)
    except ValidationError:
        return None


def last_lines(log: str, n: int = 5, limit: int = 500) -> str:
    lines = [ln.strip() for ln in log.strip().splitlines() if ln.strip()]
    text = " | ".join(lines[-n:])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def agent_outcome(log: str, exit_code: int | None, *, timed_out: bool = False) -> AgentOutcome:
    """Decide the agent's outcome from its log tail and exit code; a success marker wins over a failed Job.

    The response (or error) is at most RESULT_MAX_BYTES; a longer one is cut, and `cut_from` says so."""
    outcome = _outcome(log, exit_code, timed_out=timed_out)
    for field in ("response", "error"):
        text: str = getattr(outcome, field)
        size = len(text.encode("utf-8"))
        if size > RESULT_MAX_BYTES:
            setattr(outcome, field, cut_utf8(text, RESULT_MAX_BYTES))
            outcome.cut_from = size
    return outcome


def _outcome(log: str, exit_code: int | None, *, timed_out: bool) -> AgentOutcome:
    code = 124 if timed_out else (exit_code if exit_code is not None else 1)
    data = parse_marker(log)
    if data is not None:
        status = str(data.get("status") or "success")
        metrics = _metrics(data.get("metrics"))
        if status == "success":
            return AgentOutcome(status="success", response=str(data.get("response") or ""), exit_code=0,
                                metrics=metrics, has_marker=True)
        if status == "skipped":
            return AgentOutcome(status="skipped", response=str(data.get("response") or "").strip()
                                or DEFAULT_SKIP_REASON, exit_code=0, metrics=metrics, has_marker=True)
        wait = _wait(data.get("wait")) if status == "waiting" and not timed_out else None
        if wait is not None and wait.calls:
            return AgentOutcome(status="waiting", exit_code=0, metrics=metrics, has_marker=True, wait=wait)
        if status == "waiting" and not timed_out:
            return AgentOutcome(status="error", error="the agent ended waiting, but its result marker names no calls "
                                "to wait for", exit_code=code or 1, has_marker=True)
        err = str(data.get("error") or "").strip() or "agent run failed"
        return AgentOutcome(status="error", error="timeout" if timed_out else err, exit_code=code or 1,
                            has_marker=True)
    if timed_out:
        return AgentOutcome(status="error", error="timeout", exit_code=124)
    if code == 0:
        return AgentOutcome(status="success", response=log.strip()[-4000:], exit_code=0)
    tail = last_lines(log)
    message = f"agent container exited with code {code}" + (f": {tail}" if tail else "")
    return AgentOutcome(status="error", error=message, exit_code=code)


# How the control plane of a cluster says that it, not the pod's own containers, ended a pod: the DisruptionTarget
# condition's reasons (kube-apiserver's eviction, the scheduler, the taint manager, the pod garbage collector, the
# kubelet) and the pod reasons the kubelet and the node lifecycle controller write.
DISRUPTIONS = {"EvictionByEvictionAPI": "evicted", "PreemptionByScheduler": "preempted by the scheduler",
               "DeletionByTaintManager": "deleted for a NoExecute taint of its node",
               "DeletionByPodGC": "deleted by the pod garbage collector (its node is gone)",
               "TerminationByKubelet": "stopped by its node's kubelet (node pressure or shutdown)"}
POD_REASONS = {"Evicted": "evicted by its node's kubelet", "NodeLost": "lost with its node",
               "Terminated": "stopped by its node's shutdown", "Shutdown": "stopped by its node's shutdown",
               "NodeShutdown": "stopped by its node's shutdown", "UnexpectedAdmissionError": "refused by its node"}


def lost_why(pod: Any | None) -> str | None:
    """Why the agent's pod ended without the agent having ended it (None: the agent's own end, or still running).

    A pod that is gone (deleted: a real Job's pod goes once it failed and its tracking finalizer is dropped), that
    carries a deletion timestamp, the DisruptionTarget condition or a reason of the node's, or whose agent
    container's state was lost with its node, was stopped from outside: started again, the agent continues
    from its journal. A container that exits by itself (a crash, an OOM kill, an error) is the agent's own end."""
    if pod is None:
        return "is gone (deleted)"
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == "DisruptionTarget" and c.status == "True":
            return "was " + DISRUPTIONS.get(c.reason or "", f"disrupted ({c.reason}: {c.message})")
    reason = (pod.status.reason if pod.status else None) or ""
    if reason in POD_REASONS:
        return "was " + POD_REASONS[reason]
    if pod.metadata.deletion_timestamp is not None:
        return "was deleted"
    for cs in (pod.status.container_statuses if pod.status else None) or []:
        term = cs.state.terminated if cs.state else None
        if cs.name == "agent" and term is not None and term.reason == "ContainerStatusUnknown":
            return "was lost with its node (its container could not be located)"
    return None


def lost_outcome(job: str, pod: str | None, why: str, exit_code: int | None, *,
                 said: AgentOutcome | None = None) -> AgentOutcome:
    """The outcome of an agent whose pod was lost: an error that says which pod and why, unless the agent's own
    error marker says more (it may have answered a SIGTERM with one); `lost` tells the workflow it may start the
    agent again."""
    which = f"pod {pod} of Job {job}" if pod else f"pod of Job {job}"
    error = f"the agent's {which} {why} before it reported a result"
    if said is not None and said.has_marker and said.error:
        error = f"{said.error} (the agent's {which} {why})"
    return AgentOutcome(status="error", error=error, exit_code=exit_code or 1, lost=why,
                        has_marker=said.has_marker if said else False)


def skip_reason(done_log: str) -> str | None:
    """The preRun Job's final container prints the skip marker and the file's text when asked to skip."""
    idx = done_log.find(SKIP_MARKER)
    if idx < 0:
        return None
    return done_log[idx + len(SKIP_MARKER):].strip() or DEFAULT_SKIP_REASON


__all__ = ["AgentOutcome", "Metrics", "agent_outcome", "lost_outcome", "lost_why", "skip_reason"]
