"""Phase hooks (each failure rule of the reactive-agents seed, as SPEC §9 states it), the journal's format rules, and
the loop's resume decisions, in process with a scripted model object."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrunner.hooks import PHASES, HookRegistry, PhaseContext, Skipped, StopRun
from agentrunner.journal import Journal, JournalError
from agentrunner.loop import INTERRUPTED, Loop, default_hooks
from agentrunner.policy import ToolPolicy
from agentrunner.providers.base import Conversation, ModelTurn, Prompt, ToolCall, ToolSpec, Usage
from agentrunner.result import RunResult
from agentrunner.tools import Tool, schema

# -- hooks -----------------------------------------------------------------------------------------------------


def _run(registry: HookRegistry, body: Any, phase: str = "act") -> tuple[Any, PhaseContext]:
    ctx = PhaseContext(phase="")
    return asyncio.run(registry.run(phase, ctx, body)), ctx


def test_a_failing_before_hook_skips_the_phase_and_runs_on_error() -> None:
    seen: list[str] = []
    hooks = HookRegistry()

    def refuse(ctx: PhaseContext) -> None:
        raise ValueError("no")

    hooks.register("act", "before", refuse)
    hooks.register("act", "before", lambda ctx: seen.append("second before"))
    hooks.register("act", "on-error", lambda ctx: seen.append(f"on-error saw {ctx.error}"))
    hooks.register("act", "after", lambda ctx: seen.append("after"))

    async def body() -> str:
        seen.append("body")
        return "done"

    result, _ = _run(hooks, body)
    assert isinstance(result, Skipped) and str(result.error) == "no"
    assert seen == ["on-error saw no"]  # no later before hook, no body, no after hook


def test_a_failing_after_hook_is_logged_and_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    hooks = HookRegistry()

    def broken(ctx: PhaseContext) -> None:
        raise RuntimeError("after broke")

    hooks.register("think", "after", broken)
    hooks.register("think", "after", lambda ctx: seen.append(f"next after got {ctx.result}"))
    hooks.register("think", "on-error", lambda ctx: seen.append("on-error"))

    async def body() -> str:
        return "the response"

    result, _ = _run(hooks, body, "think")
    assert result == "the response"
    assert seen == ["next after got the response"]
    assert "after hook broken of phase think failed" in caplog.text


def test_a_failing_on_error_hook_is_logged_and_never_masks_the_original_error(
        caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    hooks = HookRegistry()

    def broken(ctx: PhaseContext) -> None:
        raise RuntimeError("on-error broke")

    hooks.register("observe", "on-error", broken)
    hooks.register("observe", "on-error", lambda ctx: seen.append(f"second on-error saw {ctx.error}"))

    async def body() -> None:
        raise KeyError("the original")

    with pytest.raises(KeyError, match="the original"):
        _run(hooks, body, "observe")
    assert seen == ["second on-error saw 'the original'"]
    assert "on-error hook broken of phase observe failed (the original error stands" in caplog.text


def test_hooks_run_in_registration_order_and_may_be_async() -> None:
    order: list[int] = []
    hooks = HookRegistry()

    async def second(ctx: PhaseContext) -> None:
        await asyncio.sleep(0)
        order.append(2)

    hooks.register("verify", "before", lambda ctx: order.append(1))
    hooks.register("verify", "before", second)
    hooks.register("verify", "before", lambda ctx: order.append(3))

    async def body() -> None:
        order.append(4)

    _run(hooks, body, "verify")
    assert order == [1, 2, 3, 4]


def test_unknown_phases_and_timings_are_refused() -> None:
    assert PHASES == ("bootstrap", "guardrail", "cost-route", "strategy", "think", "act", "observe", "verify",
                      "memory-flush", "complete")
    with pytest.raises(ValueError, match="unknown phase"):
        HookRegistry().register("plan", "before", lambda ctx: None)
    with pytest.raises(ValueError, match="unknown timing"):
        HookRegistry().register("act", "around", lambda ctx: None)  # type: ignore[arg-type]


def test_installed_entry_points_register_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in installed as a distribution with an `agentrun.phase_hooks` entry point registers its hooks."""
    (tmp_path / "audit_plugin.py").write_text(
        "def register(registry):\n"
        "    registry.register('act', 'before', lambda ctx: ctx.data.setdefault('audited', []).append(ctx.call))\n")
    dist = tmp_path / "audit_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: audit-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[agentrun.phase_hooks]\naudit = audit_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooks = HookRegistry()
    assert hooks.load_entry_points() == ["audit"]
    ctx = PhaseContext(phase="", call="the call")

    async def body() -> None:
        return None

    asyncio.run(hooks.run("act", ctx, body))
    assert ctx.data["audited"] == ["the call"]
    sys.modules.pop("audit_plugin", None)


