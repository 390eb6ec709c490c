"""The agent container program honours the env and result contract of SPEC §3.5-3.6.

Each test runs ``python -m agentrunner`` as a real subprocess with a clean environment, the
context and IPC directories in a temp dir, and (for the OpenAI-compatible provider) a real
HTTP server on 127.0.0.1 standing in for the model endpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrunner.config import ConfigError, load_config
from agentrunner.duration import parse_duration_seconds
from agentrunner.result import Metrics, RunResult, marker_line
from tests.fake_model import FakeModelServer, serve_model

ROOT = Path(__file__).resolve().parents[2]
MARKER_LINE = re.compile(r"^__SYMPOZIUM_RESULT__(.*)__SYMPOZIUM_END__$")
METRIC_KEYS = {"inputTokens", "outputTokens", "toolCalls", "durationMs"}  # Sympozium's, with their meaning
USAGE_KEYS = {"totalTokens", "cachedInputTokens", "modelCalls", "activeMs"}  # ours (SPEC §9 Usage), integers too


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    result_path: Path
    wall_seconds: float

    def marker_results(self) -> list[dict[str, Any]]:
        """Every marker line on stdout, decoded; each must be a line of its own."""
        found = []
        for line in self.stdout.splitlines():
            if "__SYMPOZIUM_RESULT__" in line:
                m = MARKER_LINE.match(line)
                assert m is not None, f"marker not on its own line: {line!r}"
                found.append(json.loads(m.group(1)))
        return found

    @property
    def result(self) -> dict[str, Any]:
        results = self.marker_results()
        assert results, f"no result marker on stdout; stderr:\n{self.stderr}"
        return results[-1]

    def result_file(self) -> dict[str, Any] | None:
        if not self.result_path.exists():
            return None
        data: dict[str, Any] = json.loads(self.result_path.read_text(encoding="utf-8"))
        return data


RunAgent = Callable[..., Run]


@pytest.fixture
def context_dir(tmp_path: Path) -> Path:
    d = tmp_path / "context"
    d.mkdir()
    return d


@pytest.fixture
def run_agent(tmp_path: Path, context_dir: Path) -> RunAgent:
    """Runs the agent with TASK=task and the given env on top of a minimal clean environment."""

    def run(task: str, **env: str) -> Run:
        full = {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "AGENT_CONTEXT_DIR": str(context_dir),
            "AGENT_IPC_DIR": str(tmp_path / "ipc"),
            "TASK": task,
            **env,
        }
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "agentrunner"], env=full, cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
        return Run(proc.returncode, proc.stdout, proc.stderr,
                   Path(full["AGENT_IPC_DIR"]) / "output" / "result.json", time.monotonic() - started)

    return run


# --- echo provider -------------------------------------------------------------------------


def test_echo_answers_with_the_task_and_the_first_line_of_each_context_file_sorted_by_name(
        run_agent: RunAgent, context_dir: Path) -> None:
    (context_dir / "b.txt").write_text("beta first\nbeta second\n")
    (context_dir / "a.md").write_text("alpha\n")
    (context_dir / "sub").mkdir()
    (context_dir / "sub" / "c.txt").write_text("gamma")

    run = run_agent("  summarise the notes\n", MODEL_PROVIDER="echo")

    assert run.returncode == 0, run.stderr
    assert run.result["status"] == "success"
    assert run.result["error"] == ""
    assert run.result["response"] == (
        "echo: summarise the notes\n"
        "context a.md: alpha\n"
        "context b.txt: beta first\n"
        "context sub/c.txt: gamma"
    )


def test_metrics_carry_the_four_contract_keys_as_integers(run_agent: RunAgent, context_dir: Path) -> None:
    (context_dir / "notes.txt").write_text("three words here\n")

    metrics = run_agent("two words", SYSTEM_PROMPT="be brief").result["metrics"]

    assert set(metrics) == METRIC_KEYS | USAGE_KEYS | {"models"}
    assert all(type(v) is int for k, v in metrics.items() if k != "models")
    assert metrics["models"] == [{"model": "echo", "calls": 1, "inputTokens": metrics["inputTokens"],
                                  "outputTokens": metrics["outputTokens"], "cachedInputTokens": 0}]
    assert metrics["inputTokens"] == 2 + 2 + 3  # system prompt + task + context, in words
    assert metrics["outputTokens"] == len("echo: two words\ncontext notes.txt: three words here".split())
    assert metrics["toolCalls"] == 0
    assert metrics["durationMs"] >= 0


def test_result_json_in_ipc_output_equals_the_marker_json(run_agent: RunAgent) -> None:
    run = run_agent("hello")

    assert run.result_file() == run.result
    assert run.result["response"] == "echo: hello"


def test_stdout_holds_exactly_one_line_the_marker(run_agent: RunAgent) -> None:
    run = run_agent("hello")

    assert run.stdout.endswith("\n")
    assert len(run.stdout.splitlines()) == 1
    assert len(run.marker_results()) == 1


def test_empty_provider_without_base_url_is_echo(run_agent: RunAgent) -> None:
    run = run_agent("hi", MODEL_PROVIDER="", MODEL_NAME="whatever")

    assert run.result["response"] == "echo: hi"


def test_a_missing_context_dir_means_no_context_lines(run_agent: RunAgent, tmp_path: Path) -> None:
    run = run_agent("hi", AGENT_CONTEXT_DIR=str(tmp_path / "does-not-exist"))

    assert run.returncode == 0
    assert run.result["response"] == "echo: hi"


def test_fail_hook_reports_error_with_the_rest_of_the_task_and_exits_1(run_agent: RunAgent) -> None:
    run = run_agent("fail: the database is on fire")

    assert run.returncode == 1
    assert run.result["status"] == "error"
    assert run.result["error"] == "the database is on fire"
    assert run.result["response"] == ""
    assert run.result_file() == run.result


def test_skip_hook_reports_skipped_with_the_reason_and_exits_0(run_agent: RunAgent) -> None:
    run = run_agent("skip:nothing changed since yesterday")

    assert run.returncode == 0
    assert run.result["status"] == "skipped"
    assert run.result["response"] == "nothing changed since yesterday"
    assert run.result["error"] == ""
    assert run.result_file() == run.result


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_hook_exits_with_that_code_leaving_no_marker_and_no_result_file(
        run_agent: RunAgent, code: int) -> None:
    run = run_agent(f"exit:{code}")

    assert run.returncode == code
    assert "__SYMPOZIUM_RESULT__" not in run.stdout
    assert run.result_file() is None


def test_sleep_hook_delays_the_answer_then_handles_the_rest_of_the_task(run_agent: RunAgent) -> None:
    run = run_agent("sleep:0.4 hello after a nap")

    assert run.returncode == 0
    assert run.result["response"] == "echo: hello after a nap"
    assert run.result["metrics"]["durationMs"] >= 400


def test_hooks_chain_after_sleep(run_agent: RunAgent) -> None:
    run = run_agent("sleep:0.1 fail:late failure")

    assert run.returncode == 1
    assert run.result["error"] == "late failure"


def test_run_timeout_bounds_the_whole_run_and_reports_a_timeout_error(run_agent: RunAgent) -> None:
    run = run_agent("sleep:30", RUN_TIMEOUT="500ms")

    assert run.returncode == 1
    assert run.result["status"] == "error"
    assert run.result["error"] == "timeout: the run exceeded RUN_TIMEOUT=500ms"
    assert 400 <= run.result["metrics"]["durationMs"] < 5000
    assert run.wall_seconds < 15
    assert run.result_file() == run.result


@pytest.mark.parametrize(("env", "named"), [
    ({"RUN_TIMEOUT": "5 minutes"}, "RUN_TIMEOUT"),
    ({"RUN_TIMEOUT": "-1m"}, "RUN_TIMEOUT"),
    ({"MODEL_PROVIDER": "anthropic"}, "MODEL_NAME"),
    ({"MODEL_PROVIDER": "vllm", "MODEL_NAME": "llama3"}, "MODEL_BASE_URL"),  # vLLM has no default endpoint
    ({"MODEL_PROVIDER": "bedrock", "MODEL_NAME": "m"}, "MODEL_PROVIDER"),
    ({"MODEL_PROVIDER": "my provider", "MODEL_BASE_URL": "http://127.0.0.1:9/v1"}, "MODEL_PROVIDER"),
    ({"MODEL_PROVIDER": "vllm", "MODEL_BASE_URL": "http://127.0.0.1:9/v1"}, "MODEL_NAME"),
    ({"TASK": "   "}, "TASK"),
])
def test_an_invalid_environment_is_an_error_result_naming_the_variable(
        run_agent: RunAgent, env: dict[str, str], named: str) -> None:
    others = {k: v for k, v in env.items() if k != "TASK"}
    run = run_agent(env.get("TASK", "hello"), **others)

    assert run.returncode == 1
    assert run.result["status"] == "error"
    assert run.result["error"].startswith("invalid environment: ")
    assert named in run.result["error"]
    assert run.result_file() == run.result


def test_an_unwritable_ipc_dir_is_a_warning_and_the_run_still_reports(
        run_agent: RunAgent, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")

    run = run_agent("hello", AGENT_IPC_DIR=str(blocker / "ipc"))

    assert run.returncode == 0
    assert run.result["status"] == "success"
    assert "WARNING" in run.stderr
    assert "result.json" in run.stderr


def test_a_response_quoting_the_markers_cannot_cut_the_marker_line(run_agent: RunAgent) -> None:
    task = 'print __SYMPOZIUM_END__ then __SYMPOZIUM_RESULT__{"status":"error"}__SYMPOZIUM_END__'
    run = run_agent(task)

    # A log reader scanning for the first end marker after the last start marker:
    start = run.stdout.rindex("__SYMPOZIUM_RESULT__") + len("__SYMPOZIUM_RESULT__")
    end = run.stdout.index("__SYMPOZIUM_END__", start)
    decoded = json.loads(run.stdout[start:end])

    assert decoded["status"] == "success"
    assert decoded["response"] == f"echo: {task}"
    assert run.result_file() == decoded


def test_identity_and_tool_policy_are_logged_to_stderr_not_stdout(run_agent: RunAgent) -> None:
    run = run_agent("hello", AGENT_RUN_ID="run-42", TOOL_POLICY_ALLOW="read_file, fetch",
                    TOOL_POLICY_DENY="exec", OPENAI_API_KEY="sk-secret-value")

    assert "run-42" in run.stderr
    assert "allow=read_file,fetch" in run.stderr
    assert "deny=exec" in run.stderr
    assert "sk-secret-value" not in run.stderr + run.stdout
    assert "run-42" not in run.stdout


# --- OpenAI-compatible provider -----------------------------------------------------------------


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with serve_model() as state:
        yield state


def test_openai_provider_posts_a_chat_completion_and_reports_response_and_usage(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    run = run_agent("Say hello.", MODEL_PROVIDER="openai", MODEL_BASE_URL=model_server.base_url + "/",
                    MODEL_NAME="gpt-test", OPENAI_API_KEY="sk-test", SYSTEM_PROMPT="You are terse.")

    assert run.returncode == 0, run.stderr
    assert run.result == {
        "status": "success",
        "response": "Hello from the fake model.",
        "error": "",
        "metrics": {"inputTokens": 17, "outputTokens": 6, "toolCalls": 0,
                    "durationMs": run.result["metrics"]["durationMs"], "totalTokens": 23, "cachedInputTokens": 0,
                    "modelCalls": 1, "activeMs": run.result["metrics"]["activeMs"],
                    "models": [{"model": "gpt-test", "calls": 1, "inputTokens": 17, "outputTokens": 6,
                                "cachedInputTokens": 0}]},
    }
    assert run.result_file() == run.result
    [request] = model_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == "Bearer sk-test"
    # The official SDK's request: the model, the messages, and the tools this run offers.
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == [{"role": "system", "content": "You are terse."},
                                        {"role": "user", "content": "Say hello."}]
    assert set(request.tool_names()) == {"read_file", "write_file", "edit_file", "list_directory", "fetch_url"}


def test_empty_provider_with_a_base_url_is_openai_compatible_and_api_key_is_the_fallback_key(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    run = run_agent("Say hello.", MODEL_PROVIDER="", MODEL_BASE_URL=model_server.base_url,
                    MODEL_NAME="local-model", API_KEY="plain-key")

    assert run.result["response"] == "Hello from the fake model."
    [request] = model_server.requests
    assert request.authorization == "Bearer plain-key"
    assert request.body["model"] == "local-model"


def test_ollama_without_a_key_sends_no_authorization_and_gets_the_context_files(
        run_agent: RunAgent, model_server: FakeModelServer, context_dir: Path) -> None:
    (context_dir / "report.txt").write_text("disk usage at 91%\n")

    run = run_agent("Summarise the report.", MODEL_PROVIDER="ollama", MODEL_BASE_URL=model_server.base_url,
                    MODEL_NAME="llama3.2")

    assert run.returncode == 0, run.stderr
    [request] = model_server.requests
    assert request.authorization is None
    [message] = request.body["messages"]  # no SYSTEM_PROMPT, so no system message
    assert message["role"] == "user"
    assert message["content"].startswith("Summarise the report.\n")
    assert "--- report.txt ---\ndisk usage at 91%" in message["content"]


@pytest.mark.parametrize("provider", ["openai-compatible", "custom", "vllm", "lm-studio", "llama-server", "groq",
                                      "some-gateway"])
def test_every_openai_compatible_provider_name_of_sympozium_posts_a_chat_completion(
        run_agent: RunAgent, model_server: FakeModelServer, provider: str) -> None:
    run = run_agent("hi", MODEL_PROVIDER=provider, MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m")

    assert run.returncode == 0, run.stderr
    assert run.result["response"] == "Hello from the fake model."
    [request] = model_server.requests
    assert request.path == "/v1/chat/completions" and request.body["model"] == "m"


def test_azure_openai_posts_to_the_deployment_with_the_api_key_header(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    endpoint = model_server.base_url.removesuffix("/v1")
    path = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-06-01"
    model_server.routes = {path}

    run = run_agent("hi", MODEL_PROVIDER="azure-openai", MODEL_NAME="gpt-4o", OPENAI_API_KEY="",
                    AZURE_OPENAI_ENDPOINT=endpoint, AZURE_OPENAI_API_KEY="az-key", API_KEY="generic")

    assert run.returncode == 0, run.stderr
    [request] = model_server.requests
    assert request.path == path
    assert request.api_key == "az-key" and request.authorization is None


def test_anthropic_posts_to_the_messages_api_with_its_headers_and_reads_text_blocks_and_usage(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    model_server.routes = {"/v1/messages"}
    model_server.reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                          "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "from Claude."}],
                          "stop_reason": "end_turn", "usage": {"input_tokens": 11, "output_tokens": 4}}

    run = run_agent("Say hello.", MODEL_PROVIDER="anthropic", MODEL_NAME="claude-test",
                    MODEL_BASE_URL=model_server.base_url.removesuffix("/v1"), SYSTEM_PROMPT="Be terse.",
                    ANTHROPIC_API_KEY="sk-ant", OPENAI_API_KEY="sk-openai")

    assert run.returncode == 0, run.stderr
    assert run.result["response"] == "Hello from Claude."
    assert (run.result["metrics"]["inputTokens"], run.result["metrics"]["outputTokens"]) == (11, 4)
    [request] = model_server.requests
    # Headers and body are the official SDK's: the Anthropic key (not the OpenAI one), a version, 8192 tokens.
    assert request.path == "/v1/messages"
    assert "sk-ant" in (request.headers.get("x-api-key", ""), (request.authorization or "").removeprefix("Bearer "))
    assert "sk-openai" not in json.dumps(request.headers) and request.headers["anthropic-version"]
    assert (request.body["model"], request.body["max_tokens"], request.body["system"]) == ("claude-test", 8192,
                                                                                          "Be terse.")
    assert request.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}]


def test_an_anthropic_error_names_the_api_and_the_status(run_agent: RunAgent, model_server: FakeModelServer) -> None:
    model_server.routes = {"/v1/messages"}
    model_server.status = 401
    model_server.reply = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}

    run = run_agent("hi", MODEL_PROVIDER="anthropic", MODEL_NAME="c",
                    MODEL_BASE_URL=model_server.base_url.removesuffix("/v1"))

    assert run.returncode == 1
    assert run.result["error"].startswith("Anthropic API error (HTTP 401): ")
    assert "invalid x-api-key" in run.result["error"]


def test_the_providers_own_key_variable_wins_and_an_api_key_secret_key_is_the_last_fallback(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    run_agent("hi", MODEL_PROVIDER="groq", MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m",
              GROQ_API_KEY="groq-key", OPENAI_API_KEY="openai-key")
    run_agent("hi", MODEL_PROVIDER="openai-compatible", MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m",
              PROVIDER_API_KEY="from-apiKey")

    assert [r.authorization for r in model_server.requests] == ["Bearer groq-key", "Bearer from-apiKey"]


def test_a_missing_usage_block_counts_zero_tokens(run_agent: RunAgent, model_server: FakeModelServer) -> None:
    # A well-formed chat completion (the SDK checks its shape) with no `usage` at all.
    model_server.reply = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": "ok"}}]}

    run = run_agent("hi", MODEL_PROVIDER="vllm", MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m")

    assert run.result["status"] == "success"
    assert run.result["metrics"]["inputTokens"] == 0
    assert run.result["metrics"]["outputTokens"] == 0


def test_http_429_is_an_error_naming_the_status_with_a_body_excerpt(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    model_server.status = 429
    model_server.reply = {"error": {"message": "Rate limit reached for gpt-test", "type": "rate_limit"}}

    # A 429 is retried (LLM_MAX_RETRIES, the SDK's backoff); one that lasts ends the run with it.
    run = run_agent("hi", MODEL_PROVIDER="openai", MODEL_BASE_URL=model_server.base_url,
                    MODEL_NAME="gpt-test", OPENAI_API_KEY="sk-test", LLM_MAX_RETRIES="1")

    assert len(model_server.requests) == 2
    assert run.returncode == 1
    assert run.result["status"] == "error"
    assert run.result["error"].startswith("OpenAI-compatible API error (HTTP 429): ")
    assert "Rate limit reached for gpt-test" in run.result["error"]
    assert run.result_file() == run.result


def test_a_body_that_is_not_a_chat_completion_is_an_error(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    model_server.reply = {"unexpected": True}

    run = run_agent("hi", MODEL_PROVIDER="lm-studio", MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m")

    assert run.returncode == 1
    assert run.result["error"].startswith("OpenAI-compatible API returned an unexpected response")


def test_connection_refused_is_an_error_naming_the_endpoint(run_agent: RunAgent) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the agent connects: nothing listens
    base_url = f"http://127.0.0.1:{port}/v1"

    run = run_agent("hi", MODEL_PROVIDER="custom", MODEL_BASE_URL=base_url, MODEL_NAME="m", LLM_MAX_RETRIES="0")

    assert run.returncode == 1
    assert run.result["status"] == "error"
    assert run.result["error"].startswith(f"OpenAI-compatible API unreachable at {base_url}/chat/completions")


def test_a_model_slower_than_run_timeout_is_cut_off_as_a_timeout(
        run_agent: RunAgent, model_server: FakeModelServer) -> None:
    model_server.delay = 20

    run = run_agent("hi", MODEL_PROVIDER="openai", MODEL_BASE_URL=model_server.base_url,
                    MODEL_NAME="gpt-test", RUN_TIMEOUT="1s")

    assert run.returncode == 1
    assert "time" in run.result["error"].lower()
    assert run.wall_seconds < 15


# --- in-process units ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3), ("0", 0), (".5s", 0.5),
])
def test_run_timeout_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "1h 30m", "1d", "-"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_seconds(text)


def test_run_timeout_defaults_to_ten_minutes_and_openai_to_the_public_endpoint() -> None:
    config = load_config({"TASK": "x", "MODEL_PROVIDER": "OpenAI", "MODEL_NAME": "gpt-4o-mini"})

    assert config.run_timeout_seconds == 600
    assert config.provider == "openai"
    assert config.base_url == "https://api.openai.com/v1"


def test_openai_api_key_wins_over_api_key_and_is_kept_out_of_repr() -> None:
    config = load_config({"TASK": "x", "OPENAI_API_KEY": "first", "API_KEY": "second"})

    assert config.api_key == "first"
    assert "first" not in repr(config)


@pytest.mark.parametrize(("provider", "base_url"), [
    ("lm-studio", "http://localhost:1234/v1"), ("ollama", "http://ollama.default.svc:11434/v1"),
    ("llama-server", "http://localhost:8080/v1"), ("unsloth", "http://localhost:8080/v1"),
    ("anthropic", "https://api.anthropic.com"),
])
def test_local_providers_default_to_sympoziums_endpoints(provider: str, base_url: str) -> None:
    assert load_config({"TASK": "x", "MODEL_PROVIDER": provider, "MODEL_NAME": "m"}).base_url == base_url


def test_a_base_url_without_a_scheme_is_refused() -> None:
    with pytest.raises(ConfigError, match="MODEL_BASE_URL"):
        load_config({"TASK": "x", "MODEL_PROVIDER": "ollama", "MODEL_BASE_URL": "ollama:11434", "MODEL_NAME": "m"})


def test_marker_line_json_round_trips_non_ascii_text() -> None:
    result = RunResult("success", response="grüße — 日本語", metrics=Metrics(1, 2, 0, 3))

    m = MARKER_LINE.match(marker_line(result))

    assert m is not None
    assert json.loads(m.group(1))["response"] == "grüße — 日本語"
    assert marker_line(result).isascii()


def test_an_offline_run_does_not_import_the_http_client() -> None:
    """The HTTP client and the model libraries (and whatever they pull in) are imported only for a provider that
    uses them: an echo run's pod starts without any of them, and a run imports only its own provider's family."""
    heavy = ("httpx", "openai", "anthropic", "pydantic_ai", "mcp")
    probe = ("import os, sys, agentrunner.runner as r; os.environ.update(TASK='hi', AGENT_IPC_DIR=sys.argv[1]); "
             f"r.main(); print([m for m in {heavy!r} if m in sys.modules], file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe, tempfile.mkdtemp()], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr
    named = ("import sys; from agentrunner.providers import make_provider; from agentrunner.config import load_config;"
             "make_provider(load_config({'TASK': 'x', 'MODEL_PROVIDER': 'ollama', 'MODEL_NAME': 'm'}), 5);"
             "print([m for m in ('openai', 'anthropic') if m in sys.modules])")
    lazy = subprocess.run([sys.executable, "-c", named], capture_output=True, text=True, check=True, timeout=60)
    assert lazy.stdout.strip() == "['openai']"


def test_skills_under_skills_dir_go_to_the_model_and_are_listed_when_asked(tmp_path: Path) -> None:
    from agentrunner.skills import listing, load_skills, system_with_skills
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "b.md").write_text("beta")
    (skills / "a.md").write_text("alpha")
    (skills / "..data").mkdir()  # a projected volume's own entries are not skills
    found = load_skills({"SKILLS_DIR": str(skills)})
    assert [s.name for s in found] == ["a.md", "b.md"]
    assert system_with_skills("Be brief.", found) == (
        "Be brief.\n\nYou have these skills (from /skills):\n\n## a.md\nalpha\n\n## b.md\nbeta")
    assert listing(found).splitlines() == [
        "skills seen under /skills:",
        "- a.md (5 bytes, sha256 8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8)",
        "- b.md (4 bytes, sha256 f44e64e75f3948e9f73f8dfa94721c4ce8cbb4f265c4790c702b2d41cfbf2753)"]
    assert load_skills({"SKILLS_DIR": str(tmp_path / "none")}) == []


def test_the_skills_reach_the_model_in_the_system_message_and_the_result_lists_them_when_asked(
        run_agent: RunAgent, model_server: FakeModelServer, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "triage.md").write_text("Read the events first.")
    run = run_agent("Say hello.", MODEL_PROVIDER="openai", MODEL_BASE_URL=model_server.base_url, MODEL_NAME="m",
                    SYSTEM_PROMPT="You are terse.", SKILLS_DIR=str(skills), AGENT_LIST_SKILLS="true")
    assert run.returncode == 0, run.stderr
    assert run.result["response"].splitlines() == [
        "Hello from the fake model.", "", "skills seen under /skills:",
        "- triage.md (22 bytes, sha256 " + hashlib.sha256(b"Read the events first.").hexdigest() + ")"]
    [request] = model_server.requests
    assert request.body["messages"][0] == {"role": "system", "content": (
        "You are terse.\n\nYou have these skills (from /skills):\n\n## triage.md\nRead the events first.")}
