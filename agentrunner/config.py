"""The agent container's environment contract, read once into a typed ``Config``.

The workflow sets these on the ``agent`` container (SPEC §3.5); reading them in one place
means every other module works from validated values, and a bad value becomes one clear
error result instead of a crash halfway through a run.

Variables read:

- ``TASK`` — the prompt (the user message). ``SYSTEM_PROMPT`` — the system message.
- ``MODEL_PROVIDER`` — ``echo``; ``openai``, ``ollama``, ``lm-studio``, ``vllm``, ``custom``
  (all spoken to as OpenAI-compatible ``/chat/completions``); empty means OpenAI-compatible
  when ``MODEL_BASE_URL`` is set, else ``echo``.
- ``MODEL_NAME``, ``MODEL_BASE_URL`` (``openai`` defaults to https://api.openai.com/v1;
  the other OpenAI-compatible providers need it set), ``THINKING_MODE`` (logged only:
  OpenAI-compatible servers disagree on reasoning parameters, so none is sent).
- ``OPENAI_API_KEY``, else ``API_KEY`` — sent as ``Authorization: Bearer`` when set.
- ``RUN_TIMEOUT`` — Go duration bounding the whole run (default ``10m``, as SPEC §3.7).
- ``AGENT_RUN_ID``, ``INSTANCE_NAME``, ``AGENT_NAMESPACE``, ``AGENT_ID``, ``SESSION_KEY`` —
  identifiers, logged.
- ``TOOL_POLICY_ALLOW`` / ``TOOL_POLICY_DENY`` — comma lists, logged (this runner offers the
  model no tools, so there is nothing to enforce).
- ``AGENT_CONTEXT_DIR`` (default ``/workspace/context``) and ``AGENT_IPC_DIR`` (default
  ``/ipc``; the result goes to ``<dir>/output/result.json``) — overridable for tests and
  local runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentrunner.duration import parse_duration_seconds

ECHO = "echo"
OPENAI_COMPATIBLE = frozenset({"openai", "ollama", "lm-studio", "vllm", "custom"})
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_RUN_TIMEOUT = "10m"
DEFAULT_CONTEXT_DIR = "/workspace/context"
DEFAULT_IPC_DIR = "/ipc"


class ConfigError(ValueError):
    """An environment variable has a value the runner cannot work with; the message names it."""


@dataclass(frozen=True)
class Config:
    """Everything one run needs, validated."""

    task: str
    system_prompt: str
    provider: str  # "echo" or one of OPENAI_COMPATIBLE, after resolving the empty default
    model: str
    base_url: str
    api_key: str = field(repr=False)
    thinking_mode: str
    run_timeout_seconds: float
    run_timeout_text: str
    run_id: str
    instance_name: str
    namespace: str
    agent_id: str
    session_key: str
    tool_policy_allow: tuple[str, ...]
    tool_policy_deny: tuple[str, ...]
    context_dir: Path
    ipc_dir: Path

    @property
    def result_path(self) -> Path:
        return self.ipc_dir / "output" / "result.json"


def _comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def resolve_provider(provider: str, base_url: str) -> str:
    """Map MODEL_PROVIDER to the provider implementation name; empty picks by MODEL_BASE_URL."""
    name = provider.strip().lower()
    if not name:
        return "openai" if base_url else ECHO
    if name == ECHO or name in OPENAI_COMPATIBLE:
        return name
    supported = ", ".join([ECHO, *sorted(OPENAI_COMPATIBLE)])
    raise ConfigError(f"MODEL_PROVIDER {provider!r} is not supported (supported: {supported})")


def paths_from_env(env: Mapping[str, str]) -> tuple[Path, Path]:
    """The context and IPC directories; needed even when the rest of the config is invalid."""
    context_dir = Path(env.get("AGENT_CONTEXT_DIR") or DEFAULT_CONTEXT_DIR)
    ipc_dir = Path(env.get("AGENT_IPC_DIR") or DEFAULT_IPC_DIR)
    return context_dir, ipc_dir


def load_config(env: Mapping[str, str]) -> Config:
    """Read and validate the environment; raises ConfigError naming the offending variable."""
    task = env.get("TASK") or ""
    if not task.strip():
        raise ConfigError("TASK is empty: the agent needs a task")
    base_url = (env.get("MODEL_BASE_URL") or "").strip().rstrip("/")
    provider = resolve_provider(env.get("MODEL_PROVIDER") or "", base_url)
    model = (env.get("MODEL_NAME") or "").strip()
    if provider in OPENAI_COMPATIBLE:
        if not base_url:
            if provider != "openai":
                raise ConfigError(f"MODEL_BASE_URL is required for MODEL_PROVIDER {provider!r}")
            base_url = OPENAI_DEFAULT_BASE_URL
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"MODEL_BASE_URL {base_url!r} must start with http:// or https://")
        if not model:
            raise ConfigError(f"MODEL_NAME is required for MODEL_PROVIDER {provider!r}")

    timeout_text = (env.get("RUN_TIMEOUT") or "").strip() or DEFAULT_RUN_TIMEOUT
    try:
        timeout_seconds = parse_duration_seconds(timeout_text)
    except ValueError as exc:
        raise ConfigError(f"RUN_TIMEOUT: {exc}") from None
    if timeout_seconds <= 0:
        raise ConfigError(f"RUN_TIMEOUT {timeout_text!r} must be positive")

    context_dir, ipc_dir = paths_from_env(env)
    return Config(
        task=task,
        system_prompt=env.get("SYSTEM_PROMPT") or "",
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=(env.get("OPENAI_API_KEY") or env.get("API_KEY") or "").strip(),
        thinking_mode=(env.get("THINKING_MODE") or "").strip(),
        run_timeout_seconds=timeout_seconds,
        run_timeout_text=timeout_text,
        run_id=env.get("AGENT_RUN_ID") or "",
        instance_name=env.get("INSTANCE_NAME") or "",
        namespace=env.get("AGENT_NAMESPACE") or "",
        agent_id=env.get("AGENT_ID") or "",
        session_key=env.get("SESSION_KEY") or "",
        tool_policy_allow=_comma_list(env.get("TOOL_POLICY_ALLOW") or ""),
        tool_policy_deny=_comma_list(env.get("TOOL_POLICY_DENY") or ""),
        context_dir=context_dir,
        ipc_dir=ipc_dir,
    )
