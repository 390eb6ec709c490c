"""OpenAI, Azure OpenAI and every OpenAI-compatible server (Ollama, LM Studio, vLLM, llama-server, llamacpp, ...)
through the official ``openai`` SDK and pydantic-ai's ``OpenAIChatModel`` (chat completions, as Sympozium's runner
speaks to all of them). Azure: the model name is the deployment, ``AZURE_OPENAI_API_VERSION``, key in ``api-key``."""

from __future__ import annotations

from typing import Any

from agentrunner.config import AZURE, Config
from agentrunner.providers.library import LibraryProvider, settings_of


async def _no_authorization(request: Any) -> None:
    request.headers.pop("Authorization", None)


def make(config: Config, timeout: float) -> LibraryProvider:
    import httpx2
    from openai import AsyncAzureOpenAI, AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = config.api_key or None
    client: AsyncOpenAI
    if config.provider == AZURE:
        client = AsyncAzureOpenAI(azure_endpoint=config.base_url, api_key=key or "not-set",
                                  api_version=config.azure_api_version, azure_deployment=config.model,
                                  max_retries=config.max_retries, timeout=timeout)
        endpoint = f"{config.base_url}/openai/deployments/{config.model}"
    else:
        # A server without a key (a local one) gets no Authorization header at all: the SDK insists on a key, so
        # its placeholder is taken off each request on the way out.
        http = None if key else httpx2.AsyncClient(timeout=timeout, event_hooks={"request": [_no_authorization]})
        client = AsyncOpenAI(base_url=config.base_url, api_key=key or "not-set", max_retries=config.max_retries,
                             timeout=timeout, http_client=http)
        endpoint = f"{config.base_url}/chat/completions"
    model = OpenAIChatModel(config.model, provider=OpenAIProvider(openai_client=client))
    return LibraryProvider("OpenAI-compatible API", endpoint, model, settings_of(config), stream=config.stream)
