"""Asking before acting, the agent's side (SPEC §10): the canonical JSON that binds a decision to the arguments
(RFC 8785's own test vectors), a call parked instead of run, and a container started again with the decisions —
approved calls run once, rejected ones answer the model with who and why, edited ones run with the new arguments,
and the model is never asked again for a response the journal holds."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from agentrunner.approvals import (
    ARGUMENTS_MAX_BYTES,
    Decision,
    NotCanonical,
    Resume,
    canonical,
    canonical_arguments,
    parse_json,
    resume_from_env,
    sha256_hex,
    waits_from_env,
)
from agentrunner.config import ConfigError
from agentrunner.journal import Journal
from agentrunner.loop import Loop, default_hooks
from agentrunner.policy import ToolPolicy
from agentrunner.providers.base import Conversation, ModelTurn, Prompt, ToolCall, ToolSpec
from agentrunner.result import RunResult
from agentrunner.tools import Tool, schema

from .helpers import Dirs, run_agent

# -- canonical JSON ---------------------------------------------------------------------------------------------

# RFC 8785 §3.2.2.3: IEEE 754 doubles (as hex) and the text ECMAScript, and so JCS, gives them.
NUMBERS = {
    "0000000000000000": "0", "8000000000000000": "0", "0000000000000001": "5e-324",
    "8000000000000001": "-5e-324", "7fefffffffffffff": "1.7976931348623157e+308",
    "ffefffffffffffff": "-1.7976931348623157e+308", "4340000000000000": "9007199254740992",
    "c340000000000000": "-9007199254740992", "4430000000000000": "295147905179352830000",
    "44b52d02c7e14af5": "9.999999999999997e+22", "44b52d02c7e14af6": "1e+23",
    "44b52d02c7e14af7": "1.0000000000000001e+23", "444b1ae4d6e2ef4e": "999999999999999700000",
    "444b1ae4d6e2ef4f": "999999999999999900000", "444b1ae4d6e2ef50": "1e+21",
    "3eb0c6f7a0b5ed8c": "9.999999999999997e-7", "3eb0c6f7a0b5ed8d": "0.000001",
    "41b3de4355555553": "333333333.3333332", "41b3de4355555554": "333333333.33333325",
    "41b3de4355555555": "333333333.3333333", "41b3de4355555556": "333333333.3333334",
    "41b3de4355555557": "333333333.33333343", "becbf647612f3696": "-0.0000033333333333333333",
    "43143ff3c1cb0959": "1424953923781206.2",
}


@pytest.mark.parametrize(("bits", "text"), NUMBERS.items())
def test_numbers_are_written_as_rfc_8785_says(bits: str, text: str) -> None:
    assert canonical(struct.unpack(">d", bytes.fromhex(bits))[0]) == text


def test_the_rfc_8785_sample_object_is_canonicalised_byte_for_byte() -> None:
    raw = ('{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n'
           '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
           '  "literals": [null, true, false]\n}')
    assert canonical(parse_json(raw)) == ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,'
                                          '0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')


def test_members_are_sorted_by_utf16_code_units_and_integers_as_doubles() -> None:
    # U+1F600 (a surrogate pair, D83D...) sorts before U+FB01 in UTF-16, after it by code point.
    assert canonical({"\ufb01": 1, "\U0001f600": 2, "a": 3}) == '{"a":3,"\U0001f600":2,"\ufb01":1}'
    assert canonical({"n": 9007199254740993}) == '{"n":9007199254740992}'
    assert canonical_arguments(' { "b" : [1, 2.0], "a" : "x" } ') == '{"a":"x","b":[1,2]}'


@pytest.mark.parametrize("text", ['{"n": NaN}', '{"n": Infinity}', '[1]', '"s"', '{"s": "\\ud800"}', "{"])
def test_what_is_no_json_object_has_no_canonical_arguments(text: str) -> None:
    with pytest.raises(ValueError):
        canonical_arguments(text)
    assert issubclass(NotCanonical, ValueError)


def test_the_hash_is_sha256_of_the_canonical_text() -> None:
    text = canonical_arguments('{"command": "echo hi"}')
    assert sha256_hex(text) == hashlib.sha256(b'{"command":"echo hi"}').hexdigest()


# -- the environment ----------------------------------------------------------------------------------------------

def test_resume_and_waits_are_read_and_checked_naming_the_field() -> None:
    assert waits_from_env({"AGENT_WAITS": "tool-approval"}) == frozenset({"tool-approval"})
    with pytest.raises(ConfigError, match="AGENT_WAITS names sub-agents"):
        waits_from_env({"AGENT_WAITS": "sub-agents"})
    good = {"kind": "tool-approval", "round": 2, "decisions": [
        {"callId": "c1", "action": "edit", "argumentsSha256": "h", "arguments": '{"a":1}', "decidedBy": "alice"}]}
    resume = resume_from_env({"AGENT_RESUME": json.dumps(good)})
    assert resume == Resume("tool-approval", 2, (Decision("c1", "edit", "h", '{"a":1}', "", "alice", ""),))
    for bad, field in ((dict(good, round=0), "round"), (dict(good, decisions=[{"callId": "c1", "action": "run"}]),
                                                        "decisions[0].action"),
                       (dict(good, decisions=[{"callId": "c1", "action": "edit", "arguments": '{ "a": 1 }'}]),
                        "decisions[0].arguments is not canonical")):
        with pytest.raises(ConfigError, match=re.escape(f"AGENT_RESUME.{field}")):
            resume_from_env({"AGENT_RESUME": json.dumps(bad)})


# -- the loop ----------------------------------------------------------------------------------------------------

class Scripted:
    name = "scripted"
    endpoint = "memory"

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = turns
        self.asked = 0
        self.seen: list[Conversation] = []

    async def respond(self, conversation: Conversation, tools: list[ToolSpec]) -> ModelTurn:
        self.asked += 1
        self.seen.append(conversation)
        return self.turns[min(self.asked - 1, len(self.turns) - 1)]


ASK = ToolPolicy(name="strict", ask=("act",))


def _tool(runs: list[dict[str, Any]]) -> Tool:
    async def run(args: dict[str, Any]) -> str:
        runs.append(args)
        return f"acted on {args.get('target')}"

    return Tool("act", "changes things", schema({}, []), run)


def _peek(runs: list[str]) -> Tool:
    async def run(args: dict[str, Any]) -> str:
        runs.append("peek")
        return "peeked"

    return Tool("peek", "reads", schema({}, []), run, read_only=True)


def _container(model: Scripted, state: Path | None, tools: list[Tool], *, waits: bool = True,
               resume: Resume | None = None) -> tuple[RunResult, Loop]:
    """One container of the run: a loop over the journal in `state`, to its end."""
    loop = Loop(model=model, tools=tools, policy=ASK, hooks=default_hooks(ASK), journal=Journal(state),
                conversation=Conversation(Prompt("sys", "the task", [])), max_rounds=10, run_timeout=60,
                run_timeout_text="60s", waits=frozenset({"tool-approval"}) if waits else frozenset(), resume=resume)
    result = asyncio.run(loop.run())
    loop.close(result)
    return result, loop


def _script() -> list[ModelTurn]:
    return [ModelTurn("", [ToolCall("c1", "act", '{"target": "prod"}'), ToolCall("c2", "peek", "{}")]),
            ModelTurn("done")]


def _decide(result: RunResult, action: str, **kw: str) -> Resume:
    assert result.wait is not None
    (call,) = result.wait.calls
    return Resume("tool-approval", result.wait.round, (Decision(call.id, action, kw.pop("sha256", call.sha256),  # type: ignore[arg-type]
                                                                **kw),))


def test_a_call_that_needs_approval_is_journaled_not_run_and_the_container_ends_waiting(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    peeked: list[str] = []
    model = Scripted(_script())
    result, _ = _container(model, tmp_path, [_tool(acted), _peek(peeked)])
    assert result.status == "waiting" and result.exit_code == 0
    assert acted == [] and peeked == ["peek"], "the round's other calls run; the one that needs approval does not"
    assert result.wait is not None and result.wait.round == 1
    (call,) = result.wait.calls
    assert (call.id, call.tool, call.arguments) == ("c1", "act", '{"target":"prod"}')
    assert call.sha256 == hashlib.sha256(b'{"target":"prod"}').hexdigest()
    assert result.to_dict()["wait"]["calls"] == [{"id": "c1", "tool": "act", "arguments": '{"target":"prod"}',
                                                  "argumentsSha256": call.sha256}]
    replay = Journal(tmp_path).open("the task")
    assert replay.end is None, "a waiting run has no result yet: the next container goes on"
    assert replay.waits[1]["calls"][0]["id"] == "c1"


def test_an_approved_call_runs_once_and_the_model_is_not_asked_again_for_its_round(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    peeked: list[str] = []
    model = Scripted(_script())
    first, _ = _container(model, tmp_path, [_tool(acted), _peek(peeked)])
    resume = _decide(first, "approve", decided_by="alice", source="api")
    result, loop = _container(model, tmp_path, [_tool(acted), _peek(peeked)], resume=resume)
    assert (result.status, result.response) == ("success", "done")
    assert acted == [{"target": "prod"}] and peeked == ["peek"], "each call ran exactly once"
    assert model.asked == 2, "round 1's response came from the journal; only the final answer was asked for"
    answers = {r.call_id: r.content for r in loop.state.conversation.steps[1]}  # type: ignore[union-attr]
    assert answers == {"c1": "acted on prod", "c2": "peeked"}
    # A third container (its pod lost after the end) neither runs nor asks anything again.
    again, _ = _container(model, tmp_path, [_tool(acted), _peek(peeked)], resume=resume)
    assert again.response == "done" and acted == [{"target": "prod"}] and model.asked == 2


def test_a_rejected_call_answers_the_model_with_who_and_why_and_never_runs(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    model = Scripted(_script())
    first, _ = _container(model, tmp_path, [_tool(acted), _peek([])])
    result, loop = _container(model, tmp_path, [_tool(acted), _peek([])],
                              resume=_decide(first, "reject", decided_by="bob", reason="not on prod"))
    assert result.status == "success" and acted == []
    c1 = loop.state.conversation.steps[1][0]  # type: ignore[index]
    assert (c1.content, c1.status) == ("rejected by bob: not on prod", "rejected")
    assert model.seen[-1] is loop.state.conversation, "the model read the answer in its next request"


def test_an_edited_call_runs_with_the_edited_arguments_and_the_model_is_told(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    model = Scripted(_script())
    first, _ = _container(model, tmp_path, [_tool(acted), _peek([])])
    result, loop = _container(model, tmp_path, [_tool(acted), _peek([])],
                              resume=_decide(first, "edit", arguments='{"target":"staging"}', decided_by="carol"))
    assert result.status == "success" and acted == [{"target": "staging"}]
    c1 = loop.state.conversation.steps[1][0]  # type: ignore[index]
    assert c1.content == ('(the arguments were edited by carol before the call ran; it ran with {"target":"staging"})\n'
                          "acted on staging")
    replay = Journal(tmp_path).open("the task")
    assert replay.started["1/c1"]["arguments"] == '{"target":"staging"}', "the journal records what ran"


def test_a_decision_for_other_arguments_is_no_decision_and_the_call_waits_again(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    model = Scripted(_script())
    first, _ = _container(model, tmp_path, [_tool(acted), _peek([])])
    result, _ = _container(model, tmp_path, [_tool(acted), _peek([])],
                           resume=_decide(first, "approve", sha256="0" * 64))
    assert result.status == "waiting" and acted == []
    assert model.asked == 1


def test_a_timed_out_approval_tells_the_model_it_timed_out(tmp_path: Path) -> None:
    model = Scripted(_script())
    first, _ = _container(model, tmp_path, [_tool([]), _peek([])])
    result, loop = _container(model, tmp_path, [_tool([]), _peek([])], resume=_decide(
        first, "reject", source="timeout", decided_by="timeout",
        reason="the approval timed out after 5s (toolApproval.onTimeout: deny)"))
    assert result.status == "success"
    assert loop.state.conversation.steps[1][0].content == (  # type: ignore[index]
        "not run: the approval timed out after 5s (toolApproval.onTimeout: deny)")


def test_two_rounds_of_approvals_in_one_run(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    model = Scripted([ModelTurn("", [ToolCall("c1", "act", '{"target": "a"}')]),
                      ModelTurn("", [ToolCall("c2", "act", '{"target": "b"}')]), ModelTurn("both done")])
    tools = [_tool(acted)]
    first, _ = _container(model, tmp_path, tools)
    second, _ = _container(model, tmp_path, tools, resume=_decide(first, "approve", decided_by="alice"))
    assert second.status == "waiting" and second.wait is not None and second.wait.round == 2
    third, _ = _container(model, tmp_path, tools, resume=_decide(second, "approve", decided_by="alice"))
    assert (third.status, third.response) == ("success", "both done")
    assert acted == [{"target": "a"}, {"target": "b"}] and model.asked == 3


def test_where_the_agent_cannot_wait_the_call_is_refused_as_before(tmp_path: Path) -> None:
    acted: list[dict[str, Any]] = []
    for state, waits in ((None, True), (tmp_path, False)):
        result, loop = _container(Scripted(_script()), state, [_tool(acted), _peek([])], waits=waits)
        assert result.status == "success" and acted == []
        assert "cannot wait for a person's decision here" in loop.state.conversation.steps[1][0].content  # type: ignore[index]


def test_arguments_too_large_to_review_are_refused_not_parked(tmp_path: Path) -> None:
    big = json.dumps({"target": "x" * ARGUMENTS_MAX_BYTES})
    model = Scripted([ModelTurn("", [ToolCall("c1", "act", big)]), ModelTurn("ok")])
    result, loop = _container(model, tmp_path, [_tool([])])
    assert result.status == "success"
    assert "more than an approver is asked to review" in loop.state.conversation.steps[1][0].content  # type: ignore[index]


def test_the_agent_program_parks_and_resumes_through_its_environment(tmp_path: Path) -> None:
    """`python -m agentrunner` as the agent container runs it: AGENT_WAITS lets it park (the marker says waiting,
    with the call), AGENT_RESUME brings the decision; the echo model's write_file ran once, with the edit."""
    dirs = Dirs(tmp_path).make()
    env = {"AGENT_STATE_DIR": str(dirs.state), "AGENT_WAITS": "tool-approval",
           "AGENT_TOOL_POLICY": json.dumps({"name": "p", "ask": ["write_file"]})}
    task = 'save it\ntool:write_file {"path": "out.txt", "content": "one"}'
    first = run_agent(dirs, task, **env)
    assert first.returncode == 0, first.stderr[-2000:]
    marker = first.result
    assert marker["status"] == "waiting" and not (dirs.workspace / "out.txt").exists()
    (call,) = marker["wait"]["calls"]
    assert call["arguments"] == '{"content":"one","path":"out.txt"}'
    edited = '{"content":"two","path":"out.txt"}'
    resume = {"kind": "tool-approval", "round": marker["wait"]["round"], "decisions": [
        {"callId": call["id"], "action": "edit", "argumentsSha256": call["argumentsSha256"], "arguments": edited,
         "decidedBy": "alice", "source": "api"}]}
    second = run_agent(dirs, task, **env, AGENT_RESUME=json.dumps(resume))
    assert second.result["status"] == "success", second.stderr[-2000:]
    assert (dirs.workspace / "out.txt").read_text() == "two"
    assert "tool write_file (ok): (the arguments were edited by alice" in second.result["response"]
