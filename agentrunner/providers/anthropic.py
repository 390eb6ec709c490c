"""Anthropic's Messages API through the official ``anthropic`` SDK and pydantic-ai's ``AnthropicModel``.
``MODEL_BASE_URL`` is the API's root (as the SDK takes it); ``max_tokens`` defaults to 8192 as Sympozium's."""

from __future__ import annotations

from agentrunner.config import Config
from agentrunner.providers.library import LibraryProvider, settings_of

DEFAULT_MAX_TOKENS = 8192


def make(config: Config, timeout: float) -> LibraryProvider:
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(base_url=config.base_url, api_key=config.api_key or "not-set",
                            max_retries=config.max_retries, timeout=timeout)
    settings = settings_of(config)
    settings.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    model = AnthropicModel(config.model, provider=AnthropicProvider(anthropic_client=client))
    return LibraryProvider("Anthropic API", f"{config.base_url}/v1/messages", model, settings, stream=config.stream)
