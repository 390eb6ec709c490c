"""What a run made, and its removal: the lifecycle RBAC, the namespace's agent account, SkillPack sidecars' per-run
accounts, grants and tokens, the input Secret, the workspace PVC, and the Jobs.

Owned by `KubeActivities` (activities/kube.py). Every object has a deterministic name; a create that finds it there
adopts it after checking it belongs to this run (a leftover of a deleted same-named run is waited out), and a delete
removes only what this run owns (its uid as the owner, or as a precondition), so a retried step or a newer run of the
same name is never harmed.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

from temporalio.exceptions import ApplicationError

from kube import Conflict, Kube, NotFound
from models.names import LABEL_RUN, LABEL_RUN_UID, lifecycle_name, workspace_name
from models.resolve import ResolvedRun, RunRef
from models.skills import sidecar_account, sidecar_cluster_role
from models.steps import CleanUp, Cleanup, JobRef, JobRequest

from . import manifests as mf
from . import skill_manifests as skm
from .errors import application_error

AGENT_ACCOUNT_RECHECK_SECONDS = 60.0
# A parked run's pods (SPEC §10: none may exist while it waits) are looked for this often, for at most this long in
# one try of the step (within its KUBE_CALL); still there, the step fails and is retried with backoff.
PODS_GONE_POLL_SECONDS = 0.25
PODS_GONE_WAIT_SECONDS = 20.0


class RunMade:
    """Creates and removes the objects a run is made of, on the worker's client."""

    def __init__(self, kube: Kube) -> None:
        self.kube, self.core, self.batch, self.rbac = kube, kube.core, kube.batch, kube.rbac
        self._agent_accounts: dict[str, float] = {}  # namespace -> when its agent ServiceAccount was last ensured

    async def _create(self, fn: Callable[..., Any], namespace: str, body: dict[str, Any], *, read: Callable[..., Any],
                      uid: str) -> Any:
        """Create, or adopt an existing object of this run; another run's leftover is waited out."""
        kind, name = body["kind"], body["metadata"]["name"]
        try:
            return await self.kube.call(fn, namespace, body, action=f"create {kind} {name}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            pass
        existing = await self.kube.call(read, name, namespace, action=f"read {kind} {name}")
        owners = [o.uid for o in (existing.metadata.owner_references or [])]
        if owners and uid not in owners:
            # A same-named object of a deleted earlier run is still being removed: retry later.
            raise ApplicationError(f"{kind} {name} still belongs to an earlier run; waiting for it to go",
                                   type="LeftoverObject")
        return existing

    async def ensure_lifecycle_rbac(self, req: JobRequest) -> None:
        run = req.run
        await self.ensure_agent_account(run.ref.namespace)
        if not run.rbac:
            return
        sa, role, binding = mf.lifecycle_rbac(run)
        ns = run.ref.namespace
        await self._create(self.core.create_namespaced_service_account, ns, sa,
                           read=self.core.read_namespaced_service_account, uid=run.ref.uid)
        await self._create(self.rbac.create_namespaced_role, ns, role, read=self.rbac.read_namespaced_role,
                           uid=run.ref.uid)
        await self._create(self.rbac.create_namespaced_role_binding, ns, binding,
                           read=self.rbac.read_namespaced_role_binding, uid=run.ref.uid)

    async def _ensure_skill_rbac(self, run: ResolvedRun) -> None:
        """Each SkillPack sidecar's per-run account, Role (exactly the pack's rules), RoleBinding, and a fresh token
        of that account in its Secret (activities/skill_manifests.py says why). Made with each agent Job, so a
        retried attempt's sidecar has a token that lasts its whole run.

        The Secret is created with its token in it, and one already there (this step's earlier try, an earlier
        attempt's, or a leftover of a deleted same-named run) is replaced: the worker never reads nor patches a
        Secret, so its Role grants only create and delete on them (the names `sympozium-skill-*` are ours)."""
        ns, uid = run.ref.namespace, run.ref.uid
        for pack, (sa, secret, role, binding) in zip(run.sidecars, mf.skill_rbac(run), strict=True):
            name = sa["metadata"]["name"]
            await self._create(self.core.create_namespaced_service_account, ns, sa,
                               read=self.core.read_namespaced_service_account, uid=uid)
            await self._create(self.rbac.create_namespaced_role, ns, role, read=self.rbac.read_namespaced_role, uid=uid)
            await self._create(self.rbac.create_namespaced_role_binding, ns, binding,
                               read=self.rbac.read_namespaced_role_binding, uid=uid)
            for body in skm.sidecar_cluster_rbac(run, pack):
                await self._create_cluster_rbac(body, uid)
            answer = await self.kube.call(self.core.create_namespaced_service_account_token, name, ns,
                                          skm.token_request(run), action=f"request a token for ServiceAccount {name}")
            token = base64.b64encode(answer.status.token.encode()).decode()
            body = {**secret, "data": {skm.TOKEN_KEY: token}}
            try:
                await self.kube.call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")
            except Conflict:
                await self.delete(self.core.delete_namespaced_secret, name, ns)
                await self.kube.call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")

    async def _ensure_input(self, run: ResolvedRun, attempt: int) -> None:
        """The Secret with the run's task or system prompt too long for an env var (activities/manifests.py), for
        the agent to read as files; a run whose texts fit env vars has none. Its content follows from the resolved
        run alone, so one found at a later attempt is this run's first attempt's; one found at the first (an
        earlier try of this step, or a leftover of a deleted same-named run) is replaced, since the worker never
        reads a Secret. Owned by the run: it goes with the run object."""
        body = mf.input_secret(run)
        if body is None:
            return
        ns, name = run.ref.namespace, body["metadata"]["name"]
        try:
            await self.kube.call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")
        except Conflict:
            if attempt > 1:
                return
            await self.delete(self.core.delete_namespaced_secret, name, ns)
            await self.kube.call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")

    async def _create_cluster_rbac(self, body: dict[str, Any], uid: str) -> None:
        """A sidecar's per-run ClusterRole or ClusterRoleBinding (no namespace, no owner): created, or adopted when
        its run-uid label says it is this run's (a retried step made it). The worker may only grant what it holds: a
        clusterRBAC beyond the chart's worker.grantableClusterRules is refused (Forbidden), and so is the run."""
        kind, name = body["kind"], body["metadata"]["name"]
        create, read = ((self.rbac.create_cluster_role, self.rbac.read_cluster_role) if kind == "ClusterRole" else
                        (self.rbac.create_cluster_role_binding, self.rbac.read_cluster_role_binding))
        try:
            await self.kube.call(create, body, action=f"create {kind} {name}")
            return
        except Conflict:
            pass
        existing = await self.kube.call(read, name, action=f"read {kind} {name}")
        if (existing.metadata.labels or {}).get(LABEL_RUN_UID) != uid:
            raise ApplicationError(f"{kind} {name} belongs to another run; waiting for it to go", type="LeftoverObject")

    async def delete_skill_rbac(self, run: ResolvedRun) -> None:
        ns, uid = run.ref.namespace, run.ref.uid
        for p in run.sidecars:
            name = sidecar_account(run.ref.name, p.name)
            # The cluster-wide grant first (the binding, then the role), then the Secret (by name: the worker reads no
            # Secret), the RoleBinding, Role and account: the token stops working with its account.
            if p.sidecar is not None and p.sidecar.cluster_rules:
                cluster = sidecar_cluster_role(ns, run.ref.name, uid, p.name)
                await self._delete_cluster(self.rbac.delete_cluster_role_binding, cluster)
                await self._delete_cluster(self.rbac.delete_cluster_role, cluster)
            await self.delete(self.core.delete_namespaced_secret, name, ns)
            await self.delete_rbac(ns, name, uid)

    async def _delete_cluster(self, fn: Callable[..., Any], name: str) -> None:
        try:
            await self.kube.call(fn, name, body={"propagationPolicy": "Background"}, action=f"delete {name}")
        except NotFound:
            return

    async def ensure_agent_account(self, ns: str) -> None:
        """The namespace's shared agent ServiceAccount exists: made (or found) at most once a minute per
        namespace by this worker, not once per run (one deleted by hand is back within the minute)."""
        made = self._agent_accounts.get(ns)
        if made is not None and time.monotonic() - made < AGENT_ACCOUNT_RECHECK_SECONDS:
            return
        body = mf.agent_service_account(ns)
        try:
            await self.kube.call(self.core.create_namespaced_service_account, ns, body,
                                 action=f"create ServiceAccount {body['metadata']['name']}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            pass  # there already: it is shared by every run of the namespace
        self._agent_accounts[ns] = time.monotonic()

    async def ensure_workspace(self, req: JobRequest) -> str:
        """The workspace PVC exists: its uid."""
        run = req.run
        pvc = await self._create(self.core.create_namespaced_persistent_volume_claim, run.ref.namespace,
                                 mf.workspace_pvc(run), read=self.core.read_namespaced_persistent_volume_claim,
                                 uid=run.ref.uid)
        return str(pvc.metadata.uid)

    async def create_job(self, req: JobRequest, annotations: dict[str, str] | None = None) -> tuple[JobRef, Any]:
        """The Job (created, or adopted when a retried step made it already) and the object as the server has it."""
        run = req.run
        if req.component == "prerun":
            body = mf.prerun_job(run, workflow_id=req.workflow_id)
        elif req.component == "agent-run":
            await self._ensure_skill_rbac(run)
            await self._ensure_input(run, req.attempt)
            body = mf.agent_job(run, workflow_id=req.workflow_id, attempt=req.attempt, task=req.task,
                                restart=req.restart, deadline_seconds=req.deadline_seconds, resumed=req.resumed,
                                resume=req.resume)
        else:
            body = mf.postrun_job(run, workflow_id=req.workflow_id, agent_exit_code=req.agent_exit_code,
                                  agent_result=req.agent_result, component=req.component, gate_only=req.gate_only,
                                  attempt=req.attempt, gate_verdict=req.gate_verdict)
        if annotations:
            body["metadata"].setdefault("annotations", {}).update(annotations)
        body = mf.traced(body, req.traceparent)
        job = await self._create(self.batch.create_namespaced_job, run.ref.namespace, body,
                                 read=self.batch.read_namespaced_job, uid=run.ref.uid)
        ref = JobRef(namespace=run.ref.namespace, name=job.metadata.name, uid=job.metadata.uid,
                     component=req.component, labelled=LABEL_RUN_UID in (job.metadata.labels or {}))
        return ref, job

    async def delete(self, fn: Callable[..., Any], name: str, ns: str, *, propagation: str = "Background",
                      uid: str | None = None) -> None:
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self.kube.call(fn, name, ns, body=body, action=f"delete {name}")
        except (NotFound, Conflict):
            return  # gone already, or a newer object with that name is not ours

    async def remove_all(self, req: Cleanup) -> None:
        """Remove what the run created: Jobs (unless kept), the workspace PVC, the lifecycle RBAC."""
        ns, name, uid = req.ref.namespace, req.ref.name, req.ref.uid
        if not req.keep_jobs or req.kill_jobs:
            await self.delete_jobs_of(ns, name, uid)
        await self.delete_owned(self.core.delete_namespaced_persistent_volume_claim,
                                self.core.read_namespaced_persistent_volume_claim, workspace_name(name), ns, uid)
        await self.delete_rbac(ns, lifecycle_name(name), uid)

    async def remove(self, req: CleanUp) -> None:
        """What a finished run made (its final status and logs are the caller's, first): the Jobs unless kept (one
        request for those labelled with the run's uid), the workspace, the lifecycle RBAC and the sidecars'."""
        run = req.run
        if run is None:
            return
        ns, name, uid = req.ref.namespace, req.ref.name, req.ref.uid
        if not req.kill and not req.keep_jobs:
            if any(job.labelled for job in req.jobs):
                # One request for all of them: exactly this run's (by its uid), whatever their names.
                await self.kube.call(self.batch.delete_collection_namespaced_job, ns,
                                     label_selector=f"{LABEL_RUN_UID}={uid}", propagation_policy="Foreground",
                                     action=f"delete the Jobs of AgentRun {name}")
            for job in req.jobs:
                if not job.labelled:  # made before the run-uid label: one by one
                    await self.delete(self.batch.delete_namespaced_job, job.name, ns, propagation="Foreground",
                                      uid=job.uid)
        if run.has_workspace:
            if req.workspace_uid:
                await self.delete(self.core.delete_namespaced_persistent_volume_claim, workspace_name(name), ns,
                                  uid=req.workspace_uid)
            else:
                await self.delete_owned(self.core.delete_namespaced_persistent_volume_claim,
                                        self.core.read_namespaced_persistent_volume_claim, workspace_name(name),
                                        ns, uid)
        if run.rbac:
            await self.delete_rbac(ns, lifecycle_name(name), uid)
        await self.delete_skill_rbac(run)

    async def delete_jobs_of(self, ns: str, name: str, uid: str) -> None:
        jobs = await self.kube.call(self.batch.list_namespaced_job, ns, label_selector=f"{LABEL_RUN}={name}",
                                    action=f"list Jobs of AgentRun {name}")
        for job in jobs.items:
            if any(o.uid == uid for o in job.metadata.owner_references or []):
                await self.delete(self.batch.delete_namespaced_job, job.metadata.name, ns,
                                  propagation="Foreground", uid=job.metadata.uid)

    async def delete_rbac(self, ns: str, account: str, uid: str) -> None:
        """The RoleBinding, Role and ServiceAccount named `account` (a run's lifecycle RBAC, or a sidecar's)."""
        await self.delete_owned(self.rbac.delete_namespaced_role_binding, self.rbac.read_namespaced_role_binding,
                                account, ns, uid)
        await self.delete_owned(self.rbac.delete_namespaced_role, self.rbac.read_namespaced_role, account, ns, uid)
        await self.delete_owned(self.core.delete_namespaced_service_account, self.core.read_namespaced_service_account,
                                account, ns, uid)

    async def delete_owned(self, delete: Callable[..., Any], read: Callable[..., Any], name: str, ns: str,
                            run_uid: str) -> None:
        """Delete `name` only if this run owns it (a same-named object of a newer run is left alone)."""
        try:
            obj = await self.kube.call(read, name, ns, action=f"read {name}")
        except NotFound:
            return
        if not any(o.uid == run_uid for o in obj.metadata.owner_references or []):
            return
        await self.delete(delete, name, ns, uid=obj.metadata.uid)

    async def pods_gone(self, ref: RunRef) -> None:
        """Until no pod labelled with the run is left (ended ones too: a pod object is a pod), at most
        PODS_GONE_WAIT_SECONDS; then a retryable failure that names them."""
        deadline = time.monotonic() + PODS_GONE_WAIT_SECONDS
        while True:
            pods = await self.kube.call(self.core.list_namespaced_pod, ref.namespace, label_selector=f"{LABEL_RUN}={ref.name}",
                                        action=f"list the pods of AgentRun {ref.name}")
            left = sorted(p.metadata.name for p in pods.items)
            if not left:
                return
            if time.monotonic() >= deadline:
                raise ApplicationError(f"pods of AgentRun {ref.namespace}/{ref.name} are still going: "
                                       f"{', '.join(left)}", type="PodsStillThere")
            await asyncio.sleep(PODS_GONE_POLL_SECONDS)


__all__ = ["RunMade"]
