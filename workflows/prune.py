"""PruneHistoryWorkflow: one run-history pruning pass (SPEC §6), started by a Temporal Schedule.

A Schedule (not a timer in each bridge replica) starts it, so there is exactly one pass per
interval however many replicas run, and a pass still running when the next is due makes that
one be skipped. The pass itself is one activity; this workflow only bounds and records it, so
its result (kept/deleted per Agent) is what the Temporal UI shows of the pass.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.prune import PruneActivities
    from models.prune import PruneRequest, PruneSummary

    from . import policies

@workflow.defn
class PruneHistoryWorkflow:
    @workflow.run
    async def run(self, req: PruneRequest) -> PruneSummary:
        where = ", ".join(req.namespaces) if req.namespaces else "all namespaces"
        summary: PruneSummary = await workflow.execute_activity_method(
            PruneActivities.prune_run_history, req,
            summary=f"keep the newest {req.keep} terminal runs per Agent (unless it sets its own) in {where}",
            start_to_close_timeout=policies.PRUNE_CALL,
            heartbeat_timeout=policies.PRUNE_HEARTBEAT,
            schedule_to_close_timeout=policies.PRUNE_STEP,
            retry_policy=policies.KUBE_RETRY,
        )
        return summary
