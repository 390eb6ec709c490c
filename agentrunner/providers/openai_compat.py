"""Any OpenAI-compatible chat endpoint: OpenAI, Ollama, LM Studio, vLLM and the like.

One ``POST {MODEL_BASE_URL}/chat/completions`` with ``model`` and ``messages`` (the system
prompt, when there is one, then the user message), ``Authorization: Bearer <key>`` when a
key is set. The user message is the task; files under the context directory, if any, are
appended after it so a preRun hook's material reaches a real model the way it reaches
``echo``. Token usage comes from the response's ``usage`` (``prompt_tokens`` /
``completion_tokens``; 0 when the server sends none).

``azure-openai`` is the same request to Azure's shape of it, as Sympozium's runner sends it through the OpenAI
SDK's Azure option: ``{endpoint}/openai/deployments/{model}/chat/completions?api-version=...`` (the model name is
the deployment; ``AZURE_OPENAI_API_VERSION``, default ``2024-06-01``) with the key in an ``api-key`` header.

Every failure — HTTP error status, timeout, refused connection, a body that is not a chat
completion — becomes a ``ProviderError`` whose message says what happened and where, e.g.
``OpenAI-compatible API error (HTTP 429): <body excerpt>``.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import httpx

from agentrunner.providers.base import Completion, Prompt, ProviderError

log = logging.getLogger(__name__)

BODY_EXCERPT_CHARS = 500
API = "OpenAI-compatible API"


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= BODY_EXCERPT_CHARS else flat[:BODY_EXCERPT_CHARS] + "..."


async def post_json(api: str, url: str, body: dict[str, Any], headers: dict[str, str],
                    timeout_seconds: float) -> httpx.Response:
    """One POST of a provider's request; a failure to get an answer, or an HTTP error, as a ProviderError that
    names the API and the URL."""
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_seconds)) as client:
            response = await client.post(url, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise ProviderError(f"{api} request to {url} timed out ({type(exc).__name__})") from None
    except httpx.ConnectError as exc:
        raise ProviderError(f"{api} unreachable at {url}: {exc or 'connection failed'}") from None
    except httpx.HTTPError as exc:
        raise ProviderError(f"{api} request to {url} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        raise ProviderError(f"{api} error (HTTP {response.status_code}): {_excerpt(response.text)}")
    return response


def user_message(prompt: Prompt) -> str:
    """The task, then each context file under a header naming it."""
    if not prompt.context:
        return prompt.task
    parts = [prompt.task, "", "Context files (from /workspace/context):"]
    for f in prompt.context:
        parts.append(f"--- {f.name}{' (truncated)' if f.truncated else ''} ---")
        parts.append(f.text.rstrip("\n"))
    return "\n".join(parts)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


AZURE = "azure-openai"
AZURE_DEFAULT_API_VERSION = "2024-06-01"


class OpenAICompatibleProvider:
    def __init__(self, name: str, base_url: str, model: str, api_key: str, timeout_seconds: float,
                 azure_api_version: str = AZURE_DEFAULT_API_VERSION) -> None:
        self.name = name
        base = base_url.rstrip("/")
        if name == AZURE:
            self.url = (f"{base}/openai/deployments/{quote(model, safe='')}/chat/completions"
                        f"?api-version={quote(azure_api_version, safe='')}")
        else:
            self.url = f"{base}/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_seconds = timeout_seconds

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        messages = []
        if prompt.system.strip():
            messages.append({"role": "system", "content": prompt.system})
        messages.append({"role": "user", "content": user_message(prompt)})
        return {"model": self.model, "messages": messages}

    async def complete(self, prompt: Prompt) -> Completion:
        headers = {"Content-Type": "application/json", "User-Agent": "agentrunner"}
        if self.api_key and self.name == AZURE:
            headers["api-key"] = self.api_key
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        response = await post_json(API, self.url, self.request_body(prompt), headers, self.timeout_seconds)
        try:
            body = response.json()
            message = body["choices"][0]["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("message.content is not a string")
        except (ValueError, LookupError, TypeError, AttributeError) as exc:
            raise ProviderError(
                f"{API} returned an unexpected response (HTTP {response.status_code}, {exc}): "
                f"{_excerpt(response.text)}"
            ) from None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        tool_calls = message.get("tool_calls")
        return Completion(
            text=content,
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            tool_calls=len(tool_calls) if isinstance(tool_calls, list) else 0,
        )
