"""The agent container's environment contract, read once into a typed ``Config``.

The control plane sets these on the ``agent`` container (SPEC §3.5, §9); reading them in one place means every
other module works from validated values, and a bad value becomes one clear error result (naming the variable)
instead of a crash halfway through a run. This docstring is the contract the control plane writes to.

**The run** (set by the workflow today)

- ``TASK`` — the prompt (the user message). ``SYSTEM_PROMPT`` — the system message. ``TASK_FILE`` /
  ``SYSTEM_PROMPT_FILE``, when set, name a file holding it instead (one too long for an env var).
- ``AGENT_RUN_ID``, ``INSTANCE_NAME``, ``AGENT_NAMESPACE``, ``AGENT_ID``, ``SESSION_KEY`` — identifiers, logged.
- ``RUN_TIMEOUT`` — Go duration bounding the agent's *active* time (default ``10m``, ``30m`` for local
  providers, as Sympozium's runner). With a journal the time already spent by earlier containers of the run is
  subtracted (the journal records it), so a restarted agent does not get a fresh budget.
- ``TOOL_POLICY_ALLOW`` / ``TOOL_POLICY_DENY`` — the run's ``toolPolicy`` as comma lists (Sympozium's names):
  deny wins; a non-empty allow list offers only the tools it names.

**The model**

- ``MODEL_PROVIDER`` — ``openai``, ``azure-openai``, ``anthropic``, ``bedrock`` (needs the ``bedrock`` extra:
  boto3), ``echo`` (offline), or any OpenAI-compatible name (``openai-compatible``, ``custom``, ``ollama``,
  ``lm-studio``, ``vllm``, ``llama-server``, ``llamacpp``, ``groq``, ...). Empty means OpenAI-compatible when
  ``MODEL_BASE_URL`` is set, else ``echo``. Case-insensitive, as upstream.
- ``MODEL_NAME``; ``MODEL_BASE_URL`` (defaults as Sympozium's: ``DEFAULT_BASE_URLS``; ``azure-openai`` falls back
  to ``AZURE_OPENAI_ENDPOINT``, with ``AZURE_OPENAI_API_VERSION``; other names need it).
- The key: the provider's own variable (``PROVIDER_KEY_ENV``, e.g. ``ANTHROPIC_API_KEY``), else
  ``OPENAI_API_KEY``, ``API_KEY``, then ``PROVIDER_API_KEY`` (an auth Secret's ``apiKey`` key). It is given to
  the provider's SDK client and nothing else: no tool reads it, and commands run in another container.
- ``LLM_MAX_RETRIES`` (5 for cloud providers, 2 for local ones: 429, 5xx and connection errors, retried by the
  SDK client with its backoff), ``LLM_REQUEST_TIMEOUT`` (Go duration per model call; default 5m local, 10m
  cloud, never beyond what is left of ``RUN_TIMEOUT``), ``LLM_STREAM`` (``true``: server-sent events),
  ``MAX_TOOL_ITERATIONS`` (50 model rounds; the run then ends with an error naming the cap),
  ``THINKING_MODE`` (``off``, ``minimal``, ``low``, ``medium``, ``high``), ``MAX_TOKENS``, ``TEMPERATURE``.

**Tools** (each module documents its own part)

- ``WORKSPACE_DIR`` (``/workspace``) and ``SKILLS_DIR`` (``/skills``, read-only): the file tools' roots.
- ``EXEC_DIR`` (``/agentrun/exec``), ``EXEC_TARGETS``, ``EXEC_DEFAULT_TARGET``, ``EXEC_START_TIMEOUT``,
  ``SYMPOZIUM_SKILL_TARGETS``: where ``execute_command`` runs (``agentrunner/executor.py``).
- ``AGENT_SIDECAR_TOOLS`` (JSON) or ``SIDECAR_TOOLS_MANIFEST_PATH`` (a file of the same JSON): SkillPack sidecar
  tools (``agentrunner/tools/sidecar.py``); ``AGENT_SKILL_PARAMS`` (JSON): each skill's ``params``.
- ``AGENT_MCP_SERVERS`` (JSON) and ``MCP_AUTH_<SERVER>``: MCP servers (``agentrunner/tools/mcp.py``).
- ``FETCH_URL_ALLOW`` (hosts or CIDRs) and Sympozium's ``SYMPOZIUM_FETCH_URL_ALLOW_PRIVATE``
  (``agentrunner/tools/fetch.py``).
- ``AGENT_TOOL_POLICY`` (JSON): the SympoziumPolicy's resolved tool rules (``agentrunner/policy.py``).
- ``AGENT_WAITS`` (``tool-approval``): what the control plane starts the agent again after, so a call needing
  approval waits instead of being refused; ``AGENT_RESUME`` (JSON): the decisions a container started again after a
  wait continues with (``agentrunner/approvals.py``).

**State and output**

- ``AGENT_STATE_DIR`` — the journal's directory (``agentrunner/journal.py``), on the run's PVC and not under
  ``/workspace``; empty: no journal (a restarted agent starts over).
- ``AGENT_CONTEXT_DIR`` (``/workspace/context``) and ``AGENT_IPC_DIR`` (``/ipc``; the result goes to
  ``<dir>/output/result.json``). ``AGENT_LIST_SKILLS``: list the skill files in the result.
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
BEDROCK = "bedrock"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The endpoints Sympozium's agent-runner assumes when MODEL_BASE_URL is empty (provider_openai.go; the Anthropic
# SDK's default root). Every other provider but azure-openai and bedrock needs MODEL_BASE_URL.
DEFAULT_BASE_URLS = {"openai": OPENAI_DEFAULT_BASE_URL, "ollama": "http://ollama.default.svc:11434/v1",
                     "lm-studio": "http://localhost:1234/v1", "llama-server": "http://localhost:8080/v1",
                     "llamacpp": "http://localhost:8080/v1", "unsloth": "http://localhost:8080/v1",
                     ANTHROPIC: "https://api.anthropic.com"}
# Self-hosted providers (Sympozium's internal/llmprovider): fewer retries, a per-call timeout, a longer run.
LOCAL_PROVIDERS = frozenset({"ollama", "lm-studio", "llama-server", "unsloth", "vllm", "llamacpp", "local"})
# Providers the default agent image cannot serve: the control plane refuses them at start (models/resolve.py).
# The runner itself serves bedrock when its extra (boto3) is installed.
UNSUPPORTED = {BEDROCK: "AWS Bedrock (SigV4-signed requests)"}
# The key variable an auth Secret holds for a provider (Sympozium's allowed keys), tried before the generic ones.
PROVIDER_KEY_ENV = {"openai": "OPENAI_API_KEY", AZURE: "AZURE_OPENAI_API_KEY", ANTHROPIC: "ANTHROPIC_API_KEY",
                    "google": "GOOGLE_API_KEY", "mistral": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY",
                    "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY"}
GENERIC_KEY_ENV = ("OPENAI_API_KEY", "API_KEY", "PROVIDER_API_KEY")
PROVIDER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
DEFAULT_RUN_TIMEOUT = "10m"
DEFAULT_LOCAL_RUN_TIMEOUT = "30m"
DEFAULT_MAX_TOOL_ITERATIONS = 50
DEFAULT_RETRIES_CLOUD = 5
DEFAULT_RETRIES_LOCAL = 2
DEFAULT_REQUEST_TIMEOUT_CLOUD = 600.0
DEFAULT_REQUEST_TIMEOUT_LOCAL = 300.0
THINKING_MODES = ("off", "minimal", "low", "medium", "high")
DEFAULT_CONTEXT_DIR = "/workspace/context"
DEFAULT_IPC_DIR = "/ipc"
DEFAULT_WORKSPACE_DIR = "/workspace"
DEFAULT_SKILLS_DIR = "/skills"
TRUE = ("1", "true", "yes", "on")


class ConfigError(ValueError):
    """An environment variable has a value the runner cannot work with; the message names it."""


@dataclass(frozen=True)
class Config:
    """Everything one run needs, validated."""

    task: str
    system_prompt: str
    provider: str  # "echo", "anthropic", "bedrock" or an OpenAI-compatible provider's name (lower case)
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
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    max_retries: int = DEFAULT_RETRIES_CLOUD
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_CLOUD
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    workspace_dir: Path = Path(DEFAULT_WORKSPACE_DIR)
    skills_dir: Path = Path(DEFAULT_SKILLS_DIR)
    state_dir: Path | None = None
    # The rest of the environment (tool, policy and hook settings), read by the modules that own them.
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def result_path(self) -> Path:
        return self.ipc_dir / "output" / "result.json"

    @property
    def local(self) -> bool:
        return self.provider in LOCAL_PROVIDERS


def comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


_comma_list = comma_list


def provider_problem(provider: str, base_url: str) -> str | None:
    """Why the default agent image cannot serve `provider` with `base_url` (None: it can). Shared with the control
    plane (models/resolve.py), which fails a run with it before any pod starts."""
    name = provider.strip().lower()
    if not name or name == ECHO:
        return None
    if name in UNSUPPORTED:
        return (f"provider {provider!r} ({UNSUPPORTED[name]}) is not supported by the agentrun agent yet; use an "
                f"OpenAI-compatible endpoint (provider openai-compatible with a baseURL) or an agent image that "
                f"supports it (the runner's bedrock extra)")
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
    if not PROVIDER_NAME.match(name):
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


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name} {text!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name} {value} must be at least {minimum}")
    return value


def _duration(env: Mapping[str, str], name: str, default: str) -> tuple[float, str]:
    text = (env.get(name) or "").strip() or default
    try:
        seconds = parse_duration_seconds(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    if seconds <= 0:
        raise ConfigError(f"{name} {text!r} must be positive")
    return seconds, text


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
    if provider not in (ECHO, BEDROCK):
        if not base_url and provider == AZURE:
            base_url = (env.get("AZURE_OPENAI_ENDPOINT") or "").strip().rstrip("/")
        if not base_url:
            if provider not in DEFAULT_BASE_URLS:
                raise ConfigError(f"MODEL_BASE_URL is required for MODEL_PROVIDER {provider!r}")
            base_url = DEFAULT_BASE_URLS[provider]
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"MODEL_BASE_URL {base_url!r} must start with http:// or https://")
    if provider != ECHO and not model:
        raise ConfigError(f"MODEL_NAME is required for MODEL_PROVIDER {provider!r}")

    local = provider in LOCAL_PROVIDERS
    timeout_seconds, timeout_text = _duration(env, "RUN_TIMEOUT",
                                              DEFAULT_LOCAL_RUN_TIMEOUT if local else DEFAULT_RUN_TIMEOUT)
    request_timeout, _ = _duration(env, "LLM_REQUEST_TIMEOUT",
                                   f"{DEFAULT_REQUEST_TIMEOUT_LOCAL if local else DEFAULT_REQUEST_TIMEOUT_CLOUD}s")
    thinking = (env.get("THINKING_MODE") or "").strip().lower()
    if thinking and thinking not in THINKING_MODES:
        raise ConfigError(f"THINKING_MODE {thinking!r} must be one of {', '.join(THINKING_MODES)}")
    max_tokens = _int(env, "MAX_TOKENS", 0, minimum=1) if (env.get("MAX_TOKENS") or "").strip() else None
    temperature = None
    if (env.get("TEMPERATURE") or "").strip():
        try:
            temperature = float(env["TEMPERATURE"])
        except ValueError:
            raise ConfigError(f"TEMPERATURE {env['TEMPERATURE']!r} is not a number") from None
        if not 0 <= temperature <= 2:
            raise ConfigError(f"TEMPERATURE {temperature} must be between 0 and 2")
    state = (env.get("AGENT_STATE_DIR") or "").strip()

    context_dir, ipc_dir = paths_from_env(env)
    return Config(
        task=task,
        system_prompt=text_of(env, "SYSTEM_PROMPT"),
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key_of(provider, env),
        thinking_mode=thinking,
        run_timeout_seconds=timeout_seconds,
        run_timeout_text=timeout_text,
        run_id=env.get("AGENT_RUN_ID") or "",
        instance_name=env.get("INSTANCE_NAME") or "",
        namespace=env.get("AGENT_NAMESPACE") or "",
        agent_id=env.get("AGENT_ID") or "",
        session_key=env.get("SESSION_KEY") or "",
        tool_policy_allow=comma_list(env.get("TOOL_POLICY_ALLOW") or ""),
        tool_policy_deny=comma_list(env.get("TOOL_POLICY_DENY") or ""),
        context_dir=context_dir,
        ipc_dir=ipc_dir,
        azure_api_version=(env.get("AZURE_OPENAI_API_VERSION") or "").strip() or "2024-06-01",
        max_tool_iterations=_int(env, "MAX_TOOL_ITERATIONS", DEFAULT_MAX_TOOL_ITERATIONS, minimum=1),
        max_retries=_int(env, "LLM_MAX_RETRIES", DEFAULT_RETRIES_LOCAL if local else DEFAULT_RETRIES_CLOUD,
                         minimum=0),
        request_timeout_seconds=request_timeout,
        stream=(env.get("LLM_STREAM") or "").strip().lower() in TRUE,
        max_tokens=max_tokens,
        temperature=temperature,
        workspace_dir=Path(env.get("WORKSPACE_DIR") or DEFAULT_WORKSPACE_DIR),
        skills_dir=Path(env.get("SKILLS_DIR") or DEFAULT_SKILLS_DIR),
        state_dir=Path(state) if state else None,
        env=dict(env),
    )
