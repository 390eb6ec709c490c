"""The worker process: hosts AgentRunWorkflow and its activities. Stateless; run several."""

from __future__ import annotations

import asyncio
import logging
import signal

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.events import EventActivities
from activities.kube import KubeActivities
from activities.prune import PruneActivities
from activities.schedules import ScheduleActivities
from activities.slots import SlotActivities
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_slots import AgentSlotsWorkflow
from workflows.prune import PruneHistoryWorkflow
from workflows.scheduled_run import ScheduledRunWorkflow

from .settings import WorkerSettings

log = logging.getLogger("agentrun.worker")


async def connect(settings: WorkerSettings) -> Client:
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


def build_worker(client: Client, settings: WorkerSettings) -> Worker:
    acts = KubeActivities(settings.kube.api_client(), default_image=settings.agent_image,
                          fallback_poll_seconds=settings.fallback_poll_seconds, qps=settings.kube.qps,
                          burst=settings.kube.burst)
    return Worker(
        client,
        task_queue=settings.temporal.task_queue,
        workflows=[AgentRunWorkflow, ScheduledRunWorkflow, PruneHistoryWorkflow, AgentSlotsWorkflow],
        activities=[*acts.all(), *ScheduleActivities(acts.api, limiter=acts.limiter).all(),
                    EventActivities(settings.nats.url or None).publish_event,
                    PruneActivities(acts.api, limiter=acts.limiter).prune_run_history, *SlotActivities().all()],
        max_concurrent_activities=settings.max_concurrent_activities,
        max_cached_workflows=settings.max_cached_workflows,
    )


async def run(settings: WorkerSettings) -> None:
    client = await connect(settings)
    worker = build_worker(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling %s on %s", settings.temporal.task_queue, settings.temporal.address)
    async with worker:
        await stop.wait()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(WorkerSettings()))
    return 0
