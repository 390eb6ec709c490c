"""What a provider returns and the ways it can end a run other than with an answer.

Kept apart from the providers so the runner maps outcomes to results in one place: a
``Completion`` is success, ``ProviderError`` is status ``error``, ``SkipRequested`` is
status ``skipped`` and ``ExitRequested`` ends the process with no result at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agentrunner.context import ContextFile


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0


@dataclass(frozen=True)
class Prompt:
    system: str
    task: str
    context: list[ContextFile]


class ProviderError(Exception):
    """The model could not answer; ``str(exc)`` is the run's ``error``."""


class SkipRequested(Exception):
    """The agent decided there is nothing to do; ``str(exc)`` is the reason."""


class ExitRequested(Exception):
    """End the process with ``code`` and print no result (a crashing agent, for tests)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exit with code {code}")
        self.code = code


class Provider(Protocol):
    name: str

    async def complete(self, prompt: Prompt) -> Completion: ...
