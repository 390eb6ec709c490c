"""Model providers and the choice between them.

Two implementations cover the issue's scope: ``echo`` (offline, deterministic) and one
client for every OpenAI-compatible server, since OpenAI, Ollama, LM Studio and vLLM all
speak ``/chat/completions``. ``make_provider`` is the only place that knows the mapping.
"""

from __future__ import annotations

from agentrunner.config import ECHO, Config
from agentrunner.providers.base import (
    Completion,
    ExitRequested,
    Prompt,
    Provider,
    ProviderError,
    SkipRequested,
)
from agentrunner.providers.echo import EchoProvider
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


def make_provider(config: Config, timeout_seconds: float) -> Provider:
    if config.provider == ECHO:
        return EchoProvider()
    return OpenAICompatibleProvider(config.provider, config.base_url, config.model, config.api_key,
                                    timeout_seconds)