# -- the loop with a scripted model object ------------------------------------------------------------------------

class Scripted:
    name = "scripted"
    endpoint = "memory"

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = turns
        self.asked = 0

    async def respond(self, conversation: Conversation, tools: list[ToolSpec]) -> ModelTurn:
        self.asked += 1
        return self.turns[min(self.asked - 1, len(self.turns) - 1)]


def _loop(model: Scripted, tools: list[Tool], state: Path | None, *, hooks: HookRegistry | None = None,
          policy: ToolPolicy | None = None, timeout: float = 60) -> Loop:
    policy = policy or ToolPolicy()
    return Loop(model=model, tools=tools, policy=policy, hooks=hooks or default_hooks(policy),
                journal=Journal(state), conversation=Conversation(Prompt("sys", "the task", [])), max_rounds=10,
                run_timeout=timeout, run_timeout_text=f"{timeout:g}s")


def _finish(loop: Loop) -> RunResult:
    result = asyncio.run(loop.run())
    loop.close(result)
    return result


def _counting_tool(name: str, runs: list[str], *, read_only: bool) -> Tool:
    async def run(args: dict[str, Any]) -> str:
        runs.append(name)
        return f"{name} ran"

    return Tool(name, name, schema({}, []), run, read_only=read_only)


def _started_not_finished(state: Path, call: ToolCall) -> None:
    """A journal as a container killed while `call` ran leaves it: the response, the call's start, no result."""
    j = Journal(state)
    j.open("the task")
    j.append({"k": "model", "round": 1, "text": "", "calls": [{"id": call.id, "name": call.name,
                                                              "arguments": call.arguments}],
              "usage": {"input": 5, "output": 2, "cached": 0}, "model": "m", "native": None}, active_ms=100)
    j.append({"k": "call", "round": 1, "id": call.id, "name": call.name, "arguments": call.arguments},
             active_ms=120)
    j.close()


@pytest.mark.parametrize(("read_only", "expected_runs", "answer"), [
    (True, ["probe"], "probe ran"),
    (False, [], INTERRUPTED),
])
def test_a_started_call_without_a_result_is_run_again_only_if_read_only(tmp_path: Path, read_only: bool,
                                                                         expected_runs: list[str], answer: str) -> None:
    _started_not_finished(tmp_path, ToolCall("c1", "probe", "{}"))
    runs: list[str] = []
    model = Scripted([ModelTurn("all done")])
    loop = _loop(model, [_counting_tool("probe", runs, read_only=read_only)], tmp_path)
    result = _finish(loop)
    assert result.status == "success" and result.response == "all done"
    assert runs == expected_runs
    assert model.asked == 1  # round 1's response came from the journal
    assert loop.state.conversation.steps[1][0].content == answer  # type: ignore[index]
    assert result.metrics.model_calls == 2 and result.metrics.input_tokens == 5


def test_a_torn_last_record_is_dropped_and_the_journal_goes_on(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open("t")
    j.append({"k": "model", "round": 1, "text": "hi", "calls": [], "usage": {}, "model": "m"}, active_ms=5)
    j.close()
    with open(tmp_path / "journal.jsonl", "ab") as fh:
        fh.write(b'{"k":"model","round":2,"te')  # the process died mid-write
    replay = Journal(tmp_path).open("t")
    assert len(replay.turns) == 1 and replay.active_ms == 5
    lines = (tmp_path / "journal.jsonl").read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b"\n") for line in lines) and len(lines) == 2


def test_a_journal_of_another_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").write_text(json.dumps({"k": "start", "v": 99, "task": "x"}) + "\n")
    with pytest.raises(JournalError, match="version 99"):
        Journal(tmp_path).open("t")


