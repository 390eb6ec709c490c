"""Settings shared by the worker and the bridge: environment variables with the AGENTRUN_ prefix.

Nested groups use a double underscore: AGENTRUN_TEMPORAL__ADDRESS, AGENTRUN_KUBE__KUBECONFIG.
"""

from __future__ import annotations

from kubernetes import client, config
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from models.prune import DEFAULT_RUN_HISTORY_LIMIT, PRUNE_SCHEDULE_ID

DEFAULT_AGENT_IMAGE = "ghcr.io/sympozium-ai/sympozium/agent-runner:latest"


class TemporalSettings(BaseModel):
    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "agentrun"


class KubeSettings(BaseModel):
    # Empty: in-cluster config when running in a pod, else the default kubeconfig (KUBECONFIG).
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = 100

    def api_client(self) -> client.ApiClient:
        if self.kubeconfig:
            return config.new_client_from_config(self.kubeconfig)
        try:
            config.load_incluster_config()
        except config.ConfigException:
            return config.new_client_from_config()
        return client.ApiClient()


class NatsSettings(BaseModel):
    # Empty: events are not published (runs are unaffected either way).
    url: str = ""


class PruneSettings(BaseModel):
    """Run-history pruning (SPEC §6): a Temporal Schedule the leading bridge keeps up to date."""

    enabled: bool = True
    # Terminal runs kept per Agent unless the Agent sets spec.agents.default.runHistoryLimit.
    keep: int = Field(DEFAULT_RUN_HISTORY_LIMIT, ge=0)
    interval_seconds: int = Field(300, ge=1)
    # Distinct per installation when several share one Temporal namespace.
    schedule_id: str = PRUNE_SCHEDULE_ID


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTRUN_", env_nested_delimiter="__", extra="ignore")

    temporal: TemporalSettings = TemporalSettings()
    kube: KubeSettings = KubeSettings()
    nats: NatsSettings = NatsSettings()
    agent_image: str = DEFAULT_AGENT_IMAGE
    # How long a run waits for a Job event before checking the Job itself.
    fallback_poll_seconds: int = 60
    max_concurrent_activities: int = 200
    max_cached_workflows: int = 1000
    prune: PruneSettings = PruneSettings()
