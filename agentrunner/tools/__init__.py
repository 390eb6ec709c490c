"""The tools the model may call: what a tool is, and the argument helpers every tool uses.

A tool is a small typed async function with its limits as named constants in its own module (``files``, ``fetch``,
``shell``, ``sidecar``, ``mcp``); the loop never knows which tool it runs. Whatever goes wrong inside a tool — bad
arguments, a refused path, a failed command — is a ``ToolError`` whose text is the message the model reads; the run
goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

# The most any tool result may put into the conversation (fetch_url's own maximum); longer results are cut.
MAX_RESULT_CHARS = 100_000


class ToolError(Exception):
    """A tool could not do what it was asked; ``str(exc)`` is what the model reads."""


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], Coroutine[Any, Any, str]]
    # Safe to run again after a crash left its result unrecorded (journal.py): it changes nothing.
    read_only: bool = False
    kind: str = "builtin"  # builtin | sidecar | mcp
    extra: dict[str, Any] = field(default_factory=dict)


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def arg_str(args: dict[str, Any], name: str, *, required: bool = True, default: str = "") -> str:
    value = args.get(name)
    if value is None:
        if required:
            raise ToolError(f"argument {name!r} is required")
        return default
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
    return value


def arg_int(args: dict[str, Any], name: str, default: int | None = None) -> int | None:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float)
                                                                        and not value.is_integer()):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)  # models often quote numbers
        raise ToolError(f"argument {name!r} must be an integer, got {value!r}")
    return int(value)


def arg_bool(args: dict[str, Any], name: str, default: bool = False) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(f"argument {name!r} must be true or false, got {value!r}")
    return value
