"""The Kubernetes side of a run: every I/O step of AgentRunWorkflow.

Each activity is idempotent under retry: objects have deterministic names, a create that
finds the object already there adopts it (after checking it belongs to this run), and a
delete that finds nothing is done. Calls go through the access layer (`models.kube.Kube`):
one rate limit per worker, typed errors, and `kube_activity` turns what escapes an activity
into a retryable or non-retryable `ApplicationError` in one place (activities/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kubernetes import client
from temporalio import activity
from temporalio.exceptions import ApplicationError

from models.agentrun import AgentRunStatus
from models.base import FieldProblem
from models.evaluate import Reader, evaluate_run
from models.kube import BadRequest, Conflict, Kube, NotFound, RateLimiter, finalizer_added, finalizer_removed
from models.names import AGENTRUNS, GROUP, RUN_FINALIZER, VERSION, hook_of, lifecycle_name, workspace_name
from models.slots import slot_limit
from models.steps import (
    Cleanup,
    DeleteJob,
    HookOutcome,
    JobRef,
    JobRequest,
    JobState,
    Resolution,
    ResultRequest,
    RunningHook,
    StartRun,
    StatusWrite,
)

from . import manifests as mf
from .errors import application_error, kube_activity
from .results import AgentOutcome, agent_outcome, skip_reason

RUN_GONE = "RunGone"
LOG_TAIL_LINES = 1000


class KubeActivities:
    def __init__(self, api: client.ApiClient, *, default_image: str, fallback_poll_seconds: int = 60,
                 qps: float = 50.0, burst: int = 100) -> None:
        self.kube = Kube(api, qps=qps, burst=burst)
        self.api = api
        self.core, self.batch, self.rbac, self.custom = self.kube.core, self.kube.batch, self.kube.rbac, self.kube.custom
        self.default_image = default_image
        self.fallback_poll_seconds = fallback_poll_seconds

    @property
    def limiter(self) -> RateLimiter:
        return self.kube.limiter

    async def _call(self, fn: Callable[..., Any], *args: Any, action: str, **kw: Any) -> Any:
        return await self.kube.call(fn, *args, action=action, **kw)

    async def _create(self, fn: Callable[..., Any], namespace: str, body: dict[str, Any], *, read: Callable[..., Any],
                      uid: str) -> Any:
        """Create, or adopt an existing object of this run; another run's leftover is waited out."""
        kind, name = body["kind"], body["metadata"]["name"]
        try:
            return await self._call(fn, namespace, body, action=f"create {kind} {name}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            pass
        existing = await self._call(read, name, namespace, action=f"read {kind} {name}")
        owners = [o.uid for o in (existing.metadata.owner_references or [])]
        if owners and uid not in owners:
            # A same-named object of a deleted earlier run is still being removed: retry later.
            raise ApplicationError(f"{kind} {name} still belongs to an earlier run; waiting for it to go",
                                   type="LeftoverObject")
        return existing

    # -- run object -----------------------------------------------------------------------------

    async def _get_run(self, ns: str, name: str) -> dict[str, Any]:
        try:
            obj = await self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ns,
                                   AGENTRUNS, name, action=f"read AgentRun {ns}/{name}")
            return cast(dict[str, Any], obj)
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ns}/{name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e

    @activity.defn
    @kube_activity
    async def resolve_run(self, start: StartRun) -> Resolution:
        """Read the run, its Agent and policy; add our finalizer; resolve and validate the spec."""
        ref = start.ref
        run = await self._get_run(ref.namespace, ref.name)
        if run["metadata"]["uid"] != ref.uid:
            raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} was replaced by a newer object",
                                   type=RUN_GONE, non_retryable=True)
        await self._ensure_finalizer(run)
        # The same evaluation as the admission webhook's, so both refuse exactly the same runs.
        ev = await evaluate_run(run, read=self._reader(ref.namespace), default_image=self.default_image)
        out = Resolution(fallback_poll_seconds=self.fallback_poll_seconds, agent_name=ev.agent_name,
                         resolved=ev.resolved, problem=str(ev.problem) if ev.problem else None)
        if out.resolved is not None:
            # maxConcurrent: the run will wait for a slot of its Agent, in creation order.
            try:
                out.slots = slot_limit(ev.policy, created_at=str(run["metadata"].get("creationTimestamp") or ""))
            except FieldProblem as p:
                out.resolved, out.problem = None, str(p)
        return out

    def _reader(self, ns: str) -> Reader:
        async def read(plural: str, name: str) -> dict[str, Any] | None:
            try:
                obj = await self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ns,
                                       plural, name, action=f"read {plural} {ns}/{name}")
                return cast(dict[str, Any], obj)
            except NotFound:
                return None
        return read

    async def _ensure_finalizer(self, run: dict[str, Any]) -> None:
        m = run["metadata"]
        patch = finalizer_added(m, RUN_FINALIZER)
        if patch is None or m.get("deletionTimestamp"):
            return
        await self._call(self.custom.patch_namespaced_custom_object, GROUP, VERSION, m["namespace"], AGENTRUNS,
                         m["name"], patch, action=f"add finalizer to AgentRun {m['name']}")

    @activity.defn
    @kube_activity
    async def write_status(self, req: StatusWrite) -> None:
        """Write status through the status subresource; conditions are upserted by type, never duplicated."""
        ref = req.ref
        # Only the fields the workflow set (not None) are written; conditions are merged below.
        fields = req.status.model_dump(by_alias=True, exclude_none=True, mode="json")
        fields.pop("conditions", None)
        for _attempt in range(5):
            run = await self._get_run(ref.namespace, ref.name)
            if run["metadata"]["uid"] != ref.uid:
                raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} was replaced by a newer object",
                                       type=RUN_GONE, non_retryable=True)
            status = dict(run.get("status") or {})
            status.update(fields)
            if req.conditions:
                conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
                for c in req.conditions:
                    new = c.model_dump(by_alias=True, exclude_none=True, mode="json")
                    old = next((x for x in conds if x.get("type") == c.type), None)
                    if old is not None and old.get("status") == new.get("status") and "lastTransitionTime" in old:
                        new["lastTransitionTime"] = old["lastTransitionTime"]
                    conds = [x for x in conds if x.get("type") != c.type] + [new]
                status["conditions"] = conds
            body = {"metadata": {"resourceVersion": run["metadata"]["resourceVersion"]}, "status": status}
            try:
                await self._call(self.custom.patch_namespaced_custom_object_status, GROUP, VERSION, ref.namespace,
                                 AGENTRUNS, ref.name, body, action=f"write status of AgentRun {ref.name}")
                return
            except Conflict:
                continue  # someone wrote in between: re-read and merge again
        raise ApplicationError("status write kept conflicting", type="StatusConflict")

    # -- RBAC and workspace -------------------------------------------------------------------

    @activity.defn
    @kube_activity
    async def ensure_lifecycle_rbac(self, req: JobRequest) -> None:
        run = req.run
        await self._ensure_agent_account(run.ref.namespace)
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

    async def _ensure_agent_account(self, ns: str) -> None:
        body = mf.agent_service_account(ns)
        try:
            await self._call(self.core.create_namespaced_service_account, ns, body,
                             action=f"create ServiceAccount {body['metadata']['name']}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            pass  # there already: it is shared by every run of the namespace

    @activity.defn
    @kube_activity
    async def ensure_workspace(self, req: JobRequest) -> None:
        run = req.run
        await self._create(self.core.create_namespaced_persistent_volume_claim, run.ref.namespace,
                           mf.workspace_pvc(run), read=self.core.read_namespaced_persistent_volume_claim,
                           uid=run.ref.uid)

    # -- Jobs -----------------------------------------------------------------------------------

    @activity.defn
    @kube_activity
    async def create_job(self, req: JobRequest) -> JobRef:
        run = req.run
        if req.component == "prerun":
            body = mf.prerun_job(run, workflow_id=req.workflow_id)
        elif req.component == "agent-run":
            body = mf.agent_job(run, workflow_id=req.workflow_id)
        else:
            body = mf.postrun_job(run, workflow_id=req.workflow_id, agent_exit_code=req.agent_exit_code,
                                  agent_result=req.agent_result)
        job = await self._create(self.batch.create_namespaced_job, run.ref.namespace, body,
                                 read=self.batch.read_namespaced_job, uid=run.ref.uid)
        return JobRef(namespace=run.ref.namespace, name=job.metadata.name, uid=job.metadata.uid,
                      component=req.component)

    async def _pod_of(self, job: JobRef) -> Any | None:
        pods = await self._call(self.core.list_namespaced_pod, job.namespace,
                                label_selector=f"batch.kubernetes.io/controller-uid={job.uid}",
                                action=f"list pods of Job {job.name}")
        items: list[Any] = sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)
        return items[-1] if items else None

    @activity.defn
    @kube_activity
    async def check_job(self, job: JobRef) -> JobState:
        try:
            obj = await self._call(self.batch.read_namespaced_job, job.name, job.namespace, action=f"read Job {job.name}")
        except NotFound:
            return JobState(job=job, missing=True, finished=True)
        if obj.metadata.uid != job.uid:
            return JobState(job=job, missing=True, finished=True)
        state = JobState(job=job)
        for c in obj.status.conditions or []:
            if c.status == "True" and c.type in ("Complete", "Failed"):
                state.finished = True
                state.succeeded = c.type == "Complete"
                state.reason = c.reason or ""
        pod = await self._pod_of(job)
        if pod is not None:
            state.pod_name = pod.metadata.name
            for cs in pod.status.init_container_statuses or []:
                if cs.state and cs.state.running and cs.state.running.started_at:
                    state.running_hook = RunningHook(container=cs.name,
                                                     started_at=cs.state.running.started_at.isoformat())
        return state

    @activity.defn
    @kube_activity
    async def read_hook_outcome(self, state: JobState) -> HookOutcome:
        """Which hook failed (and how), or the preRun skip request."""
        job = state.job
        pod = await self._pod_of(job)
        if pod is None:
            return HookOutcome(ok=state.succeeded, message="" if state.succeeded else f"Job {job.name} has no pod")
        for cs in pod.status.init_container_statuses or []:
            term = cs.state.terminated if cs.state else None
            if cs.name == "setup":
                if term is not None and term.exit_code != 0:
                    return HookOutcome(ok=False, failed_hook="setup", exit_code=term.exit_code,
                                       message=f"workspace setup failed with exit code {term.exit_code}")
                continue
            hook = hook_of(cs.name)
            if term is not None and term.exit_code != 0:
                return HookOutcome(ok=False, failed_hook=hook, exit_code=term.exit_code,
                                   message=f'hook "{hook}" failed with exit code {term.exit_code}')
            if term is None and state.finished and not state.succeeded:
                why = "timed out" if state.reason == "DeadlineExceeded" else "did not finish"
                return HookOutcome(ok=False, failed_hook=hook, exit_code=124 if why == "timed out" else 1,
                                   message=f'hook "{hook}" {why}')
        if not state.succeeded:
            return HookOutcome(ok=False, exit_code=1, message=f"Job {job.name} failed ({state.reason or 'unknown'})")
        reason = None
        if job.component == "prerun":
            log = await self._log(job.namespace, pod.metadata.name, "done")
            reason = skip_reason(log)
        return HookOutcome(ok=True, skip_reason=reason)

    async def _log(self, ns: str, pod: str, container: str) -> str:
        try:
            text: str = await self._call(self.core.read_namespaced_pod_log, pod, ns, container=container,
                                         tail_lines=LOG_TAIL_LINES, action=f"read log of {pod}/{container}")
            return text
        except (BadRequest, NotFound):
            return ""  # the container never started, or the pod is gone

    @activity.defn
    @kube_activity
    async def read_agent_result(self, req: ResultRequest) -> AgentOutcome:
        pod = await self._pod_of(req.job)
        if pod is None:
            if req.timed_out:
                return agent_outcome("", None, timed_out=True)
            return AgentOutcome(status="error", error=f"agent Job {req.job.name} has no pod", exit_code=1)
        exit_code = None
        for cs in pod.status.container_statuses or []:
            if cs.name == "agent" and cs.state and cs.state.terminated:
                exit_code = cs.state.terminated.exit_code
        log = await self._log(req.job.namespace, pod.metadata.name, "agent")
        outcome = agent_outcome(log, exit_code, timed_out=req.timed_out)
        activity.logger.info("agent %s: %s (exit %s)", req.job.name, outcome.status, outcome.exit_code)
        return outcome

    @activity.defn
    @kube_activity
    async def delete_job(self, req: DeleteJob) -> None:
        await self._delete(self.batch.delete_namespaced_job, req.job.name, req.job.namespace,
                           propagation="Foreground" if req.foreground else "Background", uid=req.job.uid)

    async def _delete(self, fn: Callable[..., Any], name: str, ns: str, *, propagation: str = "Background",
                      uid: str | None = None) -> None:
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self._call(fn, name, ns, body=body, action=f"delete {name}")
        except (NotFound, Conflict):
            return  # gone already, or a newer object with that name is not ours

    @activity.defn
    @kube_activity
    async def cleanup(self, req: Cleanup) -> None:
        """Remove what the run created: Jobs (unless kept), the workspace PVC, the lifecycle RBAC."""
        ns, name, uid = req.ref.namespace, req.ref.name, req.ref.uid
        selector = f"{mf.LABEL_RUN}={name}"  # the list, like every call here, maps its errors
        if not req.keep_jobs or req.kill_jobs:
            jobs = await self._call(self.batch.list_namespaced_job, ns, label_selector=selector,
                                   action=f"list Jobs of AgentRun {name}")
            for job in jobs.items:
                if any(o.uid == uid for o in job.metadata.owner_references or []):
                    await self._delete(self.batch.delete_namespaced_job, job.metadata.name, ns,
                                       propagation="Foreground", uid=job.metadata.uid)
        await self._delete_owned(self.core.delete_namespaced_persistent_volume_claim,
                                 self.core.read_namespaced_persistent_volume_claim, workspace_name(name), ns, uid)
        lc = lifecycle_name(name)
        await self._delete_owned(self.rbac.delete_namespaced_role_binding, self.rbac.read_namespaced_role_binding,
                                 lc, ns, uid)
        await self._delete_owned(self.rbac.delete_namespaced_role, self.rbac.read_namespaced_role, lc, ns, uid)
        await self._delete_owned(self.core.delete_namespaced_service_account, self.core.read_namespaced_service_account,
                                 lc, ns, uid)

    async def _delete_owned(self, delete: Callable[..., Any], read: Callable[..., Any], name: str, ns: str,
                            run_uid: str) -> None:
        """Delete `name` only if this run owns it (a same-named object of a newer run is left alone)."""
        try:
            obj = await self._call(read, name, ns, action=f"read {name}")
        except NotFound:
            return
        if not any(o.uid == run_uid for o in obj.metadata.owner_references or []):
            return
        await self._delete(delete, name, ns, uid=obj.metadata.uid)

    @activity.defn
    @kube_activity
    async def release_run(self, start: StartRun) -> None:
        """Remove our finalizer, so a deleted run object goes away once cleanup is done."""
        ref = start.ref
        for _attempt in range(5):
            try:
                run = await self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ref.namespace,
                                       AGENTRUNS, ref.name, action=f"read AgentRun {ref.namespace}/{ref.name}")
            except NotFound:
                return  # already gone (any other failure is retried: the finalizer must go)
            if run["metadata"]["uid"] != ref.uid:
                return
            patch = finalizer_removed(run["metadata"], RUN_FINALIZER)
            if patch is None:
                return
            try:
                await self._call(self.custom.patch_namespaced_custom_object, GROUP, VERSION, ref.namespace,
                                 AGENTRUNS, ref.name, patch, action=f"remove finalizer of AgentRun {ref.name}")
                return
            except NotFound:
                return
            except Conflict:
                continue

    def all(self) -> list[Callable[..., Any]]:
        return [self.resolve_run, self.write_status, self.ensure_lifecycle_rbac, self.ensure_workspace,
                self.create_job, self.check_job, self.read_hook_outcome, self.read_agent_result,
                self.delete_job, self.cleanup, self.release_run]


__all__ = ["AgentRunStatus", "KubeActivities"]
