"""The worker's CPU to replay a workflow, per workflow runner: what an evicted workflow costs when it is woken.

A worker keeps at most `max_cached_workflows` workflows in memory (500 by default); a run woken after it was
evicted (a verdict on one of thousands of parked runs) is first replayed from its history. This replays a
recorded history (tests/workflows/histories, real runs) `--replays` times in one process with each runner, no
server involved, and prints the CPU and wall time per replay:

- `default`: the SDK's sandbox as it comes (the workflow unit tests and history replays in CI use it);
- `passthrough`: the sandbox with the `workflows` modules passed through (the worker's runner until it left the
  sandbox);
- `worker`: the worker's own runner (worker/main.py `WORKFLOW_RUNNER`).

Usage: python -m bench.replay [--history v3-gate-approved-then-hooks] [--replays 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from bench.runs import print_figures
from models.converter import DATA_CONVERTER
from worker.main import WORKFLOW_RUNNER
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1
from workflows.scheduled_run import ScheduledRunWorkflow

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "workflows" / "histories"
RUNNERS: dict[str, WorkflowRunner] = {
    "default": SandboxedWorkflowRunner(),
    "passthrough": SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("workflows")),
    "worker": WORKFLOW_RUNNER,
}


async def replay(history: WorkflowHistory, runner: WorkflowRunner, n: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per replay of `history`, `n` times through one Replayer."""
    replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1, ScheduledRunWorkflow],
                        data_converter=DATA_CONVERTER, workflow_runner=runner)

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for i in range(n):
            yield WorkflowHistory(f"{history.workflow_id}-{i}", history.events)

    wall, cpu = time.perf_counter(), time.process_time()
    await replayer.replay_workflows(histories(), raise_on_replay_failure=True)
    return (time.process_time() - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000


async def run(name: str, n: int) -> dict[str, float | None]:
    history = WorkflowHistory.from_json(name, (HISTORIES / f"{name}.json").read_text())
    print(f"history {name}: {len(history.events)} events; {n} replays per runner, one process, no server; "
          f"load average {os.getloadavg()[0]:.2f}")
    figures: dict[str, float | None] = {"replays": float(n), "events": float(len(history.events)),
                                        "load_avg_1m_start": os.getloadavg()[0]}
    for label, runner in RUNNERS.items():
        await replay(history, runner, min(n, 20))  # warm-up: imports, first adapters
        cpu, wall = await replay(history, runner, n)
        print(f"  {label:12s} {cpu:6.1f} ms CPU, {wall:6.1f} ms wall per replay")
        figures[f"{label}_cpu_ms_per_replay"] = cpu
    figures["load_avg_1m_end"] = os.getloadavg()[0]
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--history", default="v3-gate-approved-then-hooks", help="a recorded history's file name, no .json")
    p.add_argument("--replays", type=int, default=200, help="replays per runner")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object, as the last line")
    args = p.parse_args()
    if not (HISTORIES / f"{args.history}.json").is_file():
        known = ", ".join(sorted(h.stem for h in HISTORIES.glob("*.json")))
        p.error(f"no recorded history {args.history!r}; known: {known}")
    figures = asyncio.run(run(args.history, args.replays))
    if args.json:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
