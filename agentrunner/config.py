"""The agent container's environment contract, read once into a typed ``Config``.

The workflow sets these on the ``agent`` container (SPEC §3.5); reading them in one place
means every other module works from validated values, and a bad value becomes one clear
error result instead of a crash halfway through a run.

Variables read:

- ``TASK`` — the prompt (the user message). ``SYSTEM_PROMPT`` — the system message. ``TASK_FILE`` /
  ``SYSTEM_PROMPT_FILE``, when set, name a file holding it instead (one too long for an env var).
- ``MODEL_PROVIDER`` — ``echo``; ``anthropic`` (the Messages API); or any provider Sympozium's agent-runner
  sends through its OpenAI client (``openai``, ``openai-compatible``, ``custom``, ``ollama``, ``lm-studio``,
  ``vllm``, ``llama-server``, ...; every other name), all spoken to as OpenAI-compatible
  ``/chat/completions``; ``azure-openai`` the same through Azure's deployment URL and ``api-key`` header.
  ``bedrock`` is refused (``UNSUPPORTED``) until this runner has its client. Empty means OpenAI-compatible
  when ``MODEL_BASE_URL`` is set, else ``echo``. Case-insensitive, as upstream.
- ``MODEL_NAME``, ``MODEL_BASE_URL`` (defaults as Sympozium's: ``DEFAULT_BASE_URLS``; ``azure-openai``
  falls back to ``AZURE_OPENAI_ENDPOINT``; every other provider needs it set), ``THINKING_MODE`` (logged
  only: OpenAI-compatible servers disagree on reasoning parameters, so none is sent).
- The key, sent as ``Authorization: Bearer`` (``api-key`` for Azure) when set: the provider's own variable
  (``PROVIDER_KEY_ENV``, e.g. ``GROQ_API_KEY`` for ``groq``), else ``OPENAI_API_KEY``, ``API_KEY``, then
  ``PROVIDER_API_KEY`` (what an auth Secret's ``apiKey`` key becomes, activities/manifests.py).
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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentrunner.duration import parse_duration_seconds

ECHO = "echo"
AZURE = "azure-openai"
ANTHROPIC = "anthropic"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The endpoints Sympozium's agent-runner assumes when MODEL_BASE_URL is empty (provider_openai.go; the Anthropic
# SDK's default root). Every other provider but azure-openai needs MODEL_BASE_URL.
DEFAULT_BASE_URLS = {"openai": OPENAI_DEFAULT_BASE_URL, "ollama": "http://ollama.default.svc:11434/v1",
                     "lm-studio": "http://localhost:1234/v1", "llama-server": "http://localhost:8080/v1",
                     "unsloth": "http://localhost:8080/v1", ANTHROPIC: "https://api.anthropic.com"}
# Providers Sympozium speaks to with clients of their own that this runner does not have yet.
UNSUPPORTED = {"bedrock": "AWS Bedrock (SigV4-signed requests)"}
# The key variable an auth Secret holds for a provider (Sympozium's allowed keys), tried before the generic ones.
PROVIDER_KEY_ENV = {"openai": "OPENAI_API_KEY", AZURE: "AZURE_OPENAI_API_KEY", ANTHROPIC: "ANTHROPIC_API_KEY",
                    "google": "GOOGLE_API_KEY", "mistral": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY",
                    "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY"}
GENERIC_KEY_ENV = ("OPENAI_API_KEY", "API_KEY", "PROVIDER_API_KEY")
PROVIDER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
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
    provider: str  # "echo", "anthropic" or an OpenAI-compatible provider's name (lower case), after the empty default
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
    azure_api_version: str = "2024-06-01"

    @property
    def result_path(self) -> Path:
        return self.ipc_dir / "output" / "result.json"


def _comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def provider_problem(provider: str, base_url: str) -> str | None:
    """Why this runner cannot serve `provider` with `base_url` (None: it can). Shared with the control plane
    (models/resolve.py), which fails a run with it before any pod starts."""
    name = provider.strip().lower()
    if not name or name == ECHO:
        return None
    if name in UNSUPPORTED:
        return (f"provider {provider!r} ({UNSUPPORTED[name]}) is not supported by the agentrun agent yet; use an "
                f"OpenAI-compatible endpoint (provider openai-compatible with a baseURL) or an agent image that "
                f"supports it")
    if not PROVIDER_NAME.match(name):
        return f"provider {provider!r} is not a provider name (lower-case letters, digits, '.', '_', '-')"
    if not base_url.strip() and name not in DEFAULT_BASE_URLS and name != AZURE:
        return (f"provider {provider!r} needs a baseURL: it is spoken to as an OpenAI-compatible endpoint and has "
                "no default one")
    return None


def resolve_provider(provider: str, base_url: str) -> str:
    """Map MODEL_PROVIDER to the provider implementation name; empty picks by MODEL_BASE_URL."""
    name = provider.strip().lower()
    if not name:
        return "openai" if base_url else ECHO
    if name in UNSUPPORTED or not PROVIDER_NAME.match(name):
        raise ConfigError(f"MODEL_PROVIDER: {provider_problem(name, base_url)}")
    return name  # a missing MODEL_BASE_URL is load_config's to report


def api_key_of(provider: str, env: Mapping[str, str]) -> str:
    """The provider's own key variable first, then the generic ones."""
    own = PROVIDER_KEY_ENV.get(provider)
    for key in ((own,) if own else ()) + GENERIC_KEY_ENV:
        value = (env.get(key) or "").strip()
        if value:
            return value
    return ""


def paths_from_env(env: Mapping[str, str]) -> tuple[Path, Path]:
    """The context and IPC directories; needed even when the rest of the config is invalid."""
    context_dir = Path(env.get("AGENT_CONTEXT_DIR") or DEFAULT_CONTEXT_DIR)
    ipc_dir = Path(env.get("AGENT_IPC_DIR") or DEFAULT_IPC_DIR)
    return context_dir, ipc_dir


def text_of(env: Mapping[str, str], name: str) -> str:
    """`<name>_FILE`'s content when set (a task or system prompt too long for an env var), else `<name>`."""
    path = env.get(f"{name}_FILE")
    if not path:
        return env.get(name) or ""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}_FILE: cannot read {path}: {exc}") from None


def load_config(env: Mapping[str, str]) -> Config:
    """Read and validate the environment; raises ConfigError naming the offending variable."""
    task = text_of(env, "TASK")
    if not task.strip():
        raise ConfigError("TASK is empty: the agent needs a task")
    base_url = (env.get("MODEL_BASE_URL") or "").strip().rstrip("/")
    provider = resolve_provider(env.get("MODEL_PROVIDER") or "", base_url)
    model = (env.get("MODEL_NAME") or "").strip()
    if provider != ECHO:
        if not base_url and provider == AZURE:
            base_url = (env.get("AZURE_OPENAI_ENDPOINT") or "").strip().rstrip("/")
        if not base_url:
            if provider not in DEFAULT_BASE_URLS:
                raise ConfigError(f"MODEL_BASE_URL is required for MODEL_PROVIDER {provider!r}")
            base_url = DEFAULT_BASE_URLS[provider]
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
        system_prompt=text_of(env, "SYSTEM_PROMPT"),
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key_of(provider, env),
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
        azure_api_version=(env.get("AZURE_OPENAI_API_VERSION") or "").strip() or "2024-06-01",
    )
