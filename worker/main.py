"""The worker process: hosts AgentRunWorkflow and its activities. Stateless; run several."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.events import EventActivities
from activities.kube import KubeActivities
from activities.pricing import PriceSource
from activities.prune import PruneActivities
from activities.schedules import ScheduleActivities
from activities.slots import SlotActivities
from agentrunner.otel import ExportConfigError
from kube import Kube
from kube.informer import Informer
from models import pricing, telemetry
from models.codec import EncryptionCodec
from models.search_attributes import (
    SearchAttributeConflict,
    SearchAttributesRefused,
    ensure_search_attributes,
)
from models.settings import SettingsError, TemporalUnreachable, user_agent
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1
from workflows.agent_slots import AgentSlotsWorkflow
from workflows.prune import PruneHistoryWorkflow
from workflows.run_events import RunEventsWorkflow
from workflows.scheduled_run import ScheduledRunWorkflow

from .health import Health
from .settings import WorkerSettings

log = logging.getLogger("agentrun.worker")


def runtime(settings: WorkerSettings) -> Runtime | None:
    """The SDK core's runtime serving its metrics at AGENTRUN_METRICS_ADDRESS; None: the default one, no metrics."""
    if not settings.metrics_address:
        return None
    host, sep, port = settings.metrics_address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SettingsError(f"AGENTRUN_METRICS_ADDRESS: {settings.metrics_address!r} is not host:port")
    # The SDK's own names and units (as Temporal's published SDK dashboards expect them).
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=settings.metrics_address)))


async def connect(settings: WorkerSettings) -> Client:
    """The worker's client, traced (models/telemetry.py must be set up first): Temporal's OpenTelemetry interceptor
    on it reaches the workflows and activities of every worker made with it."""
    return await settings.temporal.connect(runtime=runtime(settings), traced=True)


# The worker runs workflows outside the SDK's sandbox. The sandbox re-imported the workflows' modules into every
# workflow instance (most of a cached workflow's memory, and code changed on disk under a running worker met the
# models it had loaded); with those modules passed through, its restrictions no longer reached our workflow code, yet
# its machinery still cost about 40% of the CPU of each workflow task: `python -m bench.replay` (one run, load 1.4)
# replayed a whole gated run in 48 ms of CPU passed through, 27 ms unsandboxed. A verdict on an evicted run pays
# that replay. The sandbox's determinism restrictions still check every workflow code path in CI: the workflow unit
# tests and the replay of the recorded histories run the SDK's default sandbox.
WORKFLOW_RUNNER = UnsandboxedWorkflowRunner()


def build_worker(client: Client, settings: WorkerSettings, *, informer: Informer | None = None) -> Worker:
    events = EventActivities(settings.nats.url or None, options=settings.nats.connect_options())
    api = settings.kube.api_client(user_agent=user_agent("worker"))
    acts = KubeActivities(api, default_image=settings.agent_image,
                          fallback_poll_seconds=settings.fallback_poll_seconds, qps=settings.kube.qps,
                          burst=settings.kube.burst, events=events, informer=informer,
                          keep_log_bytes=settings.keep_log_bytes, agent_restarts=settings.agent_restarts,
                          tools_image=settings.tools_image or settings.agent_image,
                          agent_otlp_endpoint=settings.agent_otlp_endpoint)
    # The price table's reads share the activities' client and rate limit.
    acts.prices = PriceSource(acts.kube, settings.prices_config_map, ttl=settings.prices_ttl_seconds)
    return Worker(
        client,
        task_queue=settings.temporal.task_queue,
        # AgentRunWorkflowV1 finishes the runs that started before the type "AgentRun" existed.
        workflows=[AgentRunWorkflow, AgentRunWorkflowV1, ScheduledRunWorkflow, PruneHistoryWorkflow, AgentSlotsWorkflow,
                   RunEventsWorkflow],
        activities=[*acts.all(), *ScheduleActivities(acts.kube).all(),
                    events.publish_event,
                    PruneActivities(acts.kube).prune_run_history, *SlotActivities().all()],
        max_concurrent_activities=settings.max_concurrent_activities,
        max_cached_workflows=settings.max_cached_workflows,
        workflow_runner=WORKFLOW_RUNNER,
    )


async def run(settings: WorkerSettings) -> None:
    health = Health("worker")
    spans = telemetry.setup("worker")
    health.counters.append(spans.counters)
    probes = await health.serve(settings.health)
    client = await connect(settings)
    # genai-prices loads its table at first use (about a second): now, beside the loop, not in the first run's step.
    await asyncio.to_thread(pricing.warm)
    if settings.setup_search_attributes:
        added = await ensure_search_attributes(client, settings.temporal.namespace)
        if added:
            log.info("registered search attributes %s in namespace %s", ", ".join(added), settings.temporal.namespace)
    # One shared view of the runs' Jobs and pods for this process (its own client: the watches hold connections).
    informer = Informer(Kube(settings.kube.api_client(user_agent=user_agent("worker"))),
                           settings.namespaces)
    informer.start()
    worker = build_worker(client, settings, informer=informer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    codec = client.data_converter.payload_codec
    if not isinstance(codec, EncryptionCodec):
        log.warning("payloads go to Temporal unencrypted (no AGENTRUN_TEMPORAL__CODEC_KEYS_FILE): tasks, results, "
                    "hook env and gate feedback are readable by whoever can read the workflow histories")
    else:
        log.info("payloads encrypted with codec key %s (%d key(s) readable)", codec.keys.writing, len(codec.keys.keys))
    log.info("worker polling %s on %s", settings.temporal.task_queue, settings.temporal.address)
    try:
        async with worker:
            health.ready = True
            await stop.wait()
            health.ready = False
    finally:
        informer.stop()
        if probes is not None:
            probes.close()
        await asyncio.to_thread(spans.shutdown)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run(WorkerSettings()))
    except (SearchAttributesRefused, SearchAttributeConflict, SettingsError, TemporalUnreachable,
            ValidationError, ExportConfigError) as e:
        # An operator's task, not a crash: one clear message, no traceback.
        log.error("%s", e)
        print(f"agentrun worker: {e}", file=sys.stderr)
        return 1
    return 0
