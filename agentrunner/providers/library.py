"""The model call through pydantic-ai's model layer (its providers drive the official SDKs): our conversation in,
one ``ModelTurn`` out.

The loop is ours (agentrunner/loop.py: the journal's exactly-once resume and the phase hooks need every step
between a model response and a tool's execution), so this uses pydantic-ai where it is strongest: ``Model.request``
/ ``request_stream`` of ``OpenAIChatModel`` and ``AnthropicModel`` (and Bedrock's), its message types, its usage
normalisation and, later, its instrumentation. Retries of 429/5xx/connection errors are the SDK clients' own
(``max_retries`` with their backoff, honouring ``retry-after``); each call is bounded by ``LLM_REQUEST_TIMEOUT``.
Imported only by runs that talk to a model.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model as LibraryModel
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from agentrunner.config import Config
from agentrunner.providers.base import Conversation, ModelTurn, ProviderError, ToolCall, ToolSpec, Usage

BODY_EXCERPT_CHARS = 500


def user_message(conversation: Conversation) -> str:
    """The task, then each context file under a header naming it."""
    prompt = conversation.prompt
    if not prompt.context:
        return prompt.task
    parts = [prompt.task, "", "Context files (from /workspace/context):"]
    for f in prompt.context:
        parts.append(f"--- {f.name}{' (truncated)' if f.truncated else ''} ---")
        parts.append(f.text.rstrip("\n"))
    return "\n".join(parts)


def settings_of(config: Config) -> ModelSettings:
    settings: ModelSettings = {"timeout": config.request_timeout_seconds}
    if config.max_tokens:
        settings["max_tokens"] = config.max_tokens
    if config.temperature is not None:
        settings["temperature"] = config.temperature
    if config.thinking_mode:
        settings["thinking"] = False if config.thinking_mode == "off" else config.thinking_mode  # type: ignore[typeddict-item]
    return settings


class LibraryProvider:
    """A provider family's pydantic-ai model behind our Model interface."""

    def __init__(self, name: str, endpoint: str, model: LibraryModel, settings: ModelSettings, *,
                 stream: bool) -> None:
        self.name = name  # the API as errors name it: "OpenAI-compatible API", "Anthropic API"
        self.endpoint = endpoint
        self.model = model
        self.settings = settings
        self.stream = stream
        self._messages: list[ModelMessage] = []
        self._converted = 0  # steps of the conversation already in _messages

    def messages(self, conversation: Conversation) -> list[ModelMessage]:
        """The library's messages for the conversation, converting only the steps added since the last call."""
        if not self._messages:
            parts: list[Any] = []
            if conversation.prompt.system.strip():
                parts.append(SystemPromptPart(conversation.prompt.system))
            parts.append(UserPromptPart(user_message(conversation)))
            self._messages.append(ModelRequest(parts=parts))
        for step in conversation.steps[self._converted:]:
            if isinstance(step, ModelTurn):
                self._messages.append(to_response(step))
            else:
                self._messages.append(ModelRequest(parts=[ToolReturnPart(r.name, r.content, r.call_id)
                                                          for r in step]))
        self._converted = len(conversation.steps)
        return self._messages

    async def respond(self, conversation: Conversation, tools: list[ToolSpec]) -> ModelTurn:
        params = ModelRequestParameters(
            function_tools=[ToolDefinition(name=t.name, description=t.description,
                                           parameters_json_schema=t.parameters) for t in tools],
            allow_text_output=True)
        messages = list(self.messages(conversation))
        try:
            if self.stream:
                async with self.model.request_stream(messages, self.settings, params) as streamed:
                    async for _event in streamed:
                        pass
                    response = streamed.get()
            else:
                response = await self.model.request(messages, self.settings, params)
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(self.describe(exc)) from None
        return from_response(response)

    def describe(self, exc: BaseException) -> str:
        """A failed call as the run's error: what happened and where (never the key)."""
        status = getattr(exc, "status_code", None)
        body = getattr(exc, "body", None)
        detail = json.dumps(body) if isinstance(body, dict | list) else str(body or exc)
        detail = " ".join(detail.split())
        if len(detail) > BODY_EXCERPT_CHARS:
            detail = detail[:BODY_EXCERPT_CHARS] + "..."
        cause = exc.__cause__ or exc.__context__
        text = f"{type(exc).__name__} {detail} {type(cause).__name__ if cause else ''}".lower()
        if status:
            return f"{self.name} error (HTTP {status}): {detail} (at {self.endpoint})"
        if "connect" in text:
            return f"{self.name} unreachable at {self.endpoint}: {detail or 'connection failed'}"
        if "timeout" in text or "timed out" in text:
            return f"{self.name} request to {self.endpoint} timed out: {detail}"
        if type(exc).__name__ == "UnexpectedModelBehavior":
            return f"{self.name} returned an unexpected response (at {self.endpoint}): {detail}"
        return f"{self.name} request to {self.endpoint} failed: {type(exc).__name__}: {detail}"


def to_response(turn: ModelTurn) -> ModelResponse:
    if turn.native is not None:
        try:
            [message] = ModelMessagesTypeAdapter.validate_python([turn.native])
            if isinstance(message, ModelResponse):
                return message
        except Exception:  # a record another library version wrote: rebuild it from our own fields
            pass
    parts: list[Any] = [TextPart(turn.text)] if turn.text else []
    parts += [ToolCallPart(c.name, c.arguments, c.id) for c in turn.calls]
    return ModelResponse(parts=parts, model_name=turn.model)


def from_response(response: ModelResponse) -> ModelTurn:
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    # The arguments exactly as the model wrote them (pydantic-ai would wrap text that is not JSON), so the loop can
    # tell the model what was wrong with them.
    calls = [ToolCall(p.tool_call_id, p.tool_name,
                      p.args if isinstance(p.args, str) else json.dumps(p.args if p.args is not None else {}))
             for p in response.parts if isinstance(p, ToolCallPart)]
    u = response.usage
    usage = Usage(int(u.input_tokens or 0), int(u.output_tokens or 0), int(u.cache_read_tokens or 0))
    native = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    return ModelTurn(text, calls, usage, response.model_name or "", native)
