"""The conversation as the loop sees it, and the one interface every provider implements.

The loop, the journal and the tools work with these few plain types, so an offline (``echo``) run never imports
the model libraries, and the journal does not depend on a library's serialisation (a parked run survives an
upgrade of the agent image). A provider turns them into its library's messages; a model response also keeps that
library's own message (``ModelTurn.native``) so a replay is faithful (thinking blocks, provider fields).

Usage is normalised the OpenAI way: ``input_tokens`` includes the cached ones, ``cached_input_tokens`` says how
many of them were read from the provider's cache (Anthropic reports them beside its input count; pydantic-ai adds
them back in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agentrunner.context import ContextFile


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text the model wrote (it may not be JSON at all)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"input": self.input_tokens, "output": self.output_tokens, "cached": self.cached_input_tokens}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        return cls(int(d.get("input") or 0), int(d.get("output") or 0), int(d.get("cached") or 0))


@dataclass
class ModelTurn:
    text: str
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    native: Any = None


@dataclass
class ToolResult:
    call_id: str
    name: str
    content: str
    status: str = "ok"  # ok | error | denied | interrupted | rejected (by a person, SPEC §10) | pending (parked)


@dataclass(frozen=True)
class Prompt:
    system: str
    task: str
    context: list[ContextFile]


@dataclass
class Conversation:
    prompt: Prompt
    steps: list[ModelTurn | list[ToolResult]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


class ProviderError(Exception):
    """The model could not answer; ``str(exc)`` is the run's ``error``."""


class SkipRequested(Exception):
    """The agent decided there is nothing to do; ``str(exc)`` is the reason."""


class ExitRequested(Exception):
    """End the process with ``code`` and print no result (a crashing agent, for tests)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exit with code {code}")
        self.code = code


class Model(Protocol):
    name: str
    endpoint: str

    async def respond(self, conversation: Conversation, tools: list[ToolSpec]) -> ModelTurn: ...
