"""AWS Bedrock (Converse API) through boto3 and pydantic-ai's ``BedrockConverseModel``: an optional extra
(``pip install 'agentrun[bedrock]'``), since boto3 is large. Credentials and region come from the usual AWS env."""

from __future__ import annotations

from agentrunner.config import Config, ConfigError
from agentrunner.providers.library import LibraryProvider, settings_of


def make(config: Config, timeout: float) -> LibraryProvider:
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise ConfigError("MODEL_PROVIDER bedrock needs the agent's bedrock extra (boto3), which this agent image "
                          "does not include: build the image with it, or use another provider") from None
    from pydantic_ai.models.bedrock import BedrockConverseModel
    from pydantic_ai.providers.bedrock import BedrockProvider

    model = BedrockConverseModel(config.model, provider=BedrockProvider())
    return LibraryProvider("AWS Bedrock", "the Bedrock Converse API", model, settings_of(config), stream=config.stream)
