"""Run-history pruning (SPEC §6): per Agent, keep the newest N terminal AgentRuns, delete the rest.

The decision is a pure function (`select_for_pruning`) so it can be tested on its own; the
activity only lists, decides and deletes. N is the Agent's `runHistoryLimit`, else the global
default of the request (also for runs whose Agent no longer exists). A run that is not terminal,
or is already being deleted, is never deleted and does not count against N.

Deleting a run is the same as a user deleting it: the bridge sees the deletion and lets the
object go (cancelling its workflow if it still runs cleanup). The activity is idempotent under
retry: each attempt lists afresh, and a delete that finds the run gone (404) or changed (409,
the uid/resourceVersion precondition failed) leaves it for the next pass.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from kube import Conflict, Forbidden, Kube, NotFound, sympozium
from models.agent import normalize_agent
from models.agentrun import TERMINAL_PHASES
from models.base import FieldProblem
from models.names import (
    AGENTRUNS,
    LABEL_COMPONENT,
    LABEL_RUN,
    LABEL_RUN_NAMESPACE,
    LABEL_RUN_UID,
)
from models.prune import AgentHistory, PruneRequest, PruneSummary
from models.timestamps import parse_rfc3339

from .errors import kube_activity

# Both plurals of an Agent; `agents` wins when both exist, as when a run resolves its Agent.
AGENT_PLURALS = ("agents", "sympoziuminstances")
# Items per list response: a namespace with thousands of runs is read in pages, not one response.
PAGE_SIZE = 500
_OLDEST = dt.datetime.min.replace(tzinfo=dt.UTC)

AgentKey = tuple[str, str]  # (namespace, agent name)


@dataclass(frozen=True)
class RunEntry:
    """What pruning needs to know of one AgentRun (kept small: thousands may be listed)."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    agent: str = ""
    phase: str = ""
    completed_at: dt.datetime | None = None
    created_at: dt.datetime | None = None
    deleting: bool = False

    @property
    def prunable(self) -> bool:
        return self.phase in TERMINAL_PHASES and not self.deleting


@dataclass
class PrunePlan:
    """Runs to delete (per Agent, oldest first) and the per-Agent account of the pass."""

    delete: list[RunEntry] = field(default_factory=list)
    agents: list[AgentHistory] = field(default_factory=list)


def run_entry(obj: dict[str, Any]) -> RunEntry:
    """An AgentRun object (as listed) as a RunEntry; tolerant of missing or malformed fields."""
    meta = obj.get("metadata") or {}
    spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    status: dict[str, Any] = obj["status"] if isinstance(obj.get("status"), dict) else {}
    agent = spec.get("agentRef") or spec.get("instanceRef") or ""
    return RunEntry(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                    uid=str(meta.get("uid") or ""), resource_version=str(meta.get("resourceVersion") or ""),
                    agent=agent if isinstance(agent, str) else "", phase=str(status.get("phase") or ""),
                    completed_at=parse_rfc3339(status.get("completedAt")), created_at=parse_rfc3339(meta.get("creationTimestamp")),
                    deleting=bool(meta.get("deletionTimestamp")))


def age_key(run: RunEntry) -> tuple[dt.datetime, dt.datetime, str]:
    """Sorts oldest first: by completion, then creation, then name.

    A terminal run without `completedAt` (e.g. written by another controller) counts as
    completed when it was created: the best estimate there is, and never newer than it really is.
    """
    created = run.created_at or _OLDEST
    return (run.completed_at or created, created, run.name)


def select_for_pruning(runs: Iterable[RunEntry], *, limits: Mapping[AgentKey, int | None],
                       default: int) -> PrunePlan:
    """Which runs to delete so each Agent keeps its newest N terminal runs.

    `limits` maps (namespace, agent) to the Agent's runHistoryLimit; an Agent missing from it,
    or with None, gets `default`.
    """
    groups: dict[AgentKey, list[RunEntry]] = defaultdict(list)
    for run in runs:
        groups[(run.namespace, run.agent)].append(run)
    plan = PrunePlan()
    for key in sorted(groups):
        members = groups[key]
        own = limits.get(key)
        limit = own if own is not None else default
        terminal = sorted((r for r in members if r.prunable), key=age_key)
        excess = terminal[:max(0, len(terminal) - limit)]
        plan.delete.extend(excess)
        plan.agents.append(AgentHistory(namespace=key[0], agent=key[1], limit=limit,
                                        limit_source="agent" if own is not None else "default",
                                        kept=len(terminal) - len(excess), deleted=len(excess),
                                        untouched=len(members) - len(terminal)))
    return plan


def agent_limit(obj: dict[str, Any]) -> int | None:
    """The Agent's runHistoryLimit, or None (unset, negative, or the Agent is malformed)."""
    try:
        limit = normalize_agent(obj).run_history_limit
    except FieldProblem:
        return None
    return limit if limit is not None and limit >= 0 else None


