"""The agent's loop (SPEC §9), phase by phase: the model is asked, its tool calls run (in parallel within a round),
their results go back, until it answers without a tool call or ``MAX_TOOL_ITERATIONS`` rounds have passed.

    bootstrap      read the journal (a restarted agent continues from it)
    guardrail, cost-route, strategy     hook points before the first round
    per round:
      think        one model response (or the recorded one: never requested twice)
      act          each tool call: the policy hook first, then the tool (or its recorded result)
      observe      the round's results join the conversation
    verify, memory-flush, complete      hook points after the final answer

Each phase runs between its hooks (agentrunner/hooks.py). The policy check (``before act``) and the usage
accounting (``after think``) are hooks, registered first. Everything a round produces is in the journal before the
next step starts.

A call the policy lets through only with a person's approval (``ask``, SPEC §10) is parked, not run, when the
control plane can resume the agent (``AGENT_WAITS``) and a journal holds the run: the round's other calls run, the
round's pending calls are journaled, and the run returns ``waiting`` with them (agentrunner/approvals.py). Started
again with the decisions (``AGENT_RESUME``), the loop replays the journal to that round without asking the model
again, records each decision, and answers each parked call as decided: run (with the edited arguments for an edit),
or a refusal the model reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrunner.approvals import (
    ARGUMENTS_MAX_BYTES,
    PENDING_MAX,
    TOOL_APPROVAL,
    Decision,
    PendingCall,
    Resume,
    Wait,
    canonical_arguments,
    sha256_hex,
)
from agentrunner.hooks import HookRegistry, PhaseContext, Skipped, StopRun
from agentrunner.journal import Journal, Replay, call_key
from agentrunner.policy import NeedsApproval, PolicyDenied, ToolPolicy
from agentrunner.providers.base import (
    Conversation,
    Model,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agentrunner.result import Metrics, RunResult
from agentrunner.tools import MAX_RESULT_CHARS, Tool, ToolError
from agentrunner.tracing import NoSpans

log = logging.getLogger(__name__)

EMPTY_ANSWER = "(Agent completed its task via tool calls but did not produce a final text summary.)"
INTERRUPTED = ("this call was interrupted: the agent restarted before its result was recorded, and it changes "
               "things, so it was not run again; check whether it took effect before repeating it")


@dataclass
class RunState:
    """What hooks see of the run (``PhaseContext.run``)."""

    conversation: Conversation
    metrics: Metrics
    tools: dict[str, Tool]
    offered: list[ToolSpec]
    round: int = 0
    answer: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def policy_hook(policy: ToolPolicy) -> Callable[[PhaseContext], None]:
    def check_tool_policy(ctx: PhaseContext) -> None:
        try:
            policy.check(ctx.call.name)
        except NeedsApproval:
            if isinstance(ctx.approval, Decision) and ctx.approval.action in ("approve", "edit"):
                return  # a person approved this very call (and these arguments)
            raise

    return check_tool_policy


def usage_hook(ctx: PhaseContext) -> None:
    turn: ModelTurn = ctx.result
    ctx.run.metrics.add_call(turn.model, turn.usage.input_tokens, turn.usage.output_tokens,
                             turn.usage.cached_input_tokens)


def default_hooks(policy: ToolPolicy) -> HookRegistry:
    hooks = HookRegistry()
    hooks.register("act", "before", policy_hook(policy), name="tool-policy")
    hooks.register("think", "after", usage_hook, name="usage")
    return hooks


def cut(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... (result cut at {limit} characters of {len(text)})"


class Loop:
    def __init__(self, *, model: Model, tools: list[Tool], policy: ToolPolicy, hooks: HookRegistry,
                 journal: Journal, conversation: Conversation, max_rounds: int, run_timeout: float,
                 run_timeout_text: str, waits: frozenset[str] = frozenset(), resume: Resume | None = None,
                 spans: NoSpans | None = None, provider: str = "", model_name: str = "") -> None:
        self.model = model
        self.waits = waits  # what the control plane resumes the agent after (AGENT_WAITS)
        self.resume = resume  # the decisions this container was started with (AGENT_RESUME)
        self.pending: list[PendingCall] = []  # this round's calls that wait for a person
        # The run's GenAI spans (agentrunner/tracing.py; NoSpans: tracing off), and what its chat spans name.
        self.spans = spans or NoSpans()
        self.provider, self.model_name = provider, model_name
        self.policy = policy
        self.hooks = hooks
        self.journal = journal
        self.max_rounds = max_rounds
        self.run_timeout = run_timeout
        self.run_timeout_text = run_timeout_text
        self.tools = {t.name: t for t in tools}
        offered = [t for t in tools if policy.offered(t.name)]
        hidden = sorted(set(self.tools) - {t.name for t in offered})
        if hidden:
            log.info("tools not offered (policy): %s", ", ".join(hidden))
        self.state = RunState(conversation, Metrics(), self.tools,
                              [ToolSpec(t.name, t.description, t.parameters) for t in offered])
        self.replay = Replay()
        self.started = time.monotonic()
        self.round_overhead: list[float] = []  # seconds of our own time per round (bench/agent.py)

    # -- time ---------------------------------------------------------------------------------------------------

    def active_ms(self) -> int:
        return self.replay.active_ms + int((time.monotonic() - self.started) * 1000)

    def record(self, record: dict[str, Any]) -> None:
        self.journal.append(record, active_ms=self.active_ms())

    def ctx(self, **kw: Any) -> PhaseContext:
        return PhaseContext(phase="", run=self.state, round=self.state.round, data=self.state.data, **kw)

    # -- the run --------------------------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        """The whole run; raises only what the runner maps itself (provider errors, skip/exit requests)."""
        boot = await self.hooks.run("bootstrap", self.ctx(), self._bootstrap)
        if isinstance(boot, Skipped):
            return RunResult("error", error=f"bootstrap skipped by a hook: {boot.error}")
        if self.replay.end is not None:
            log.info("the journal holds this run's result: reporting it again")
            return _result_from(self.replay.end)
        remaining = self.run_timeout - self.replay.active_ms / 1000
        if remaining <= 0:
            return self._timeout()
        try:
            async with asyncio.timeout(remaining):
                return await self._rounds()
        except TimeoutError:
            return self._timeout()
        except StopRun as exc:
            return RunResult("error", error=str(exc) or "stopped by a hook", metrics=self.state.metrics)

    def _timeout(self) -> RunResult:
        return RunResult("error", error=f"timeout: the run exceeded RUN_TIMEOUT={self.run_timeout_text}",
                         metrics=self.state.metrics)

    async def _bootstrap(self) -> Replay:
        self.replay = self.journal.open(self.state.conversation.prompt.task)
        if self.replay.records:
            log.info("continuing from the journal: %d model response(s), %d tool result(s), %d ms active so far",
                     len(self.replay.turns), len(self.replay.results), self.replay.active_ms)
        if self.resume is not None:
            self._take_decisions(self.resume)
        return self.replay

    def _take_decisions(self, resume: Resume) -> None:
        """Journal the decisions this container was started with, each checked against the call it decides: a
        decision for a call that is not waiting, or for other arguments than the ones journaled, is no decision
        (the call waits again). The first decision journaled for a call counts."""
        wait = self.replay.waits.get(resume.round)
        waiting = {str(c.get("id")): c for c in (wait or {}).get("calls") or []}
        for d in resume.decisions:
            key = call_key(resume.round, d.call_id)
            if key in self.replay.decisions:
                continue
            call = waiting.get(d.call_id)
            if call is None:
                log.error("a decision for call %s of round %d, which is not waiting: ignored", d.call_id,
                          resume.round)
                continue
            if call.get("argumentsSha256") != d.sha256:
                log.error("the decision on call %s is for arguments %s, not the waiting call's %s: ignored",
                          d.call_id, d.sha256, call.get("argumentsSha256"))
                continue
            record = d.to_record(resume.round)
            self.record(record)
            self.replay.decisions[key] = record
            log.info("call %s (%s) decided: %s by %s", d.call_id, call.get("tool"), d.action,
                     d.decided_by or d.source)

    async def _rounds(self) -> RunResult:
        for phase in ("guardrail", "cost-route", "strategy"):
            await self.hooks.run(phase, self.ctx(), _nothing)
        accumulated: list[str] = []
        for n in range(1, self.max_rounds + 1):
            self.state.round = n
            t0 = time.monotonic()
            think = await self.hooks.run("think", self.ctx(), lambda n=n: self._think(n))  # type: ignore[misc]
            if isinstance(think, Skipped):
                return RunResult("error", error=f"the think phase was skipped by a hook: {think.error}",
                                 metrics=self.state.metrics)
            turn, model_seconds = think, self._model_seconds
            if turn.text.strip():
                accumulated.append(turn.text.strip())
            if not turn.calls:
                self.round_overhead.append(time.monotonic() - t0 - model_seconds)
                return await self._finish(turn, accumulated)
            self.pending = []
            results = await asyncio.gather(*(self._act(call) for call in turn.calls))
            if self.pending:
                return self._wait(n)
            self.state.metrics.tool_calls += len(results)
            await self.hooks.run("observe", self.ctx(result=results),
                                 lambda results=results: self._observe(list(results)))  # type: ignore[misc]
            self.round_overhead.append(time.monotonic() - t0 - model_seconds - self._tool_seconds)
        return RunResult("error", error=f"the run reached MAX_TOOL_ITERATIONS={self.max_rounds} model rounds "
                                        "without a final answer", metrics=self.state.metrics)

    _tool_seconds = 0.0

    _model_seconds = 0.0

    async def _think(self, n: int) -> ModelTurn:
        conv = self.state.conversation
        self._model_seconds = 0.0
        if n <= len(self.replay.turns):
            turn = _turn_from(self.replay.turns[n - 1])
            conv.steps.append(turn)
            return turn
        t0 = time.monotonic()
        with self.spans.chat(self.provider, self.model_name) as span:
            turn = await self.model.respond(conv, self.state.offered)
            self.spans.chat_done(span, turn)
        self._model_seconds = time.monotonic() - t0
        self.record({"k": "model", "round": n, "text": turn.text,
                     "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls],
                     "usage": turn.usage.to_dict(), "model": turn.model, "native": turn.native})
        conv.steps.append(turn)
        return turn

    def _wait(self, n: int) -> RunResult:
        """The round's pending calls are journaled; the container ends waiting for a person's decisions."""
        wait = Wait(TOOL_APPROVAL, n, list(self.pending))
        self.record({"k": "wait", "round": n, "kind": wait.kind, "calls": [c.to_dict() for c in wait.calls]})
        log.info("round %d: %d call(s) wait for approval (%s); the agent ends until they are decided", n,
                 len(wait.calls), ", ".join(f"{c.id} {c.tool}" for c in wait.calls))
        return RunResult("waiting", metrics=self.state.metrics, wait=wait)

    def _refused(self, call: ToolCall, content: str, status: str = "denied") -> ToolResult:
        log.info("tool call %s %s not run: %s", call.id, call.name, content)
        self.record({"k": "result", "round": self.state.round, "id": call.id, "name": call.name, "content": content,
                     "status": status})
        return ToolResult(call.id, call.name, content, status)

    async def _act(self, call: ToolCall) -> ToolResult:
        with self.spans.tool(call) as span:
            result = await self._act_on(call)
            self.spans.tool_done(span, result)
            return result

    async def _act_on(self, call: ToolCall) -> ToolResult:
        self._tool_seconds = 0.0
        key = call_key(self.state.round, call.id)
        recorded = self.replay.results.get(key)
        if recorded is not None:
            return ToolResult(call.id, call.name, recorded["content"], recorded.get("status", "ok"))
        if key in self.replay.started:
            tool = self.tools.get(call.name)
            if tool is None or not tool.read_only:
                result = ToolResult(call.id, call.name, INTERRUPTED, "interrupted")
                self.record({"k": "result", "round": self.state.round, "id": call.id, "name": call.name, "content": result.content,
                             "status": result.status})
                return result
        recorded_decision = self.replay.decisions.get(key)
        decision = Decision.from_record(recorded_decision) if recorded_decision is not None else None
        if decision is not None and decision.action == "reject":
            return self._refused(call, decision.answer(), "rejected")
        runs, note = call, ""
        if decision is not None and decision.action == "edit":
            runs = ToolCall(call.id, call.name, decision.arguments)
            note = (f"(the arguments were edited by {decision.decided_by or 'an approver'} before the call ran; it ran "
                    f"with {decision.arguments})\n")
        outcome = await self.hooks.run("act", self.ctx(call=runs, approval=decision),
                                       lambda: self._execute(runs, note=note))
        if isinstance(outcome, Skipped):
            error = outcome.error
            if isinstance(error, NeedsApproval):
                parked = self._park(call)
                if parked is not None:
                    return parked
                content = self.approval_unavailable(call, error)
            elif isinstance(error, PolicyDenied):
                content = str(error)
            else:
                content = f"not run: a hook refused it: {error}"
            result = ToolResult(call.id, call.name, content, "denied")
            log.info("tool call %s %s denied: %s", call.id, call.name, content)
            self.record({"k": "result", "round": self.state.round, "id": call.id, "name": call.name, "content": content, "status": "denied"})
            return result
        return outcome

    def _park(self, call: ToolCall) -> ToolResult | None:
        """A call that needs a person's approval waits for it (its result comes in a container started again), if
        the control plane can resume the agent and a journal holds the run; None: it cannot wait (refused). Calls
        no person should be asked about are answered at once: arguments that are no JSON object (they could not
        run anyway), too large to review, or more calls than a round may put to a person."""
        if TOOL_APPROVAL not in self.waits or self.journal.path is None:
            return None
        try:
            arguments = canonical_arguments(call.arguments)
        except ValueError as exc:
            return self._refused(call, f"Error: the arguments are not a JSON object ({exc}); the call was neither "
                                       "put to an approver nor run: send a JSON object", "error")
        size = len(arguments.encode("utf-8"))
        if size > ARGUMENTS_MAX_BYTES:
            return self._refused(call, f"not run: {call.name} needs approval, and its arguments ({size} bytes) are "
                                       f"more than an approver is asked to review ({ARGUMENTS_MAX_BYTES} bytes); "
                                       "send smaller calls")
        if len(self.pending) >= PENDING_MAX:
            return self._refused(call, f"not run: {call.name} needs approval, and {PENDING_MAX} calls of this round "
                                       "already wait for one; ask for it again in a later round")
        self.pending.append(PendingCall(call.id, call.name, arguments, sha256_hex(arguments)))
        return ToolResult(call.id, call.name, "", "pending")

    def approval_unavailable(self, call: ToolCall, error: NeedsApproval) -> str:
        """A call needing approval where the agent cannot wait for one (no journal, or a control plane that does
        not resume it): refused, never run."""
        return (f"{error}; this agent cannot wait for a person's decision here (no journal, or a control plane that "
                "does not start it again after a wait), so the call was not run")

    async def _execute(self, call: ToolCall, *, note: str = "") -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None or tool.name not in {t.name for t in self.state.offered}:
            names = ", ".join(t.name for t in self.state.offered) or "none"
            content = (f"Error: unknown tool {call.name!r}; the tools are: {names}" if tool is None
                       else f"Error: {call.name} is not offered in this run")
            result = ToolResult(call.id, call.name, content, "error")
            self.record({"k": "result", "round": self.state.round, "id": call.id, "name": call.name, "content": content, "status": "error"})
            return result
        self.record({"k": "call", "round": self.state.round, "id": call.id, "name": call.name, "arguments": call.arguments})
        log.info("tool call %s: %s %s", call.id, call.name, call.arguments[:200])
        t0 = time.monotonic()
        status = "ok"
        try:
            args = json.loads(call.arguments or "{}")
            if not isinstance(args, dict):
                raise ToolError(f"the arguments must be a JSON object, got {type(args).__name__}")
            content = await tool.run(args)
        except ValueError as exc:
            content, status = f"Error: the arguments are not JSON ({exc}); send a JSON object", "error"
        except ToolError as exc:
            content, status = f"Error: {exc}", "error"
        except Exception as exc:
            log.exception("tool %s failed", call.name)
            content, status = f"Error: {call.name} failed: {type(exc).__name__}: {exc}", "error"
        self._tool_seconds = max(self._tool_seconds, time.monotonic() - t0)
        content = cut(note + content)
        self.record({"k": "result", "round": self.state.round, "id": call.id, "name": call.name, "content": content, "status": status})
        return ToolResult(call.id, call.name, content, status)

    async def _observe(self, results: list[ToolResult]) -> None:
        self.state.conversation.steps.append(results)

    async def _finish(self, turn: ModelTurn, accumulated: list[str]) -> RunResult:
        answer = turn.text if turn.text.strip() else (EMPTY_ANSWER if accumulated else "")
        self.state.answer = answer
        for phase in ("verify", "memory-flush"):
            await self.hooks.run(phase, self.ctx(result=answer), _nothing)
        result = RunResult("success", response=self.state.answer, metrics=self.state.metrics)
        await self.hooks.run("complete", self.ctx(result=result), _nothing)
        return result

    def close(self, result: RunResult) -> None:
        """Record the result (a container started again reports it instead of running again); a waiting run has
        none yet (its container is started again to go on)."""
        if result.status != "waiting":
            self.record({"k": "end", "result": result.to_dict()})
        self.journal.close()


async def _nothing() -> None:
    return None


def _turn_from(record: dict[str, Any]) -> ModelTurn:
    calls = [ToolCall(c["id"], c["name"], c.get("arguments", "{}")) for c in record.get("calls", [])]
    return ModelTurn(record.get("text", ""), calls, Usage.from_dict(record.get("usage") or {}),
                     record.get("model", ""), record.get("native"))


def _result_from(d: dict[str, Any]) -> RunResult:
    m = d.get("metrics") or {}
    metrics = Metrics(int(m.get("inputTokens") or 0), int(m.get("outputTokens") or 0), int(m.get("toolCalls") or 0),
                      int(m.get("durationMs") or 0), int(m.get("cachedInputTokens") or 0),
                      int(m.get("modelCalls") or 0), int(m.get("activeMs") or 0),
                      {x["model"]: {k: v for k, v in x.items() if k != "model"} for x in m.get("models") or []})
    return RunResult(d.get("status", "error"), response=d.get("response", ""), error=d.get("error", ""),
                     metrics=metrics)
