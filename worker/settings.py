"""Settings of the worker process: environment variables with the AGENTRUN_ prefix, nested with `__`.

AGENTRUN_TEMPORAL__ADDRESS, AGENTRUN_KUBE__KUBECONFIG, AGENTRUN_NATS__URL, AGENTRUN_HEALTH__PORT, ...
(the shared groups are in models/settings.py; the README's "Configuration" lists every variable).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from kube.settings import KubeSettings
from models.run_logs import DEFAULT_KEEP_LOG_BYTES
from models.settings import DEFAULT_AGENT_IMAGE, HealthSettings, NatsSettings, TemporalSettings

__all__ = ["DEFAULT_AGENT_IMAGE", "KubeSettings", "TemporalSettings", "WorkerSettings"]


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTRUN_", env_nested_delimiter="__", extra="ignore")

    temporal: TemporalSettings = TemporalSettings()
    kube: KubeSettings = KubeSettings()
    nats: NatsSettings = NatsSettings()
    health: HealthSettings = HealthSettings()
    # host:port where the Temporal SDK's own metrics (task slots, poll and schedule-to-start latencies, activity and
    # workflow task counts: `temporal_*`) are served for Prometheus at /metrics; empty: not served. The chart
    # serves them on 9464 (worker.sdkMetricsPort); the embedded stack does not (its processes share one host).
    metrics_address: str = ""
    agent_image: str = DEFAULT_AGENT_IMAGE
    # How often a run's agent is started again when its pod is lost before it reported a result (deleted, evicted,
    # its node gone), continuing from its journal (SPEC §9). Every run then has a workspace PVC for the journal;
    # 0: no restarts, and runs without hooks keep /workspace in an emptyDir.
    agent_restarts: int = Field(2, ge=0, le=10)
    # The image of the tools container, where a run without a sandbox runs its commands (it needs only a POSIX sh;
    # any tools it should have, a run's commands find there). Empty: the agent image (agent_image).
    tools_image: str = ""
    # How long a run waits for a Job event before checking the Job itself.
    fallback_poll_seconds: int = 60
    # The tail of each container's log (the agent's, each hook's) the cleanup step keeps in the run's ConfigMap
    # `<run>-logs` before it deletes the Jobs (models/run_logs.py); 0 keeps none.
    keep_log_bytes: int = Field(default=DEFAULT_KEEP_LOG_BYTES, ge=0)
    # Where the worker's shared view watches the runs' Jobs and pods ([] = all namespaces); the chart sets it to
    # watchNamespaces, where its RBAC is namespaced.
    namespaces: list[str] = []
    max_concurrent_activities: int = 200
    # Workflows kept in memory between their tasks (about 240 KB each, measured on parked runs); one not kept is
    # replayed from its history when it is next woken (a verdict, a Job's end), costing CPU instead of memory.
    # 500 holds every active run of a busy worker and keeps a worker with 10,000 parked runs near 300 MB.
    max_cached_workflows: int = 500
    # The price table agents' tokens are priced with besides genai-prices (models/pricing.py): "namespace/name" of a
    # ConfigMap with Sympozium's `pricing.yaml` (empty: none); it is read at most every prices_ttl_seconds.
    prices_config_map: str = ""
    prices_ttl_seconds: float = Field(30.0, gt=0)
    # Where the agents of Agents whose `observability` is enabled without an otlpEndpoint export their spans
    # (empty: nowhere). The control plane's own exporter is the standard OTEL_EXPORTER_OTLP_* variables.
    agent_otlp_endpoint: str = ""
    # Register the search attributes the workflows upsert at start-up (refused on Temporal Cloud: there they are
    # registered once with `agentrun temporal setup`'s instructions, and this is set to false).
    setup_search_attributes: bool = True
