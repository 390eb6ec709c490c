"""A retried run's attempts (SPEC §4, `lifecycle.retry`): how the gate decided each, and what each agent used.

A retry verdict sends an attempt back while attempts and the chain's token budget last; the status
keeps the last few attempts, and the run's token usage is the sum over all of them. Pure bookkeeping
for AgentRunWorkflow, which counts the attempts itself (their number names its steps): no I/O, no
clock.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.agentrun import AttemptRecord, ModelUsage, TokenUsage
    from models.gate import ATTEMPT_REASON_MAX_BYTES, ATTEMPTS_KEPT, GateView, RetryChance, cut_utf8
    from models.pricing import MODELS_KEPT, total
    from models.resolve import ResolvedRetry
    from models.steps import Metrics


class Attempts:
    def __init__(self) -> None:
        self._decided: list[AttemptRecord] = []  # how the gate decided each attempt (runs with lifecycle.retry)
        self._metrics: list[Metrics] = []  # each attempt's agent's usage: the run's is their sum

    def ran(self, metrics: Metrics) -> None:
        """An attempt's agent ended, having used this much."""
        self._metrics.append(metrics)

    def chance(self, policy: ResolvedRetry | None, attempt: int) -> tuple[RetryChance, str]:
        """What a retry verdict would mean now: no lifecycle.retry (a reject), another attempt, or none left."""
        if policy is None:
            return "off", ""
        if attempt >= policy.max_attempts:
            return "exhausted", f"maxAttempts {policy.max_attempts} reached"
        used = sum(m.input_tokens + m.output_tokens for m in self._metrics)
        if policy.max_chain_tokens is not None and used >= policy.max_chain_tokens:
            return "exhausted", f"maxChainTokens {policy.max_chain_tokens} reached: {used} tokens used"
        return "again", ""

    def decided(self, attempt: int, label: str, view: GateView, reason: str, agent: Metrics) -> None:
        """Attempt `attempt`'s gate resolved as `view` says; `agent`: its agent's usage, if it was not recorded."""
        m = self._metrics[-1] if self._metrics else agent
        self._decided.append(AttemptRecord(
            attempt=attempt, verdict=label, decided_by=view.decided_by, decided_at=view.decided_at,
            reason=cut_utf8(reason, ATTEMPT_REASON_MAX_BYTES), tokens=m.input_tokens + m.output_tokens))

    @property
    def any_decided(self) -> bool:
        return bool(self._decided)

    def kept(self) -> list[AttemptRecord] | None:
        """The attempts history as the status keeps it (the last few), or None before any attempt was decided."""
        return list(self._decided[-ATTEMPTS_KEPT:]) or None

    def usage_now(self, running: Metrics) -> TokenUsage:
        """The run's token usage while an attempt's agent is parked: the ended attempts' and `running`'s so far."""
        return self._total([*self._metrics, running])

    def usage(self, agent: Metrics) -> TokenUsage:
        """The run's token usage: summed over the attempts (`agent`'s alone if no attempt's was recorded). An attempt
        whose agent was started again reports its restarts' usage too: the agent adds up every container's model
        calls from its journal, and a lost container reports nothing. Its cost is the sum of what the worker priced
        each attempt at when it ended (fixed then: later price changes do not change it), absent if any attempt's
        tokens had no price; per model, the same sums (at most MODELS_KEPT models)."""
        return self._total(self._metrics or [agent])

    @staticmethod
    def _total(every: list[Metrics]) -> TokenUsage:
        m = Metrics(input_tokens=sum(x.input_tokens for x in every), output_tokens=sum(x.output_tokens for x in every),
                    tool_calls=sum(x.tool_calls for x in every), duration_ms=sum(x.duration_ms for x in every),
                    cached_input_tokens=sum(x.cached_input_tokens for x in every))
        priced = [x for x in every if x.input_tokens or x.output_tokens]
        return TokenUsage(input_tokens=m.input_tokens, output_tokens=m.output_tokens,
                          total_tokens=m.input_tokens + m.output_tokens, tool_calls=m.tool_calls,
                          duration_ms=m.duration_ms, cached_input_tokens=m.cached_input_tokens,
                          estimated_cost_usd=total([x.cost_usd for x in priced]) if priced else None,
                          models=_by_model(every))


def _by_model(every: list[Metrics]) -> list[ModelUsage] | None:
    out: dict[str, ModelUsage] = {}
    costs: dict[str, list[str | None]] = {}
    for x in every:
        for u in x.models:
            m = out.get(u.model)
            if m is None:
                if len(out) >= MODELS_KEPT:
                    continue
                m = out[u.model] = ModelUsage(model=u.model)
            m.calls += u.calls
            m.input_tokens += u.input_tokens
            m.output_tokens += u.output_tokens
            m.cached_input_tokens += u.cached_input_tokens
            costs.setdefault(u.model, []).append(u.cost_usd)
    for name, m in out.items():
        m.estimated_cost_usd = total(costs[name])
    return list(out.values()) or None