def test_a_round_appends_only_its_own_records(tmp_path: Path) -> None:
    """journal_bytes_per_round stays flat: round 10 writes no more than round 2 (no copy of the history)."""
    runs: list[str] = []
    turns = [ModelTurn("", [ToolCall(f"c{i}", "probe", "{}")], Usage(10, 2), "m") for i in range(9)]
    model = Scripted([*turns, ModelTurn("done")])
    journal = tmp_path / "journal.jsonl"
    sizes: list[int] = []

    def measure(ctx: PhaseContext) -> None:
        sizes.append(journal.stat().st_size)

    hooks = default_hooks(ToolPolicy())
    hooks.register("observe", "after", measure)
    _finish(_loop(model, [_counting_tool("probe", runs, read_only=True)], tmp_path, hooks=hooks))
    per_round = [b - a for a, b in itertools.pairwise(sizes)]
    assert len(per_round) == 8 and max(per_round) - min(per_round) < 20, per_round


def test_run_timeout_counts_the_active_time_of_earlier_containers(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open("the task")
    j.append({"k": "model", "round": 1, "text": "", "calls": [], "usage": {}, "model": "m"}, active_ms=61_000)
    j.close()
    result = _finish(_loop(Scripted([ModelTurn("late")]), [], tmp_path, timeout=60))
    assert result.status == "error" and result.error == "timeout: the run exceeded RUN_TIMEOUT=60s"


def test_the_policy_is_a_before_act_hook_and_a_denied_call_never_runs(tmp_path: Path) -> None:
    runs: list[str] = []
    policy = ToolPolicy(name="p", deny=("probe",))
    model = Scripted([ModelTurn("", [ToolCall("c1", "probe", "{}")]), ModelTurn("ok")])
    loop = _loop(model, [_counting_tool("probe", runs, read_only=False)], None, policy=policy)
    assert loop.state.offered == []
    _finish(loop)
    assert runs == []
    assert loop.state.conversation.steps[1][0].content == "denied by policy p, rule toolGating (probe: deny)"  # type: ignore[index]


def test_a_hook_can_stop_the_run() -> None:
    hooks = default_hooks(ToolPolicy())

    def guard(ctx: PhaseContext) -> None:
        raise StopRun("the task asks for something forbidden")

    hooks.register("guardrail", "before", guard)
    result = _finish(_loop(Scripted([ModelTurn("never")]), [], None, hooks=hooks))
    assert (result.status, result.error) == ("error", "the task asks for something forbidden")


def test_usage_accounting_is_an_after_think_hook() -> None:
    hooks = default_hooks(ToolPolicy())
    model = Scripted([ModelTurn("", [ToolCall("c1", "nope", "{}")], Usage(10, 3, 4), "a"),
                      ModelTurn("done", [], Usage(20, 5, 0), "b")])
    result = _finish(_loop(model, [], None, hooks=hooks))
    m = result.metrics
    assert (m.input_tokens, m.output_tokens, m.cached_input_tokens, m.model_calls) == (30, 8, 4, 2)
    assert m.models == {"a": {"calls": 1, "inputTokens": 10, "outputTokens": 3, "cachedInputTokens": 4},
                        "b": {"calls": 1, "inputTokens": 20, "outputTokens": 5, "cachedInputTokens": 0}}


def test_a_call_id_a_model_reuses_in_a_later_round_is_not_answered_with_the_earlier_result(tmp_path: Path) -> None:
    """Local servers often number tool calls per response (`call_0` every round): a result recorded for round 1's
    `call_0` must not answer round 2's `call_0` after a restart."""
    j = Journal(tmp_path)
    j.open("the task")
    for n, tool in ((1, "first"), (2, "second")):
        j.append({"k": "model", "round": n, "text": "", "calls": [{"id": "call_0", "name": tool, "arguments": "{}"}],
                  "usage": {}, "model": "m"}, active_ms=10 * n)
        j.append({"k": "call", "round": n, "id": "call_0", "name": tool, "arguments": "{}"}, active_ms=10 * n + 1)
        if n == 1:
            j.append({"k": "result", "round": 1, "id": "call_0", "name": tool, "content": "first ran",
                      "status": "ok"}, active_ms=12)
    j.close()
    runs: list[str] = []
    loop = _loop(Scripted([ModelTurn("done")]), [_counting_tool("first", runs, read_only=False),
                                                 _counting_tool("second", runs, read_only=False)], tmp_path)
    assert _finish(loop).status == "success"
    assert runs == []
    steps = loop.state.conversation.steps
    assert steps[1][0].content == "first ran" and steps[3][0].content == INTERRUPTED  # type: ignore[index]
