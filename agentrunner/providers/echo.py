"""The offline ``echo`` provider: deterministic answers for demos and tests, no network, no model library.

Without tool lines the answer is ``echo: <task>`` (the task with surrounding whitespace removed), then one line per
file under the context directory, sorted by relative name: ``context <name>: <first line of the file>``. Token
counts are whitespace-separated words (of the system prompt, task and context for input; of the answer for
output), so metrics are non-zero and reproducible.

It can call tools, so runs can be driven through tools without a model server: each task line
``tool:<name> <arguments JSON>`` is one round in which the model calls that tool (the arguments are passed as
written, so bad JSON reaches the loop as a model's bad arguments would). After the last tool round it answers as
above, followed by one line per tool result: ``tool <name> (<status>): <result>``.

Test hooks, chosen by how the (stripped) task starts:

- ``fail:<message>`` — status ``error`` with ``<message>`` as the error (exit 1).
- ``skip:<reason>`` — status ``skipped`` with ``<reason>`` as the response (exit 0).
- ``exit:<code>`` — exit with ``<code>`` at once, printing no result marker and writing no
  result.json (an agent that crashed).
- ``sleep:<seconds>`` — sleep first (bounded by RUN_TIMEOUT like everything else), then
  handle the rest of the task after the first whitespace as the task, so hooks chain
  (``sleep:2 fail:late``); a bare ``sleep:2`` answers ``echo: sleep:2``.
"""

from __future__ import annotations

import asyncio

from agentrunner.providers.base import (
    Conversation,
    ExitRequested,
    ModelTurn,
    ProviderError,
    SkipRequested,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

TOOL_PREFIX = "tool:"


def _words(text: str) -> int:
    return len(text.split())


class EchoProvider:
    name = "echo"
    endpoint = "echo (offline)"

    async def respond(self, conversation: Conversation, tools: list[ToolSpec]) -> ModelTurn:
        prompt = conversation.prompt
        task = prompt.task.strip()
        rounds = sum(1 for s in conversation.steps if isinstance(s, ModelTurn))
        if rounds == 0:
            task = await self._hooks(task)
        input_tokens = _words(prompt.system) + _words(task) + sum(_words(f.text) for f in prompt.context)
        calls = [line.strip()[len(TOOL_PREFIX):] for line in task.splitlines() if line.strip().startswith(TOOL_PREFIX)]
        if rounds < len(calls):
            name, _, args = calls[rounds].strip().partition(" ")
            return ModelTurn("", [ToolCall(f"echo-{rounds + 1}", name, args.strip() or "{}")],
                             Usage(input_tokens, _words(args) + 1), "echo")
        lines = [f"echo: {task}"]
        lines += [f"context {f.name}: {f.first_line}" for f in prompt.context]
        for step in conversation.steps:
            if isinstance(step, list):
                lines += [_result_line(r) for r in step]
        text = "\n".join(lines)
        return ModelTurn(text, [], Usage(input_tokens, _words(text)), "echo")

    async def _hooks(self, task: str) -> str:
        if task.startswith("sleep:"):
            parts = task.removeprefix("sleep:").split(None, 1)
            seconds_text = parts[0] if parts else ""
            rest = parts[1] if len(parts) > 1 else ""
            try:
                seconds = float(seconds_text)
            except ValueError:
                raise ProviderError(f"echo: sleep needs seconds, got {seconds_text!r}") from None
            await asyncio.sleep(max(seconds, 0.0))
            return await self._hooks(rest.strip()) if rest.strip() else task
        if task.startswith("fail:"):
            raise ProviderError(task.removeprefix("fail:").strip())
        if task.startswith("skip:"):
            raise SkipRequested(task.removeprefix("skip:").strip())
        if task.startswith("exit:"):
            code_text = task.removeprefix("exit:").strip()
            try:
                code = int(code_text)
            except ValueError:
                raise ProviderError(f"echo: exit needs an integer code, got {code_text!r}") from None
            if not 0 <= code <= 255:
                raise ProviderError(f"echo: exit code must be 0-255, got {code}")
            raise ExitRequested(code)
        return task


def _result_line(r: ToolResult) -> str:
    return f"tool {r.name} ({r.status}): {r.content.rstrip()}"
