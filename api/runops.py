"""What the JSON API (api/main.py) and the console (api/console/) both do to runs: read, create, delete, decide a
gate, and decide a tool call that waits for approval (SPEC §10). One code path each, so a verdict from the console passes the same RBAC and `gatePolicy` checks, is
refused the same way and records the same identity as one sent to `POST /api/v1/runs/{name}/gate-verdict`; a run is
created or deleted only when RBAC lets the caller (api/access.py).

Failures are HTTPExceptions with the JSON API's statuses and messages; the console shows their detail as text.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from fastapi import HTTPException
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from kube import NotFound
from kube.resources import sympozium
from models.agentrun import TERMINAL_PHASES
from models.approvals import ToolApprovalView, ToolDecision, decision_problem, edited_arguments
from models.evaluate import AGENT_PLURALS
from models.gate import GateView, Verdict
from models.names import (
    AGENTRUNS,
    ANNOTATION_TRACEPARENT,
    API_VERSION,
    LABEL_INSTANCE,
)
from models.tracecontext import format_traceparent, trace_id_of, valid
from workflows.agent_run import AgentRunWorkflow
from workflows.gate import FINISHED
from workflows.tool_approval import FINISHED as TOOLS_FINISHED

from . import admission
from .access import APPROVE
from .auth import Caller
from .authority import Unreadable, gate_authority, record_refusal
from .deps import State

T = TypeVar("T")
ACTIONS = ("approve", "reject", "rewrite", "retry")
NO_GATE = "the run has no gate (no postRun hook with gate: true)"


async def read_run(state: State, ns: str, name: str) -> dict[str, Any]:
    try:
        return cast(dict[str, Any], await sympozium(state.kube, AGENTRUNS).get(
            ns, name, action=f"read AgentRun {ns}/{name}"))
    except NotFound as e:
        raise HTTPException(status_code=404, detail=f'run "{name}" not found in namespace "{ns}"') from e


async def current_run(state: State, ns: str, name: str, *, started: bool = False) -> dict[str, Any]:
    """The run as the API's watch holds it, read from Kubernetes only when the watch lacks it (just created, or the
    view not synced yet) or, with `started`, has not yet seen its workflow start (no workflowId)."""
    run = state.runwatch.get(ns, name)
    if run is None or (started and not (run.get("status") or {}).get("workflowId")):
        return await read_run(state, ns, name)
    return cast(dict[str, Any], run)


async def require_agent(state: State, namespace: str, name: str) -> None:
    """404 unless the Agent exists under its current kind or its older one, SympoziumInstance (SPEC §1.1): a run
    resolves either (models/evaluate.py), so `kubectl apply` of such a run works, and the API must not refuse it."""
    for plural in AGENT_PLURALS:
        try:
            await sympozium(state.kube, plural).get(namespace, name, action=f"read {plural} {namespace}/{name}")
            return
        except NotFound:
            continue
    raise HTTPException(status_code=404, detail=f'agent "{name}" not found in namespace "{namespace}"')


async def create_run(state: State, who: Caller, namespace: str, *, agent_ref: str,
                     spec: dict[str, Any], traceparent: str = "") -> dict[str, Any]:
    """A new AgentRun of `agent_ref` (which must exist) with `spec` (agentRef added), created for `who` (its author
    stamp: admission checks the run's grants and Secrets against them, and they are its creator for gatePolicy).
    RBAC must let `who` create runs in the namespace. The run's trace starts here (SPEC §12), in the caller's when
    its request carried a W3C `traceparent`: the annotation otel.dev/traceparent names this step's span, and the
    bridge continues it."""
    context = TraceContextTextMapPropagator().extract({"traceparent": traceparent}) if valid(traceparent) else None
    with state.tracer.start_as_current_span("create AgentRun", context=context, kind=SpanKind.SERVER,
                                            attributes={"agentrun.agent": agent_ref, "k8s.namespace.name": namespace,
                                                        "enduser.id": who.identity}) as span:
        obj = await _create_run(state, who, namespace, agent_ref=agent_ref, spec=spec,
                                traceparent=_traceparent_of(span))
        span.set_attribute("agentrun.run", str((obj.get("metadata") or {}).get("name") or ""))
        return obj


def _traceparent_of(span: Span) -> str:
    ctx = span.get_span_context()
    return format_traceparent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags)) if ctx.is_valid else ""


async def _create_run(state: State, who: Caller, namespace: str, *, agent_ref: str, spec: dict[str, Any],
                      traceparent: str) -> dict[str, Any]:
    await state.allow(who, "create", AGENTRUNS, namespace)
    await require_agent(state, namespace, agent_ref)
    spec = {"agentRef": agent_ref, **spec}
    spec.setdefault("sessionKey", f"session-{time.time_ns()}")
    annotations = who.stamp(AGENTRUNS)
    if traceparent:
        annotations[ANNOTATION_TRACEPARENT] = traceparent
    obj = {"apiVersion": API_VERSION, "kind": "AgentRun",
           "metadata": {"generateName": f"{agent_ref}-", "labels": {LABEL_INSTANCE: agent_ref},
                        "annotations": annotations},
           "spec": spec}
    return cast(dict[str, Any], await sympozium(state.kube, AGENTRUNS).create(
        namespace, obj, action=f"create AgentRun in {namespace}"))


async def delete_run(state: State, caller: Caller, namespace: str, name: str) -> None:
    await state.allow(caller, "delete", AGENTRUNS, namespace, name=name)
    try:
        await sympozium(state.kube, AGENTRUNS).delete(
            namespace, name, action=f"delete AgentRun {namespace}/{name}")
    except NotFound as e:
        raise HTTPException(status_code=404, detail=f'run "{name}" not found in namespace "{namespace}"') from e


def check_verdict(action: Any, response: Any, reason: Any) -> None:
    """400 for what is not a verdict (SPEC §7)."""
    if action not in ACTIONS:
        raise HTTPException(status_code=400, detail='action must be "approve", "reject", "rewrite", or "retry"')
    if not isinstance(response, str) or not isinstance(reason, str):
        raise HTTPException(status_code=400, detail="response and reason must be strings")
    if action in ("reject", "rewrite") and not response:
        raise HTTPException(status_code=400, detail="response is required for reject/rewrite actions")
    if action == "retry" and not response:
        raise HTTPException(status_code=400, detail="response (the reviewer's feedback) is required for retry")


async def decide(state: State, caller: Caller, namespace: str, name: str, *, action: str, response: str,
                 reason: str) -> GateView:
    """The verdict of `caller` on the run's gate, after RBAC (`approve agentruns`) and then its `gatePolicy` allow
    it, as a Temporal Update."""
    check_verdict(action, response, reason)
    run = await _deciders_run(state, caller, namespace, name, what="verdict")
    who = caller.identity
    st = run.get("status") or {}
    wid = st.get("workflowId")
    if st.get("phase") in TERMINAL_PHASES:
        # A run that ended without ever waiting at a gate never had one to decide: say that, not only that it ended.
        raise HTTPException(status_code=409, detail=FINISHED if st.get("gate") else NO_GATE)
    if not wid or state.temporal is None:
        raise HTTPException(status_code=409, detail="the run has not started yet; retry in a moment")
    verdict = Verdict(action=action, response=response, reason=reason, decided_by=who, source="api")
    if state.signer is not None:  # the proof that the API, not anyone who can write to Temporal, decided (SPEC §4)
        state.signer.sign(verdict, target=wid)
    handle = state.temporal.get_workflow_handle(wid)
    # A span for the verdict (who gave which), in the run's trace when the run names where it began (the API created
    # it); the Update carries it to the workflow's headers.
    run_trace = str(((run.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_TRACEPARENT) or "")
    in_run = valid(run_trace) and trace_id_of(run_trace) == str(st.get("traceID") or "")
    context = TraceContextTextMapPropagator().extract({"traceparent": run_trace}) if in_run else None

    def refused() -> None:
        state.verdicts["refused"] += 1

    with state.metrics.verdict_seconds.time(), state.tracer.start_as_current_span(
            f"gate verdict {action}", context=context, kind=SpanKind.SERVER,
            attributes={"agentrun.run": name, "k8s.namespace.name": namespace, "agentrun.verdict": action,
                        "enduser.id": who}):
        view: GateView = await _update(handle.execute_update(AgentRunWorkflow.submit_verdict, verdict),
                                       finished=FINISHED, refused=refused)
    state.verdicts[view.state] += 1
    if view.state == "none":
        raise HTTPException(status_code=409, detail=NO_GATE)
    return view


def check_tool_decision(*, call_id: Any, action: Any, arguments_sha256: Any, arguments: Any, reason: Any) -> None:
    """400 for what is not a tool decision (SPEC §7), naming the field."""
    problem = decision_problem(call_id=call_id, action=action, arguments_sha256=arguments_sha256,
                               arguments=arguments, reason=reason)
    if problem is not None:
        raise HTTPException(status_code=400, detail=problem)


async def decide_tool(state: State, caller: Caller, namespace: str, name: str, *, call_id: str, action: str,
                      arguments_sha256: str, arguments: Any = None, reason: str = "") -> ToolApprovalView:
    """`caller`'s decision on a tool call of the run that waits for approval (SPEC §10), after RBAC (`approve
    agentruns`), the run's tool authority (never an account runs execute as; then gatePolicy: approvers,
    requireDistinctApprover), as a signed Temporal Update. A refusal before the workflow is a VerdictRefused Event."""
    check_tool_decision(call_id=call_id, action=action, arguments_sha256=arguments_sha256, arguments=arguments,
                        reason=reason)
    run = await _deciders_run(state, caller, namespace, name, what="tool decision")
    who = caller.identity
    st = run.get("status") or {}
    wid = st.get("workflowId")
    if st.get("phase") in TERMINAL_PHASES:
        raise HTTPException(status_code=409, detail=TOOLS_FINISHED)
    if not wid or state.temporal is None:
        raise HTTPException(status_code=409, detail="the run has not started yet: no tool call waits for a decision")
    decision = ToolDecision(call_id=call_id, action=action, arguments_sha256=arguments_sha256,
                            arguments=edited_arguments(arguments) if action == "edit" else None,
                            reason=reason or "", decided_by=who, source="api")
    if state.signer is not None:  # the proof that the API, not anyone who can write to Temporal, decided (SPEC §4)
        state.signer.sign(decision, target=wid)
    handle = state.temporal.get_workflow_handle(wid)
    with state.metrics.verdict_seconds.time():
        view: ToolApprovalView = await _update(handle.execute_update(AgentRunWorkflow.decide_tool_call, decision),
                                               finished=TOOLS_FINISHED)
    return view


async def _deciders_run(state: State, caller: Caller, namespace: str, name: str, *, what: str) -> dict[str, Any]:
    """The run `caller` decides on (a gate's verdict, or a tool decision: `what`), once RBAC (`approve agentruns`)
    and the run's authority for that kind of decision allow them; a refusal by the authority is recorded as a
    VerdictRefused Event (403). The run is as the API's watch last saw it: what the decision needs of it (its Agent,
    creator stamp and workflow ID) does not change once the workflow has started; a run the watch lacks or has not
    seen started is read."""
    await state.allow(caller, APPROVE, AGENTRUNS, namespace, name=name)
    run = await current_run(state, namespace, name, started=True)
    try:
        authority = await gate_authority(admission.reader(state.kube, namespace, state.definitions), run)
    except Unreadable as e:
        raise HTTPException(status_code=503, detail=f"cannot check who may decide this run: {e}") from e
    refused = authority.tool_refusal if what == "tool decision" else authority.refusal
    refusal = refused(caller.identity, caller.groups)
    if refusal is not None:
        state.refusals[f"api {refusal.rule}"] += 1
        await record_refusal(state.kube, namespace=namespace, run=run, who=caller.identity, refusal=refusal, via="api",
                             what=what)
        raise HTTPException(status_code=403, detail=refusal.message)
    return run


async def _update(update: Awaitable[T], *, finished: str, refused: Callable[[], None] | None = None) -> T:
    """A decision's Temporal Update: what the workflow refused is a 409 with its message (`refused` counts it), a
    workflow that ended is a 409 saying `finished`, Temporal unreachable a 503."""
    try:
        return await update
    except WorkflowUpdateFailedError as e:
        if refused is not None:
            refused()
        raise HTTPException(status_code=409, detail=getattr(e.cause, "message", None) or str(e)) from e
    except RPCError as e:
        if e.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise HTTPException(status_code=409, detail=finished) from e
        raise HTTPException(status_code=503, detail=f"temporal is unavailable: {e.message}") from e
