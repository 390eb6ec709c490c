"""The agent's loop end to end: ``python -m agentrunner`` against the scripted fake model (OpenAI and Anthropic wire
formats, streaming and not, through the official SDKs), with its tools, policy and journal."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from models.policy import normalize_policy
from tests.agentrunner.helpers import Dirs, executor, run_agent, start_agent
from tests.fake_model import Call, FakeModelServer, Turn, closed_port_url, serve_model
from tests.waiting import wait_for


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path).make()


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with serve_model() as m:
        yield m


def model_env(m: FakeModelServer, provider: str, *, stream: bool = False, **env: str) -> dict[str, str]:
    base = m.root_url if provider == "anthropic" else m.base_url
    key = {"anthropic": "ANTHROPIC_API_KEY"}.get(provider, "OPENAI_API_KEY")
    return {"MODEL_PROVIDER": provider, "MODEL_BASE_URL": base, "MODEL_NAME": "scripted", key: "sk-test-key",
            "LLM_STREAM": "true" if stream else "false", **env}


PROVIDERS = [("openai", False), ("openai", True), ("anthropic", False), ("anthropic", True), ("vllm", False)]
PROVIDER_IDS = ["openai", "openai-sse", "anthropic", "anthropic-sse", "openai-compatible"]


@pytest.mark.parametrize(("provider", "stream"), PROVIDERS, ids=PROVIDER_IDS)
def test_the_same_scripted_run_passes_on_every_provider(dirs: Dirs, model: FakeModelServer, provider: str,
                                                         stream: bool) -> None:
    model.script = [
        Turn(calls=[Call("write_file", {"path": "notes/a.txt", "content": "hello from round one"})]),
        Turn(calls=[Call("read_file", {"path": "notes/a.txt"}), Call("list_directory", {"path": "notes"})]),
        Turn(text="The note says: hello from round one", input_tokens=30, output_tokens=8, cached_tokens=20),
    ]
    run = run_agent(dirs, "Write a note, then read it back.", **model_env(model, provider, stream=stream))

    assert run.returncode == 0, run.stderr[-3000:]
    result = run.result
    assert result["status"] == "success" and result["response"] == "The note says: hello from round one"
    m = result["metrics"]
    assert (m["modelCalls"], m["toolCalls"]) == (3, 3)
    # Usage summed over every call; cached tokens counted inside the input on both wire formats.
    assert (m["inputTokens"], m["outputTokens"], m["cachedInputTokens"], m["totalTokens"]) == (50, 18, 20, 68)
    assert m["models"] == [{"model": "fake-model", "calls": 3, "inputTokens": 50, "outputTokens": 18,
                            "cachedInputTokens": 20}]
    assert (dirs.workspace / "notes" / "a.txt").read_text() == "hello from round one"
    assert len(model.requests) == 3 and all(r.stream == stream for r in model.requests)
    assert model.requests[1].tool_results() == ["Successfully wrote 20 bytes to /workspace/notes/a.txt"]
    read, listing = model.requests[2].tool_results()[-2:]
    assert read == "hello from round one" and listing.endswith("a.txt")
    assert set(model.requests[0].tool_names()) == {"read_file", "write_file", "edit_file", "list_directory",
                                                  "fetch_url"}


def test_the_iteration_cap_ends_the_run_with_an_error_naming_it(dirs: Dirs, model: FakeModelServer) -> None:
    model.script = [Turn(calls=[Call("list_directory", {"path": "."})])]  # a model that never stops
    run = run_agent(dirs, "loop", **model_env(model, "openai", MAX_TOOL_ITERATIONS="3"))

    assert run.returncode == 1
    assert run.result["error"] == "the run reached MAX_TOOL_ITERATIONS=3 model rounds without a final answer"
    assert len(model.requests) == 3 and run.result["metrics"]["toolCalls"] == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_429_then_200_is_retried(dirs: Dirs, model: FakeModelServer, provider: str) -> None:
    model.statuses = [429]
    model.script = [Turn(text="after the retry")]
    run = run_agent(dirs, "hi", **model_env(model, provider))

    assert run.result["status"] == "success" and run.result["response"] == "after the retry", run.stderr[-2000:]
    assert len(model.requests) == 2  # the SDK retried once, and the run counts one model call
    assert run.result["metrics"]["modelCalls"] == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_that_is_down_fails_the_run_naming_the_endpoint(dirs: Dirs, provider: str) -> None:
    url = closed_port_url("" if provider == "anthropic" else "/v1")
    run = run_agent(dirs, "hi", MODEL_PROVIDER=provider, MODEL_BASE_URL=url, MODEL_NAME="m", LLM_MAX_RETRIES="1")

    assert run.returncode == 1
    assert "unreachable at " + url in run.result["error"], run.result["error"]


def test_bad_arguments_unknown_tools_and_oversize_output_are_messages_the_model_reads(
        dirs: Dirs, model: FakeModelServer) -> None:
    (dirs.workspace / "big.txt").write_text("x" * 50_000)
    model.script = [
        Turn(calls=[Call("read_file", "{not json"), Call("no_such_tool", {}), Call("read_file", {"path": 5}),
                    Call("read_file", {"path": "big.txt"}), Call("read_file", "[1, 2]")]),
        Turn(text="carried on"),
    ]
    run = run_agent(dirs, "try things", **model_env(model, "openai"))

    assert run.result["status"] == "success" and run.result["response"] == "carried on"
    bad_json, unknown, wrong_type, big, not_object = model.requests[1].tool_results()
    assert bad_json.startswith("Error: the arguments are not JSON"), bad_json
    assert bad_json.startswith("Error: the arguments are not JSON")
    assert unknown.startswith("Error: unknown tool 'no_such_tool'; the tools are: read_file, write_file")
    assert wrong_type == "Error: argument 'path' must be a string, got int"
    assert len(big) < 8_200 and big.endswith("(truncated mid-line 1 of 1; the line exceeds the 8000-byte cap)")
    assert not_object == "Error: the arguments must be a JSON object, got list"


def test_a_tool_the_runs_policy_denies_is_not_offered_and_never_runs(dirs: Dirs, model: FakeModelServer) -> None:
    model.script = [Turn(calls=[Call("write_file", {"path": "x.txt", "content": "no"})]), Turn(text="ok")]
    run = run_agent(dirs, "write", **model_env(model, "openai", TOOL_POLICY_DENY="write_file,fetch_url"))

    assert run.result["status"] == "success"
    assert set(model.requests[0].tool_names()) == {"read_file", "edit_file", "list_directory"}
    assert model.requests[1].tool_results() == ["denied by the run's toolPolicy.deny (write_file)"]
    assert not (dirs.workspace / "x.txt").exists()


def test_a_run_allow_list_offers_only_what_it_names(dirs: Dirs, model: FakeModelServer) -> None:
    model.script = [Turn(text="ok")]
    run_agent(dirs, "x", **model_env(model, "openai", TOOL_POLICY_ALLOW="read_file,list_directory"))
    assert model.requests[0].tool_names() == ["read_file", "list_directory"]


def _policy(spec: Mapping[str, Any], name: str = "team-policy") -> str:
    """AGENT_TOOL_POLICY as the control plane writes it: its own normalised rules."""
    return normalize_policy({"metadata": {"name": name}, "spec": dict(spec)}).agent_tool_policy()


def test_the_restrictive_template_denies_writes_by_name_and_everything_unlisted(dirs: Dirs,
                                                                               model: FakeModelServer) -> None:
    model.script = [Turn(calls=[Call("write_file", {"path": "x.txt", "content": "no"}),
                                Call("edit_file", {"path": "x.txt", "edits": [{"old_string": "a", "new_string": "b"}]}),
                                Call("read_file", {"path": "r.txt"})]), Turn(text="ok")]
    (dirs.workspace / "r.txt").write_text("readable")
    run_agent(dirs, "x", **model_env(model, "openai", AGENT_TOOL_POLICY=_policy({"template": "Restrictive"})))

    assert model.requests[0].tool_names() == ["read_file", "list_directory"]
    write, edit, read = model.requests[1].tool_results()
    assert write == ('denied by policy team-policy (template Restrictive), rule toolGating (write_file: deny)')
    assert edit == ('denied by policy team-policy (template Restrictive), rule toolGating defaultAction: deny')
    assert read == "readable"
    assert not (dirs.workspace / "x.txt").exists()


def test_an_allowed_tools_list_and_tool_gating_rules_decide_as_the_control_plane_does(
        dirs: Dirs, model: FakeModelServer) -> None:
    model.script = [Turn(text="ok")]
    spec = {"toolGating": {"defaultAction": "allow", "rules": [{"tool": "fetch_url", "action": "deny"}]},
            "allowedTools": ["read_file", "fetch_url", "write_file"]}
    run_agent(dirs, "x", **model_env(model, "openai", AGENT_TOOL_POLICY=_policy(spec)))
    # allowedTools is an allow-list; a tool a rule denies stays denied (models/policy.py normalize_policy).
    assert model.requests[0].tool_names() == ["read_file", "write_file"]


def test_ask_refuses_the_call_where_the_agent_cannot_wait_and_nothing_runs(dirs: Dirs, model: FakeModelServer) -> None:
    marker = dirs.workspace / "ran"
    model.script = [Turn(calls=[Call("execute_command", {"command": f"touch {marker}"})]), Turn(text="ok")]
    with executor(dirs):
        run = run_agent(dirs, "x", **model_env(model, "openai", EXEC_TARGETS="tools",
                                               AGENT_TOOL_POLICY=_policy({"template": "Default"}, "default")))
    assert run.result["status"] == "success"
    assert "execute_command" in model.requests[0].tool_names()  # offered: the model may ask for it
    [answer] = model.requests[1].tool_results()
    assert answer == ("execute_command needs approval under policy default (template Default) (toolGating action: "
                      "ask); this agent cannot wait for a person's decision here (no journal, or a control plane that "
                      "does not start it again after a wait), so the call was not run")
    assert not marker.exists()


def test_echo_drives_tools_through_the_executor_without_a_model_server(dirs: Dirs) -> None:
    task = ('count the nodes\n'
            'tool:execute_command {"command": "echo 3 nodes", "target": "k8s-ops"}\n'
            'tool:write_file {"path": "answer.txt", "content": "3"}')
    with executor(dirs, "k8s-ops"):
        run = run_agent(dirs, task, SYMPOZIUM_SKILL_TARGETS="k8s-ops")
    assert run.result["status"] == "success", run.stderr[-2000:]
    lines = run.result["response"].splitlines()
    assert lines[-2:] == ["tool execute_command (ok): 3 nodes",
                          "tool write_file (ok): Successfully wrote 1 bytes to /workspace/answer.txt"]
    assert run.result["metrics"]["toolCalls"] == 2


def test_a_runner_killed_between_two_tool_calls_continues_from_its_journal(dirs: Dirs,
                                                                           model: FakeModelServer) -> None:
    """SIGKILL while the second command runs; a new runner with the same environment and journal goes on: the
    first command's side effect happened once, the model saw its first request once, and the interrupted command
    (not read-only) is reported to the model instead of being run again."""
    count = dirs.workspace / "count"
    started = dirs.workspace / "second-started"
    model.script = [
        Turn(calls=[Call("execute_command", {"command": f"echo once >> {count}"}, "call-1")]),
        Turn(calls=[Call("execute_command", {"command": f"touch {started}; sleep 30"}, "call-2")]),
        Turn(text="finished after the restart"),
    ]
    env = model_env(model, "openai", EXEC_TARGETS="tools", AGENT_STATE_DIR=str(dirs.state))
    with executor(dirs):
        first = start_agent(dirs, "count", **env)
        try:
            wait_for(started.exists, timeout=60, what="the second command to start")
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.communicate(timeout=30)
        assert len(model.requests) == 2
        second = run_agent(dirs, "count", **env)

    assert second.result["status"] == "success", second.stderr[-3000:]
    assert second.result["response"] == "finished after the restart"
    assert count.read_text() == "once\n"  # the first command ran exactly once
    assert len(model.requests) == 3  # responses 1 and 2 came from the journal, not the model
    first_requests = [r for r in model.requests if not r.tool_results()]
    assert len(first_requests) == 1
    assert model.requests[2].tool_results()[-1].startswith("this call was interrupted")
    m = second.result["metrics"]
    assert (m["modelCalls"], m["toolCalls"]) == (3, 2)  # usage of both containers
    records = [json.loads(line) for line in (dirs.state / "journal.jsonl").read_text().splitlines()]
    assert [r["k"] for r in records] == ["start", "model", "call", "result", "model", "call", "result", "model",
                                         "end"]
    assert records[-1]["active_ms"] >= records[-2]["active_ms"] > 0


def test_a_finished_run_started_again_reports_its_result_without_asking_the_model(
        dirs: Dirs, model: FakeModelServer) -> None:
    model.script = [Turn(text="the answer")]
    env = model_env(model, "openai", AGENT_STATE_DIR=str(dirs.state))
    first = run_agent(dirs, "q", **env)
    again = run_agent(dirs, "q", **env)
    assert first.result["response"] == again.result["response"] == "the answer"
    assert len(model.requests) == 1


def test_a_journal_of_another_task_is_refused(dirs: Dirs) -> None:
    run_agent(dirs, "first task", AGENT_STATE_DIR=str(dirs.state))
    other = run_agent(dirs, "another task", AGENT_STATE_DIR=str(dirs.state))
    assert other.result["status"] == "error"
    assert "belongs to another task" in other.result["error"]


def test_a_skillpack_sidecars_declared_tool_is_offered_and_runs_in_that_sidecar_as_argv(
        dirs: Dirs, model: FakeModelServer) -> None:
    manifest = {"tools": [{"name": "k8s_count", "description": "Count resources of a kind.", "target": "k8s-ops",
                           "exec": ["sh", "-c", 'printf "%s:" "$SKILL_PACK"; printf "[%s]" "$@"; echo " $(cat)"',
                                    "count"],
                           "positionalArgs": ["kind"], "inputMode": "stdin",
                           "parameters": {"type": "object", "properties": {"kind": {"type": "string"}},
                                          "required": ["kind"]}}]}
    model.script = [Turn(calls=[Call("k8s_count", {"kind": "nodes; rm -rf /", "selector": "role=worker"})]),
                    Turn(text="counted")]
    with executor(dirs, "k8s-ops", env={"PATH": os.environ["PATH"], "SKILL_PACK": "k8s-ops"}):
        run = run_agent(dirs, "count", **model_env(model, "openai", SYMPOZIUM_SKILL_TARGETS="k8s-ops",
                                                   AGENT_SIDECAR_TOOLS=json.dumps(manifest)))
    assert run.result["status"] == "success", run.stderr[-2000:]
    assert "k8s_count" in model.requests[0].tool_names()
    # `--` then the positional value as one argument; the other arguments as JSON on stdin.
    assert model.requests[1].tool_results() == ['k8s-ops:[--][nodes; rm -rf /] {"selector": "role=worker"}\n']


def test_skill_params_reach_the_skills_prompt_section(dirs: Dirs, model: FakeModelServer) -> None:
    (dirs.skills / "k8s-ops.md").write_text("Use kubectl.")
    model.script = [Turn(text="ok")]
    run_agent(dirs, "x", **model_env(model, "openai", SYSTEM_PROMPT="Be brief.",
                                     AGENT_SKILL_PARAMS='{"k8s-ops": {"namespace": "prod", "context": "eu"}}'))
    system = model.requests[0].body["messages"][0]["content"]
    assert system == ("Be brief.\n\nYou have these skills (from /skills):\n\n## k8s-ops.md\nUse kubectl.\n\n"
                      "Skill parameters (set for this run):\n- k8s-ops: context=eu, namespace=prod")
