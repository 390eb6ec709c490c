"""How large a run's free text may be, in one place (issue 27, hole 6).

A run's text travels twice where size is limited. Its resolved spec (models/resolve.py) is the result of the
workflow's first step and the input of every Job step, each one Temporal payload: a payload over the server's
limit (2 MB by default, `limit.blobSize.error`) fails its workflow task for good, so an unbounded task wedged its
run in `Pending` forever. And a pod's env and command reach the kernel as `execve` strings: one longer than
MAX_ARG_STRLEN (32 pages, 128 KiB, counting `NAME=value` and its NUL) or all of them together over the argument
limit (a quarter of the stack limit, ~2 MiB by default) fail the container with "argument list too long".

So every free-text field a run carries into its workflow is bounded, in UTF-8 bytes, by the constants below:
- checked when a run is resolved (`check_run`), by the admission webhook (a 422 naming the field) and again when its
  workflow starts (the run fails naming the field: a cluster without the webhook never wedges either); Agents, whose
  defaults runs inherit, are checked at their admission too (`check_agent`);
- written into the CRDs as `maxLength` (`text_schema`), so a cluster without the webhook refuses at `kubectl apply`.
  OpenAPI counts characters, not bytes: since a character is at least one byte, the schema is the looser bound and
  the byte checks the exact one;
- and the whole resolved run is bounded as JSON (`RESOLVED_RUN_MAX_BYTES`), whatever adds up: half the payload
  limit, leaving room for JSON escapes of control characters (up to six bytes each), the payload codec and the
  other fields of a step's input.

A long task is not an env var: a task or system prompt longer than `ENV_TEXT_MAX_BYTES` reaches the agent as a
file (`TASK_FILE`, `SYSTEM_PROMPT_FILE`, from the run's input Secret: activities/manifests.py); a shorter one stays
in `TASK` / `SYSTEM_PROMPT`, as agent images written for Sympozium read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import WithJsonSchema
from pydantic_core import PydanticSerializationError

from .base import FieldProblem

KiB = 1024
TASK_MAX_BYTES = 256 * KiB
SYSTEM_PROMPT_MAX_BYTES = 128 * KiB
# One env value (a run's `env`, a hook's `env[].value`, a SkillPack sidecar's): a quarter of MAX_ARG_STRLEN, so
# `NAME=value` fits with any name.
ENV_VALUE_MAX_BYTES = 32 * KiB
# All names and values of one env map or list together (a run's `env`; one hook's own `env`). A hook container gets
# the run's env, its own, AGENT_RESULT (32 KiB) and its command: together well under the ~2 MiB argument limit.
ENV_MAX_BYTES = 256 * KiB
# One element of a hook's `command` or `args`, and all of them together.
ARG_MAX_BYTES = 32 * KiB
ARGS_MAX_BYTES = 256 * KiB
# Names, identifiers, images, URLs and other short text (agentId, sessionKey, model fields, images, tool names).
SHORT_TEXT_MAX_BYTES = 4 * KiB
# The whole resolved run as JSON.
RESOLVED_RUN_MAX_BYTES = 1024 * KiB
# A task or system prompt up to this long is given as `TASK` / `SYSTEM_PROMPT` (one env string, as Sympozium's agent
# reads it); a longer one as a file (`TASK_FILE` / `SYSTEM_PROMPT_FILE`). Half of MAX_ARG_STRLEN.
ENV_TEXT_MAX_BYTES = 64 * KiB


class Uncarriable(FieldProblem):
    """What a run cannot carry into its workflow: a field over its bound, or text that is not Unicode (a lone
    surrogate, which JSON can spell but UTF-8 cannot). Refused at admission (422) and failing the run at start, never
    admitted with a warning like other spec problems: its workflow could not even record it."""


def text_schema(max_bytes: int, **schema: Any) -> WithJsonSchema:
    """A string's CRD schema with its bound as `maxLength` (characters: see the module docstring)."""
    return WithJsonSchema({"type": "string", "maxLength": max_bytes, **schema})


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def _over(n: int, limit: int) -> str:
    return f"at most {limit} bytes (UTF-8), got {n}"


def check_text(field: str, value: Any, limit: int, *, what: str = "") -> None:
    if not isinstance(value, str):
        return
    n = utf8_len(value)
    if n > limit:
        raise Uncarriable(field, _over(n, limit) + (f": {what}" if what else ""))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise Uncarriable(field, f"is not Unicode text: a lone surrogate at character {e.start}") from None


def check_env_map(field: str, env: dict[str, str]) -> None:
    """A run's (or Agent's) `env`: each value, and all names and values together."""
    total = 0
    for key in sorted(env):
        check_text(f"{field}.{key}", env[key], ENV_VALUE_MAX_BYTES,
                   what="an env value reaches the kernel as one NAME=value string")
        check_text(f"{field}.{key}", key, SHORT_TEXT_MAX_BYTES)
        total += utf8_len(key) + utf8_len(env[key] or "") + 2
    if total > ENV_MAX_BYTES:
        raise Uncarriable(field, _over(total, ENV_MAX_BYTES) + " for all its names and values together")


def check_env_list(field: str, env: Iterable[Any]) -> None:
    """A hook's or sidecar's `env` list (EnvVar): each literal value, and all of them together."""
    total = 0
    for i, e in enumerate(env):
        check_text(f"{field}[{i}].name", e.name, SHORT_TEXT_MAX_BYTES)
        check_text(f"{field}[{i}].value", e.value, ENV_VALUE_MAX_BYTES,
                   what="an env value reaches the kernel as one NAME=value string")
        total += utf8_len(e.name) + utf8_len(e.value or "") + 2
    if total > ENV_MAX_BYTES:
        raise Uncarriable(field, _over(total, ENV_MAX_BYTES) + " for all its names and values together")


def check_args(field: str, command: list[str], args: list[str]) -> None:
    """A container's `command` and `args`: each element, and all of them together."""
    total = 0
    for name, items in (("command", command), ("args", args)):
        for i, a in enumerate(items):
            check_text(f"{field}.{name}[{i}]", a, ARG_MAX_BYTES)
            total += utf8_len(a) + 1
    if total > ARGS_MAX_BYTES:
        raise Uncarriable(f"{field}.command", _over(total, ARGS_MAX_BYTES) + " for command and args together")


def check_hooks(field: str, hooks: Iterable[Any]) -> None:
    """Lifecycle hooks (LifecycleHook or ResolvedHook): image, command, args and env."""
    for i, h in enumerate(hooks):
        at = f"{field}[{i}]"
        check_text(f"{at}.image", h.image, SHORT_TEXT_MAX_BYTES)
        check_args(at, list(h.command), list(h.args))
        check_env_list(f"{at}.env", h.env)


def check_resolved_size(run: Any) -> None:
    """The whole resolved run (a pydantic model) as the JSON its workflow carries."""
    try:
        n = len(run.model_dump_json(by_alias=True).encode("utf-8"))
    except PydanticSerializationError:  # text the field checks do not cover
        raise Uncarriable("spec", "holds text that is not Unicode (a lone surrogate)") from None
    if n > RESOLVED_RUN_MAX_BYTES:
        raise Uncarriable("spec", f"the run resolved against its Agent is {n} bytes as JSON, at most "
                               f"{RESOLVED_RUN_MAX_BYTES}: shorten its task, system prompt, env or hooks")