class PruneActivities:
    def __init__(self, kube: Kube, *, page_size: int = PAGE_SIZE) -> None:
        # The worker's access layer, shared with its other Kubernetes activities, so a big pass cannot flood the API.
        self.kube = kube
        self.runs = sympozium(kube, AGENTRUNS, kind="AgentRun")
        self.page_size = page_size

    async def _call(self, fn: Callable[..., Any], *args: Any, action: str, **kw: Any) -> Any:
        return await self.kube.call(fn, *args, action=action, **kw)

    async def _list(self, plural: str, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every object of `plural` in `namespaces` (all when empty), page by page; [] if not served."""
        out: list[dict[str, Any]] = []
        for ns in namespaces or [""]:
            token: str | None = None
            while True:
                kw: dict[str, Any] = {"limit": self.page_size}
                if token:
                    kw["_continue"] = token
                action = f"list {plural}" + (f" in {ns}" if ns else "")
                try:
                    page = await sympozium(self.kube, plural).list(ns, action=action, **kw)
                except NotFound:
                    break  # the kind is not installed: nothing of it to read
                # Gone (410, an expired continue token) leaves as a retryable error: the next attempt lists afresh.
                out.extend(page.get("items") or [])
                activity.heartbeat(f"listed {len(out)} {plural}")
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
        return out

    async def _limits(self, namespaces: list[str]) -> dict[AgentKey, int | None]:
        limits: dict[AgentKey, int | None] = {}
        for plural in reversed(AGENT_PLURALS):  # later plurals overwrite: `agents` wins
            for obj in await self._list(plural, namespaces):
                meta = obj.get("metadata") or {}
                limits[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = agent_limit(obj)
        return limits

    async def _delete(self, run: RunEntry) -> bool:
        """Delete one run unless it is gone or changed since it was listed; True if deleted."""
        body = {"preconditions": {"uid": run.uid, "resourceVersion": run.resource_version}}
        action = f"delete AgentRun {run.namespace}/{run.name}"
        try:
            await self.runs.delete(run.namespace, run.name, body=body, action=action)
            return True
        except (NotFound, Conflict):
            return False  # gone, or changed since it was listed

    @activity.defn
    @kube_activity
    async def prune_run_history(self, req: PruneRequest) -> PruneSummary:
        """Keep the newest N terminal runs per Agent in the namespaces (all if none); delete the rest."""
        runs = [run_entry(o) for o in await self._list(AGENTRUNS, req.namespaces)]
        limits = await self._limits(req.namespaces)
        plan = select_for_pruning(runs, limits=limits, default=req.keep)
        deleted: dict[AgentKey, int] = defaultdict(int)
        for i, run in enumerate(plan.delete):
            if await self._delete(run):
                deleted[(run.namespace, run.agent)] += 1
            activity.heartbeat(f"deleted {i + 1}/{len(plan.delete)}")
        for h in plan.agents:
            # What really went: a run that vanished or changed since the list is not counted.
            h.deleted = deleted[(h.namespace, h.agent)]
            if h.deleted:
                activity.logger.info("pruned %d runs of Agent %s/%s (keeping %d, limit %d from %s)", h.deleted,
                                     h.namespace, h.agent, h.kept, h.limit, h.limit_source)
        removed = await self._sweep_cluster_rbac(req.namespaces)
        return PruneSummary(listed=len(runs), deleted=sum(deleted.values()), agents=plan.agents,
                            cluster_rbac_removed=removed)

    async def _sweep_cluster_rbac(self, namespaces: list[str]) -> int:
        """Remove SkillPack sidecars' per-run ClusterRoles and bindings whose run is gone or has ended: a run's
        cleanup removes its own, but a run deleted without its cleanup (its finalizer removed by hand, its workflow
        terminated) leaves them, and nothing owns a cluster-scoped object of a namespaced run. Each is looked at
        again (its run read) right before it goes, so a run that started since cannot lose its grant. A worker that
        may not list them (the chart grants none when worker.grantableClusterRules is empty) has none to sweep."""
        removed = 0
        for kind, listing, delete in (
                ("ClusterRoleBinding", self.kube.rbac.list_cluster_role_binding,
                 self.kube.rbac.delete_cluster_role_binding),
                ("ClusterRole", self.kube.rbac.list_cluster_role, self.kube.rbac.delete_cluster_role)):
            try:
                found = await self._call(listing, label_selector=f"{LABEL_COMPONENT}=skill,{LABEL_RUN_UID}",
                                         action=f"list {kind}s of runs' sidecars")
            except Forbidden:
                return removed
            for obj in found.items:
                labels = obj.metadata.labels or {}
                ns, run = labels.get(LABEL_RUN_NAMESPACE, ""), labels.get(LABEL_RUN, "")
                if namespaces and ns not in namespaces:
                    continue
                if await self._run_holds(ns, run, labels.get(LABEL_RUN_UID, "")):
                    continue
                try:
                    await self._call(delete, obj.metadata.name, body={"preconditions": {"uid": obj.metadata.uid}},
                                     action=f"delete {kind} {obj.metadata.name}")
                except (NotFound, Conflict):
                    continue
                activity.logger.info("removed %s %s: its run %s/%s is gone or has ended", kind, obj.metadata.name,
                                     ns, run)
                removed += 1
            activity.heartbeat(f"swept {kind}s")
        return removed

    async def _run_holds(self, ns: str, name: str, uid: str) -> bool:
        """The run of that uid still exists and has not ended (its sidecar may still need its grant)."""
        if not (ns and name and uid):
            return False
        try:
            obj = await self.runs.get(ns, name, action=f"read AgentRun {ns}/{name}")
        except NotFound:
            return False
        return run_entry(obj).uid == uid and not run_entry(obj).prunable and not run_entry(obj).deleting


__all__ = ["PruneActivities", "RunEntry", "age_key", "agent_limit", "run_entry", "select_for_pruning"]
