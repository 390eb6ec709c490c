"""The offline ``echo`` provider: deterministic answers for demos and tests, no network.

The answer is ``echo: <task>`` (the task with surrounding whitespace removed), then one
line per file under the context directory, sorted by relative name:
``context <name>: <first line of the file>``. That makes a preRun hook's output visible in
the run's result without any model. Token counts are whitespace-separated words (of the
system prompt, task and context for input; of the answer for output), so metrics are
non-zero and reproducible.

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

from agentrunner.providers.base import Completion, ExitRequested, Prompt, ProviderError, SkipRequested


def _words(text: str) -> int:
    return len(text.split())


class EchoProvider:
    name = "echo"

    async def complete(self, prompt: Prompt) -> Completion:
        task = prompt.task.strip()
        if task.startswith("sleep:"):
            parts = task.removeprefix("sleep:").split(None, 1)
            seconds_text = parts[0] if parts else ""
            rest = parts[1] if len(parts) > 1 else ""
            try:
                seconds = float(seconds_text)
            except ValueError:
                raise ProviderError(f"echo: sleep needs seconds, got {seconds_text!r}") from None
            await asyncio.sleep(max(seconds, 0.0))
            if rest.strip():
                return await self.complete(Prompt(prompt.system, rest, prompt.context))
        elif task.startswith("fail:"):
            raise ProviderError(task.removeprefix("fail:").strip())
        elif task.startswith("skip:"):
            raise SkipRequested(task.removeprefix("skip:").strip())
        elif task.startswith("exit:"):
            code_text = task.removeprefix("exit:").strip()
            try:
                code = int(code_text)
            except ValueError:
                raise ProviderError(f"echo: exit needs an integer code, got {code_text!r}") from None
            if not 0 <= code <= 255:
                raise ProviderError(f"echo: exit code must be 0-255, got {code}")
            raise ExitRequested(code)

        lines = [f"echo: {task}"]
        lines += [f"context {f.name}: {f.first_line}" for f in prompt.context]
        text = "\n".join(lines)
        input_tokens = _words(prompt.system) + _words(task) + sum(_words(f.text) for f in prompt.context)
        return Completion(text=text, input_tokens=input_tokens, output_tokens=_words(text))
