"""Model providers and the choice between them.

Three implementations: ``echo`` (offline, deterministic), Anthropic's Messages API, and one
client for every OpenAI-compatible server, since OpenAI, Azure OpenAI, Ollama, LM Studio, vLLM
and every other name Sympozium's runner sends through its OpenAI client speak
``/chat/completions``. ``make_provider`` is the only place that knows the mapping.

The HTTP client is imported only when a run uses it: importing httpx (with the CLI packages it pulls in when they
are installed) was ~0.3 s of CPU at every agent pod's start, most of what an offline run costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrunner.config import ANTHROPIC, ECHO, Config
from agentrunner.providers.base import (
    Completion,
    ExitRequested,
    Prompt,
    Provider,
    ProviderError,
    SkipRequested,
)
from agentrunner.providers.echo import EchoProvider

if TYPE_CHECKING:
    from agentrunner.providers.openai_compat import OpenAICompatibleProvider

__all__ = [
    "Completion",
    "EchoProvider",
    "ExitRequested",
    "OpenAICompatibleProvider",
    "Prompt",
    "Provider",
    "ProviderError",
    "SkipRequested",
    "make_provider",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAICompatibleProvider":
        from agentrunner.providers.openai_compat import OpenAICompatibleProvider

        return OpenAICompatibleProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_provider(config: Config, timeout_seconds: float) -> Provider:
    if config.provider == ECHO:
        return EchoProvider()
    if config.provider == ANTHROPIC:
        from agentrunner.providers.anthropic import AnthropicProvider

        return AnthropicProvider(config.base_url, config.model, config.api_key, timeout_seconds)
    from agentrunner.providers.openai_compat import OpenAICompatibleProvider

    return OpenAICompatibleProvider(config.provider, config.base_url, config.model, config.api_key,
                                    timeout_seconds, config.azure_api_version)
