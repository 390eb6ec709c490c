"""Typed input and result of run-history pruning (SPEC §6: keep the newest N terminal runs per Agent).

They cross the workflow boundary (schedule action → PruneHistoryWorkflow → activity → result),
so they are pydantic models with defaults, and the result is what the Temporal UI shows of a
pruning pass: per Agent, the limit used and how many runs were kept, deleted and left running.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

DEFAULT_RUN_HISTORY_LIMIT = 50
# The Schedule's default ID, also the prefix of every pass's workflow ID (Temporal appends the time).
PRUNE_SCHEDULE_ID = "agentrun-prune-history"


class PruneRequest(BaseModel):
    """One pruning pass: the global default N, and where to prune (empty = all namespaces)."""

    keep: int = Field(DEFAULT_RUN_HISTORY_LIMIT, ge=0)
    namespaces: list[str] = Field(default_factory=list)


class AgentHistory(BaseModel):
    """What one pass did to one Agent's runs."""

    namespace: str
    agent: str
    # The N applied: the Agent's runHistoryLimit, else the request's `keep`.
    limit: int
    # Where the limit came from: "agent" or "default" (no limit set, or the Agent no longer exists).
    limit_source: str = "default"
    kept: int = 0
    deleted: int = 0
    # Runs that are not terminal (or already being deleted): never touched, not counted against N.
    untouched: int = 0


class PruneSummary(BaseModel):
    listed: int = 0
    deleted: int = 0
    agents: list[AgentHistory] = Field(default_factory=list)
    # SkillPack sidecars' per-run ClusterRoles and bindings whose run was gone or had ended (its cleanup never ran).
    cluster_rbac_removed: int = 0
