"""Anthropic's Messages API, as Sympozium's agent-runner calls it for ``MODEL_PROVIDER=anthropic``.

One ``POST {MODEL_BASE_URL or https://api.anthropic.com}/v1/messages`` (the base URL is the API's root, as the
Anthropic SDK takes it) with ``x-api-key`` and ``anthropic-version: 2023-06-01``; ``max_tokens`` 8192 as upstream
asks; the system prompt as ``system``; the user message is the task with the context files, as for the
OpenAI-compatible provider. The answer is the text of the response's ``text`` blocks; tokens come from ``usage``
(``input_tokens`` / ``output_tokens``). Failures are ``ProviderError``s worded like the OpenAI-compatible ones.
"""

from __future__ import annotations

from typing import Any

from agentrunner.providers.base import Completion, Prompt, ProviderError
from agentrunner.providers.openai_compat import _excerpt, _int, post_json, user_message

API = "Anthropic API"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
MAX_TOKENS = 8192


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, base_url: str, model: str, api_key: str, timeout_seconds: float) -> None:
        self.url = f"{(base_url or DEFAULT_BASE_URL).rstrip('/')}/v1/messages"
        self.model = model
        self.api_key = api_key
        self.timeout_seconds = timeout_seconds

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": MAX_TOKENS,
                                "messages": [{"role": "user", "content": user_message(prompt)}]}
        if prompt.system.strip():
            body["system"] = prompt.system
        return body

    async def complete(self, prompt: Prompt) -> Completion:
        headers = {"Content-Type": "application/json", "User-Agent": "agentrunner",
                   "anthropic-version": API_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        response = await post_json(API, self.url, self.request_body(prompt), headers, self.timeout_seconds)
        try:
            body = response.json()
            blocks = body["content"]
            if not isinstance(blocks, list):
                raise TypeError("content is not a list")
            text = "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        except (ValueError, LookupError, TypeError) as exc:
            raise ProviderError(
                f"{API} returned an unexpected response (HTTP {response.status_code}, {exc}): "
                f"{_excerpt(response.text)}"
            ) from None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return Completion(
            text=text,
            input_tokens=_int(usage.get("input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
            tool_calls=sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"),
        )
