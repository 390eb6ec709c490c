"""Model providers and the choice between them (``make_provider`` is the only place that knows the mapping).

``echo`` is offline and imports no model library. Every other family is imported only by a run that uses it:
``openai`` (OpenAI, Azure OpenAI, every OpenAI-compatible name), ``anthropic``, ``bedrock`` (an optional extra).
"""

from __future__ import annotations

from agentrunner.config import ANTHROPIC, BEDROCK, ECHO, Config
from agentrunner.providers.base import (
    Conversation,
    ExitRequested,
    Model,
    ModelTurn,
    Prompt,
    ProviderError,
    SkipRequested,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agentrunner.providers.echo import EchoProvider

__all__ = ["Conversation", "EchoProvider", "ExitRequested", "Model", "ModelTurn", "Prompt", "ProviderError",
           "SkipRequested", "ToolCall", "ToolResult", "ToolSpec", "Usage", "make_provider"]


def make_provider(config: Config, timeout_seconds: float) -> Model:
    """The provider of this run; each model call is bounded by `timeout_seconds` (LLM_REQUEST_TIMEOUT, within
    what is left of RUN_TIMEOUT)."""
    if config.provider == ECHO:
        return EchoProvider()
    if config.provider == ANTHROPIC:
        from agentrunner.providers import anthropic

        return anthropic.make(config, timeout_seconds)
    if config.provider == BEDROCK:
        from agentrunner.providers import bedrock

        return bedrock.make(config, timeout_seconds)
    from agentrunner.providers import openai

    return openai.make(config, timeout_seconds)
