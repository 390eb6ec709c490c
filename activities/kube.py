"""The Kubernetes side of a run: every I/O step of AgentRunWorkflow.

Each activity is idempotent under retry: objects have deterministic names, a create that
finds the object already there adopts it (after checking it belongs to this run), and a
delete that finds nothing is done. Calls go through the access layer (`kube.Kube`):
one rate limit per worker, typed errors, and `kube_activity` turns what escapes an activity
into a retryable or non-retryable `ApplicationError` in one place (activities/errors.py).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from temporalio import activity
from temporalio.exceptions import ApplicationError

from kube import (
    BadRequest,
    Conflict,
    Invalid,
    Kube,
    KubeError,
    NotFound,
    finalizer_added,
    sympozium,
)
from kube.informer import Informer
from models import run_logs
from models.agentrun import AgentRunStatus, DelegateStatus
from models.approvals import TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION
from models.base import FieldProblem, PolicyViolation
from models.evaluate import Reader, RunLister, evaluate_run, lifecycle_author
from models.events import RunEvent
from models.gate import VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION
from models.names import (
    AGENTRUNS,
    ANNOTATION_GATE_FROM,
    GROUP,
    LABEL_PARENT_RUN,
    LABEL_RUN,
    LABEL_RUN_UID,
    RUN_FINALIZER,
    VERSION,
    hook_of,
    job_name,
    lifecycle_name,
    workspace_name,
)
from models.resolve import ResolvedRun, RunRef
from models.run import Phase, StatusUpdate
from models.skills import sidecar_account, sidecar_cluster_role
from models.slots import slot_limit
from models.steps import (
    BeginRun,
    CleanUp,
    Cleanup,
    DeleteJob,
    HookOutcome,
    JobRef,
    JobReport,
    JobRequest,
    JobStarted,
    JobState,
    ObserveJob,
    ParkAgent,
    Parked,
    Pricing,
    Published,
    Resolution,
    ResultRequest,
    RunningHook,
    StartJob,
    StartRun,
    StatusChange,
    StatusWrite,
)

from . import manifests as mf
from . import skill_manifests as skm
from .errors import application_error, kube_activity
from .events import EventActivities
from .manifests import RUN_MARKER, SKIP_MARKER
from .pricing import PriceSource
from .results import AgentOutcome, agent_outcome, lost_outcome, lost_why, skip_reason

RUN_GONE = "RunGone"
LOG_TAIL_LINES = 1000
ENDED = ("Succeeded", "Failed")
# How long a step woken by a finished Job waits for the shared view to see its pod end before it
# lists pods (the view is normally milliseconds behind; a broken watch costs this once per step).
POD_END_WAIT_SECONDS = 2.0
AGENT_ACCOUNT_RECHECK_SECONDS = 60.0
# A parked run's pods (SPEC §10: none may exist while it waits) are looked for this often, for at most this long in
# one try of the step (within its KUBE_CALL); still there, the step fails and is retried with backoff.
PODS_GONE_POLL_SECONDS = 0.25
PODS_GONE_WAIT_SECONDS = 20.0


def _state_of(job: JobRef, obj: Any) -> JobState:
    """A Job object's Complete or Failed condition, as a JobState."""
    state = JobState(job=job)
    for c in obj.status.conditions or []:
        if c.status == "True" and c.type in ("Complete", "Failed"):
            state.finished = True
            state.succeeded = c.type == "Complete"
            state.reason = c.reason or ""
    return state


def _see_pod(state: JobState, pod: Any | None) -> None:
    """What the Job's newest pod tells: its name, and the hook container running in it."""
    if pod is None:
        return
    state.pod_name = pod.metadata.name
    for cs in pod.status.init_container_statuses or []:
        if cs.state and cs.state.running and cs.state.running.started_at:
            state.running_hook = RunningHook(container=cs.name, started_at=cs.state.running.started_at.isoformat())


def _termination_message(pod: Any, container: str) -> str:
    for cs in pod.status.container_statuses or []:
        if cs.name == container and cs.state and cs.state.terminated:
            return str(cs.state.terminated.message or "")
    return ""


class KubeActivities:
    def __init__(self, api: client.ApiClient, *, default_image: str, fallback_poll_seconds: int = 60,
                 qps: float = 50.0, burst: int = 100, events: EventActivities | None = None,
                 informer: Informer | None = None, keep_log_bytes: int = run_logs.DEFAULT_KEEP_LOG_BYTES,
                 agent_restarts: int = 0, tools_image: str = "", prices: PriceSource | None = None,
                 agent_otlp_endpoint: str = "") -> None:
        self.kube = Kube(api, qps=qps, burst=burst)
        # The worker's shared view of Jobs, pods, Agents and policies: looks are answered from it where it can.
        self.informer = informer
        # Steps publish the run events they are handed (without a NATS URL, publishing does nothing).
        self.events = events or EventActivities(None)
        self.api = api
        self.core, self.batch, self.rbac = self.kube.core, self.kube.batch, self.kube.rbac
        self.runs = sympozium(self.kube, AGENTRUNS, kind="AgentRun")
        self.node = client.NodeV1Api(api)
        self.default_image = default_image
        self.fallback_poll_seconds = fallback_poll_seconds
        # How often a run's agent is started again after its pod was lost (its runs keep a journal for it).
        self.agent_restarts = agent_restarts
        # The tools container's image (where a run without a sandbox runs its commands); "": the run's own image.
        self.tools_image = tools_image
        self._agent_accounts: dict[str, float] = {}  # namespace -> when its agent ServiceAccount was last ensured
        # What agents' tokens cost (activities/pricing.py): genai-prices, local providers, the prices ConfigMap.
        self.prices = prices or PriceSource(None)
        # Where the agents of Agents whose observability names no endpoint export their spans ("" : nowhere).
        self.agent_otlp_endpoint = agent_otlp_endpoint
        self.keep_log_bytes = keep_log_bytes  # of each container's log, kept at cleanup (0: none)

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
            return await self.runs.get(ns, name, action=f"read AgentRun {ns}/{name}")
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ns}/{name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e

    @activity.defn
    @kube_activity
    async def resolve_run(self, start: StartRun) -> Resolution:
        """Read the run, its Agent and policy; add our finalizer; resolve and validate the spec."""
        ref = start.ref
        run = await self._finalized_as_seen(start)
        if run is None:
            run = await self._get_run(ref.namespace, ref.name)
            if run["metadata"]["uid"] != ref.uid:
                raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} was replaced by a newer object",
                                       type=RUN_GONE, non_retryable=True)
            await self._ensure_finalizer(run)
        # The same evaluation as the admission webhook's, so both refuse exactly the same runs.
        ev = await evaluate_run(run, read=self._reader(ref.namespace), default_image=self.default_image,
                                list_runs=self._run_lister(ref.namespace), runtime_class_exists=self._runtime_class_exists)
        if ev.resolved is not None and ev.parent_run is not None:
            await self._link_parent(run, ev.parent_run)
        out = Resolution(fallback_poll_seconds=self.fallback_poll_seconds, agent_name=ev.agent_name,
                         resolved=ev.resolved, problem=str(ev.problem) if ev.problem else None,
                         problem_is_policy=isinstance(ev.problem, PolicyViolation), ignored=ev.ignored,
                         lifecycle_author=lifecycle_author(run, ev))
        if out.resolved is not None:
            # maxConcurrent: the run will wait for a slot of its Agent, in creation order.
            try:
                out.slots = slot_limit(ev.policy, created_at=str(run["metadata"].get("creationTimestamp") or ""))
            except FieldProblem as p:
                out.resolved, out.problem = None, str(p)
        return out

    async def _finalized_as_seen(self, start: StartRun) -> dict[str, Any] | None:
        """Add the finalizer to the object as the bridge saw it, with no read first: the patch carries that
        resourceVersion (so it fails if the object changed since, or is another object) and answers with
        the object as it now is. None when there is no such version to go on, or it is gone: read then."""
        ref = start.ref
        patch = finalizer_added({"finalizers": start.finalizers, "resourceVersion": start.resource_version},
                                RUN_FINALIZER) if start.resource_version else None
        if patch is None:
            return None
        try:
            run = await self.runs.patch(ref.namespace, ref.name, patch, action=f"add finalizer to AgentRun {ref.name}")
        except (Conflict, NotFound, Invalid):
            return None  # changed since (or deleted, or being deleted): the careful way tells which
        return run if run["metadata"]["uid"] == ref.uid else None

    def _run_lister(self, ns: str) -> RunLister:
        async def list_runs() -> list[dict[str, Any]]:
            return await self.runs.items(ns, action=f"list AgentRuns in {ns}")
        return list_runs

    async def _runtime_class_exists(self, name: str) -> bool:
        # Read at start: on a real cluster a Job whose pod names a missing RuntimeClass only records FailedCreate
        # events and never makes a pod, so the run would wait for its deadline instead of failing now.
        try:
            await self._call(self.node.read_runtime_class, name, action=f"read RuntimeClass {name}")
        except NotFound:
            return False
        return True

    async def _link_parent(self, run: dict[str, Any], parent_obj: dict[str, Any]) -> None:
        """A sub-agent is labelled with its parent (`sympozium.ai/parent-run`, as Sympozium names it) and owned by
        it, so the parent's children are one label selector away and deleting the parent deletes (and so cancels)
        them through the garbage collector."""
        m = run["metadata"]
        refs = list(m.get("ownerReferences") or [])
        parent_name, uid = parent_obj["metadata"]["name"], parent_obj["metadata"]["uid"]
        labelled = (m.get("labels") or {}).get(LABEL_PARENT_RUN) == parent_name
        if not (labelled and any(r.get("uid") == uid for r in refs)):
            refs = [r for r in refs if r.get("uid") != uid] + [
                {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentRun", "name": parent_name, "uid": uid,
                 "blockOwnerDeletion": False}]
            patch = {"metadata": {"labels": {LABEL_PARENT_RUN: parent_name}, "ownerReferences": refs}}
            await self.runs.patch(m["namespace"], m["name"], patch,
                                  action=f"link AgentRun {m['name']} to its parent {parent_name}")
        await self._record_child(parent_obj, m["name"])

    async def _record_child(self, parent_obj: dict[str, Any], child: str) -> None:
        """The parent's `status.delegates` lists its children (Sympozium's field). The parent's workflow never
        writes that field (it replaces its conditions whole, which is why the list is not a condition), and the
        write carries the version it read, so two children starting at once cannot lose each other: after a
        conflict the parent is read again (`update_with_retry`)."""
        pm = parent_obj["metadata"]
        ns, parent, parent_uid = pm["namespace"], pm["name"], pm["uid"]

        def listed(obj: dict[str, Any]) -> dict[str, Any] | None:
            if obj["metadata"]["uid"] != parent_uid or obj["metadata"].get("deletionTimestamp"):
                return None
            delegates = [d for d in (obj.get("status") or {}).get("delegates") or [] if isinstance(d, dict)]
            if any(d.get("childRunName") == child for d in delegates):
                return None
            obj["status"] = {**(obj.get("status") or {}),
                             "delegates": [*delegates, DelegateStatus(child_run_name=child).wire()]}
            return obj

        try:
            await self.runs.update_with_retry((ns, parent), listed, status=True, first=parent_obj,
                                              action=f"list sub-agent {child} on AgentRun {parent}")
        except (NotFound, Conflict):
            return  # the parent is gone, or kept changing: the child is not listed (as before the access layer)

    def _reader(self, ns: str) -> Reader:
        async def read(plural: str, name: str) -> dict[str, Any] | None:
            held = self.informer.definition(plural, ns, name) if self.informer is not None else None
            if held is not None:
                return held  # as the worker's view last saw it: no request
            try:
                return await sympozium(self.kube, plural).get(ns, name, action=f"read {plural} {ns}/{name}")
            except NotFound:
                return None
        return read

    async def _ensure_finalizer(self, run: dict[str, Any]) -> None:
        m = run["metadata"]
        patch = finalizer_added(m, RUN_FINALIZER)
        if patch is None or m.get("deletionTimestamp"):
            return
        await self.runs.patch(m["namespace"], m["name"], patch, action=f"add finalizer to AgentRun {m['name']}")

    @activity.defn
    @kube_activity
    async def write_status(self, req: StatusWrite) -> None:
        """Write status through the status subresource; conditions are upserted by type, never duplicated."""
        ref = req.ref
        # Only the fields the workflow set (not None) are written; conditions are merged below.
        fields = req.status.model_dump(by_alias=True, exclude_none=True, mode="json")
        fields.pop("conditions", None)

        def merged(run: dict[str, Any]) -> dict[str, Any]:
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
            run["status"] = status
            return run

        try:
            # Someone wrote in between: re-read and merge again.
            await self.runs.update_with_retry((ref.namespace, ref.name), merged, status=True,
                                              action=f"write status of AgentRun {ref.name}")
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e
        except Conflict as e:
            raise ApplicationError("status write kept conflicting", type="StatusConflict") from e

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
            answer = await self._call(self.core.create_namespaced_service_account_token, name, ns,
                                      skm.token_request(run), action=f"request a token for ServiceAccount {name}")
            token = base64.b64encode(answer.status.token.encode()).decode()
            body = {**secret, "data": {skm.TOKEN_KEY: token}}
            try:
                await self._call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")
            except Conflict:
                await self._delete(self.core.delete_namespaced_secret, name, ns)
                await self._call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")

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
            await self._call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")
        except Conflict:
            if attempt > 1:
                return
            await self._delete(self.core.delete_namespaced_secret, name, ns)
            await self._call(self.core.create_namespaced_secret, ns, body, action=f"create Secret {name}")

    async def _create_cluster_rbac(self, body: dict[str, Any], uid: str) -> None:
        """A sidecar's per-run ClusterRole or ClusterRoleBinding (no namespace, no owner): created, or adopted when
        its run-uid label says it is this run's (a retried step made it). The worker may only grant what it holds: a
        clusterRBAC beyond the chart's worker.grantableClusterRules is refused (Forbidden), and so is the run."""
        kind, name = body["kind"], body["metadata"]["name"]
        create, read = ((self.rbac.create_cluster_role, self.rbac.read_cluster_role) if kind == "ClusterRole" else
                        (self.rbac.create_cluster_role_binding, self.rbac.read_cluster_role_binding))
        try:
            await self._call(create, body, action=f"create {kind} {name}")
            return
        except Conflict:
            pass
        existing = await self._call(read, name, action=f"read {kind} {name}")
        if (existing.metadata.labels or {}).get(LABEL_RUN_UID) != uid:
            raise ApplicationError(f"{kind} {name} belongs to another run; waiting for it to go", type="LeftoverObject")

    async def _delete_skill_rbac(self, run: ResolvedRun) -> None:
        ns, uid = run.ref.namespace, run.ref.uid
        for p in run.sidecars:
            name = sidecar_account(run.ref.name, p.name)
            # The cluster-wide grant first (the binding, then the role), then the Secret (by name: the worker reads no
            # Secret), the RoleBinding, Role and account: the token stops working with its account.
            if p.sidecar is not None and p.sidecar.cluster_rules:
                cluster = sidecar_cluster_role(ns, run.ref.name, uid, p.name)
                await self._delete_cluster(self.rbac.delete_cluster_role_binding, cluster)
                await self._delete_cluster(self.rbac.delete_cluster_role, cluster)
            await self._delete(self.core.delete_namespaced_secret, name, ns)
            await self._delete_rbac(ns, name, uid)

    async def _delete_cluster(self, fn: Callable[..., Any], name: str) -> None:
        try:
            await self._call(fn, name, body={"propagationPolicy": "Background"}, action=f"delete {name}")
        except NotFound:
            return

    async def _ensure_agent_account(self, ns: str) -> None:
        """The namespace's shared agent ServiceAccount exists: made (or found) at most once a minute per
        namespace by this worker, not once per run (one deleted by hand is back within the minute)."""
        made = self._agent_accounts.get(ns)
        if made is not None and time.monotonic() - made < AGENT_ACCOUNT_RECHECK_SECONDS:
            return
        body = mf.agent_service_account(ns)
        try:
            await self._call(self.core.create_namespaced_service_account, ns, body,
                             action=f"create ServiceAccount {body['metadata']['name']}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            pass  # there already: it is shared by every run of the namespace
        self._agent_accounts[ns] = time.monotonic()

    @activity.defn
    @kube_activity
    async def ensure_workspace(self, req: JobRequest) -> None:
        await self._ensure_workspace(req)

    async def _ensure_workspace(self, req: JobRequest) -> str:
        """The workspace PVC exists: its uid."""
        run = req.run
        pvc = await self._create(self.core.create_namespaced_persistent_volume_claim, run.ref.namespace,
                                 mf.workspace_pvc(run), read=self.core.read_namespaced_persistent_volume_claim,
                                 uid=run.ref.uid)
        return str(pvc.metadata.uid)

    # -- Jobs -----------------------------------------------------------------------------------

    @activity.defn
    @kube_activity
    async def create_job(self, req: JobRequest) -> JobRef:
        return (await self._create_job(req))[0]

    async def _create_job(self, req: JobRequest, annotations: dict[str, str] | None = None) -> tuple[JobRef, Any]:
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

    async def _clear_verdict(self, ref: RunRef, keys: tuple[str, str] = (VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION),
                             what: str = "gate-verdict") -> str:
        """Remove a verdict annotation written before the gate (and its writer's stamp): the run's new version.
        (`keys`, `what`: the tool-verdict annotation of a parked agent's calls, SPEC §10.)

        No uid test is needed: the run's finalizer keeps this object (this uid) until the run is cleaned up."""
        patch = {"metadata": {"annotations": dict.fromkeys(keys)}}
        try:
            obj = await self.runs.patch(ref.namespace, ref.name, patch, content_type="application/merge-patch+json",
                                        action=f"clear the {what} annotation of AgentRun {ref.name}")
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e
        return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")

    async def _start_gate_job(self, req: StartJob) -> tuple[JobRef, str]:
        """The gate's Job, after clearing any earlier verdict annotation. The run's version from that moment
        is kept on the Job, so a retried step that finds the Job made reads it back instead of clearing
        again (which could remove the gate hook's own verdict)."""
        if activity.info().attempt > 1:
            try:
                job = await self._call(self.batch.read_namespaced_job, job_name(req.job.run.ref.name, "post-run",
                                                                                req.job.attempt),
                                       req.job.run.ref.namespace, action="read the gate's Job")
                if (job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) is not None:
                    ref, job = await self._create_job(req.job)  # adopts it (and checks it is this run's)
                    return ref, str((job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) or "")
            except NotFound:
                pass
        version = await self._clear_verdict(req.job.run.ref)
        ref, job = await self._create_job(req.job, {ANNOTATION_GATE_FROM: version})
        return ref, str((job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) or version)

    async def _pod_of(self, job: JobRef) -> Any | None:
        pods = await self._call(self.core.list_namespaced_pod, job.namespace,
                                label_selector=f"batch.kubernetes.io/controller-uid={job.uid}",
                                action=f"list pods of Job {job.name}")
        items: list[Any] = sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)
        return items[-1] if items else None

    @activity.defn
    @kube_activity
    async def check_job(self, job: JobRef) -> JobState:
        state = await self._job_state(job)
        if not state.missing:
            _see_pod(state, await self._pod_of(job))
        return state

    async def _job_state(self, job: JobRef) -> JobState:
        try:
            obj = await self._call(self.batch.read_namespaced_job, job.name, job.namespace, action=f"read Job {job.name}")
        except NotFound:
            return JobState(job=job, missing=True, finished=True)
        if obj.metadata.uid != job.uid:
            return JobState(job=job, missing=True, finished=True)
        return _state_of(job, obj)

    def _seen_state(self, job: JobRef) -> JobState | None:
        """The Job as the shared view last saw it; None when it has not seen it (then ask)."""
        obj = self.informer.job(job.uid) if self.informer is not None else None
        return _state_of(job, obj) if obj is not None else None

    async def _pod(self, job: JobRef, *, over: bool, finished: bool = False) -> Any | None:
        """The Job's newest pod, from the shared view while it can tell; for a Job that is over, only
        a pod seen ending will do (its exit codes are what the outcome is read from). A Job known to
        have finished has a pod that ended: the view is given a moment to see it before the API is asked."""
        if self.informer is None:
            return await self._pod_of(job)
        pod = self.informer.pod_of(job.uid)
        if pod is not None and (not over or pod.status.phase in ENDED):
            return pod
        if finished:
            pod = await self.informer.wait_pod(job.uid, lambda p: (p.get("status") or {}).get("phase") in ENDED,
                                               within=POD_END_WAIT_SECONDS)
            if pod is not None:
                return pod
        return await self._pod_of(job)

    @activity.defn
    @kube_activity
    async def read_hook_outcome(self, state: JobState) -> HookOutcome:
        """Which hook failed (and how), or the preRun skip request."""
        return await self._hook_outcome(state, await self._pod_of(state.job))

    async def _hook_outcome(self, state: JobState, pod: Any | None) -> HookOutcome:
        job = state.job
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
            said = _termination_message(pod, "done")
            if not said.startswith((SKIP_MARKER, RUN_MARKER)):  # a done container of before termination messages
                said = await self._log(job.namespace, pod.metadata.name, "done")
            reason = skip_reason(said)
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
        return await self._agent_outcome(req.job, await self._pod_of(req.job), timed_out=req.timed_out)

    async def _agent_outcome(self, job: JobRef, pod: Any | None, *, timed_out: bool,
                             pricing: Pricing | None = None) -> AgentOutcome:
        """What the agent said (its marker, else its exit code and last lines), its tokens priced (`pricing`: by the
        run's provider and model); an agent whose pod was ended from outside before it reported a result is `lost`
        (results.lost_why), so the run may start it again."""
        outcome = await self._said(job, pod, timed_out=timed_out)
        if pricing is not None and (outcome.metrics.input_tokens or outcome.metrics.output_tokens):
            outcome.metrics = await self.prices.price(outcome.metrics, pricing)
        return outcome

    async def _said(self, job: JobRef, pod: Any | None, *, timed_out: bool) -> AgentOutcome:
        if pod is None:
            if timed_out:
                return agent_outcome("", None, timed_out=True)
            return lost_outcome(job.name, None, lost_why(None) or "", None)
        exit_code = None
        for cs in pod.status.container_statuses or []:
            if cs.name == "agent" and cs.state and cs.state.terminated:
                exit_code = cs.state.terminated.exit_code
        log = await self._log(job.namespace, pod.metadata.name, "agent")
        outcome = agent_outcome(log, exit_code, timed_out=timed_out)
        why = None if timed_out or outcome.status != "error" else lost_why(pod)
        if why is not None:
            outcome = lost_outcome(job.name, pod.metadata.name, why, exit_code, said=outcome)
        activity.logger.info("agent %s: %s (exit %s)%s", job.name, outcome.status, outcome.exit_code,
                             f"; its pod {why}" if why else "")
        return outcome

    @activity.defn
    @kube_activity
    async def delete_job(self, req: DeleteJob) -> None:
        """Stop a Job (a timeout, a verdict given while the gate hook still runs): its pods go with it, so the tail of
        their logs is kept first, as the cleanup keeps the others'."""
        try:
            await self._keep_stopped_logs(req.job)
        except Exception:  # a log is never worth a step that fails and retries
            activity.logger.exception("the logs of Job %s/%s are not kept", req.job.namespace, req.job.name)
        await self._delete(self.batch.delete_namespaced_job, req.job.name, req.job.namespace,
                           propagation="Foreground" if req.foreground else "Background", uid=req.job.uid)

    async def _keep_stopped_logs(self, job: JobRef) -> None:
        """The run a Job belongs to is in its labels (the shared view's copy, else read)."""
        if self.keep_log_bytes <= 0 or not job.labelled:
            return
        obj = self.informer.job(job.uid) if self.informer is not None else None
        if obj is None:
            try:
                obj = await self._call(self.batch.read_namespaced_job, job.name, job.namespace,
                                       action=f"read Job {job.name}")
            except NotFound:
                return
        labels = obj.metadata.labels or {}
        run, uid = labels.get(LABEL_RUN), labels.get(LABEL_RUN_UID)
        if run and uid and obj.metadata.uid == job.uid:
            await self._keep_logs(RunRef(namespace=job.namespace, name=run, uid=uid), [job])

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
        if not req.keep_jobs or req.kill_jobs:
            await self._delete_jobs_of(ns, name, uid)
        await self._delete_owned(self.core.delete_namespaced_persistent_volume_claim,
                                 self.core.read_namespaced_persistent_volume_claim, workspace_name(name), ns, uid)
        await self._delete_rbac(ns, lifecycle_name(name), uid)

    async def _delete_jobs_of(self, ns: str, name: str, uid: str) -> None:
        jobs = await self._call(self.batch.list_namespaced_job, ns, label_selector=f"{LABEL_RUN}={name}",
                                action=f"list Jobs of AgentRun {name}")
        for job in jobs.items:
            if any(o.uid == uid for o in job.metadata.owner_references or []):
                await self._delete(self.batch.delete_namespaced_job, job.metadata.name, ns,
                                   propagation="Foreground", uid=job.metadata.uid)

    async def _delete_rbac(self, ns: str, account: str, uid: str) -> None:
        """The RoleBinding, Role and ServiceAccount named `account` (a run's lifecycle RBAC, or a sidecar's)."""
        await self._delete_owned(self.rbac.delete_namespaced_role_binding, self.rbac.read_namespaced_role_binding,
                                 account, ns, uid)
        await self._delete_owned(self.rbac.delete_namespaced_role, self.rbac.read_namespaced_role, account, ns, uid)
        await self._delete_owned(self.core.delete_namespaced_service_account, self.core.read_namespaced_service_account,
                                 account, ns, uid)

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

        def released(run: dict[str, Any]) -> dict[str, Any] | None:
            fins = list(run["metadata"].get("finalizers") or [])
            if run["metadata"]["uid"] != ref.uid or RUN_FINALIZER not in fins:
                return None
            run["metadata"]["finalizers"] = [f for f in fins if f != RUN_FINALIZER]
            return run

        try:
            await self.runs.update_with_retry((ref.namespace, ref.name), released,
                                              action=f"remove finalizer of AgentRun {ref.name}")
        except NotFound:
            return  # already gone (any other failure is retried: the finalizer must go)
        except Conflict:
            return  # kept changing: as before the access layer, the step ends (the next cleanup try releases it)

    # -- the steps of AgentRunWorkflow (type "AgentRun"): fewer, fatter activities ---------------------

    @activity.defn
    @kube_activity
    async def begin_run(self, req: BeginRun) -> Resolution:
        """Read the run, add the finalizer, resolve the spec against its Agent and policy, and write Pending."""
        resolution = await self.resolve_run(StartRun(ref=req.ref, resource_version=req.resource_version,
                                                     finalizers=req.finalizers))
        if resolution.resolved is not None:
            # Fixed with the rest of the run's input: a run's restarts (and so its journal and workspace) and its
            # tools container's image never change in flight, whatever the worker's settings become.
            resolution.resolved.agent_restarts = self.agent_restarts
            resolution.resolved.tools_image = self.tools_image
            obs = resolution.resolved.observability
            if obs is not None and not obs.otlp_endpoint and self.agent_otlp_endpoint:
                obs.otlp_endpoint = self.agent_otlp_endpoint
        status = AgentRunStatus(phase=Phase.PENDING, started_at=req.started_at, workflow_id=req.workflow_id,
                                observed_generation=req.ref.generation, lifecycle_author=resolution.lifecycle_author,
                                trace_id=req.trace_id or None)
        await self._write_status(req.ref, StatusUpdate(status=status), first=True)
        return resolution

    @activity.defn
    @kube_activity
    async def start_job(self, req: StartJob) -> JobStarted:
        workspace = None
        if req.prepare:
            await self.ensure_lifecycle_rbac(req.job)
            if req.job.run.has_workspace:
                workspace = await self._ensure_workspace(req.job)
        version = None
        if req.clear_verdict:
            job, version = await self._start_gate_job(req)
        else:
            job = await self.create_job(req.job)
        if req.status is not None:
            await self._write_status(req.job.run.ref, req.status)
        return JobStarted(job=job, run_version=version, workspace_uid=workspace,
                          unpublished=await self._publish(req.events))

    @activity.defn
    @kube_activity
    async def observe_job(self, req: ObserveJob) -> JobReport:
        """Where the Job is, and once it is over (or given up), what it produced: one read of its pod,
        plus its log where the outcome is in it. With the bridge's signal the Job itself is not read."""
        job = req.job
        if req.signal is not None:
            state = JobState(job=job, finished=True, succeeded=req.signal.succeeded, reason=req.signal.reason)
        elif req.timed_out:
            state = JobState(job=job)
        else:
            state = self._seen_state(job) or await self._job_state(job)
        pod = None if state.missing else await self._pod(job, over=state.finished or req.timed_out,
                                                         finished=state.finished)
        _see_pod(state, pod)
        report = JobReport(state=state)
        if state.finished or req.timed_out:
            if job.component == "agent-run":
                # Past its activeDeadlineSeconds the Job controller killed the agent: a timeout too.
                timed_out = req.timed_out or state.reason == "DeadlineExceeded"
                report.agent = await self._agent_outcome(job, pod, timed_out=timed_out, pricing=req.pricing)
            else:
                report.hook = await self._hook_outcome(state, pod)
        return report

    @activity.defn
    @kube_activity
    async def park_agent(self, req: ParkAgent) -> Parked:
        """The agent parked until people decide (SPEC §10): its Jobs' logs kept and the Jobs deleted, and this step
        returns only once no pod of the run is left (the agent's, its sidecars', the tools container's, a hook's);
        then a tool-verdict annotation written before the wait is cleared (the run's version after that tells a
        decision by annotation from an older one), and the status that shows the waiting calls is written: nobody
        can see them as waiting while a pod of the run still exists."""
        ref = req.ref
        try:
            await self._keep_logs(ref, req.jobs)
        except Exception:  # a log is never worth a step that fails and retries
            activity.logger.exception("the logs of AgentRun %s/%s are not kept", ref.namespace, ref.name)
        for job in req.jobs:
            await self._delete(self.batch.delete_namespaced_job, job.name, ref.namespace, propagation="Foreground",
                               uid=job.uid)
        await self._pods_gone(ref)
        version = await self._clear_verdict(ref, (TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION), "tool-verdict")
        await self._write_status(ref, req.status)
        return Parked(run_version=version, unpublished=await self._publish(req.events))

    async def _pods_gone(self, ref: RunRef) -> None:
        """Until no pod labelled with the run is left (ended ones too: a pod object is a pod), at most
        PODS_GONE_WAIT_SECONDS; then a retryable failure that names them."""
        deadline = time.monotonic() + PODS_GONE_WAIT_SECONDS
        while True:
            pods = await self._call(self.core.list_namespaced_pod, ref.namespace, label_selector=f"{LABEL_RUN}={ref.name}",
                                    action=f"list the pods of AgentRun {ref.name}")
            left = sorted(p.metadata.name for p in pods.items)
            if not left:
                return
            if time.monotonic() >= deadline:
                raise ApplicationError(f"pods of AgentRun {ref.namespace}/{ref.name} are still going: "
                                       f"{', '.join(left)}", type="PodsStillThere")
            await asyncio.sleep(PODS_GONE_POLL_SECONDS)

    @activity.defn
    @kube_activity
    async def update_status(self, req: StatusChange) -> Published:
        await self._write_status(req.ref, req.update, first=req.first)
        return Published(unpublished=await self._publish(req.events))

    @activity.defn
    @kube_activity
    async def clean_up(self, req: CleanUp) -> Published | None:
        """The run's final status and events (`req.final`), then remove what the run made (only what it made),
        then let the object go. A final status that cannot be written for good (the object is gone, or refused) is
        logged and the cleanup goes on: the run's finalizer must never stay for it."""
        ns, name, uid = req.ref.namespace, req.ref.name, req.ref.uid
        published: Published | None = None
        if req.final is not None:
            try:
                await self._write_status(req.ref, req.final.update, first=req.final.first)
            except (ApplicationError, KubeError) as e:
                failure = e if isinstance(e, ApplicationError) else application_error(e)
                if not failure.non_retryable:
                    raise
                activity.logger.warning("the final status of AgentRun %s/%s was not written: %s", ns, name, failure)
            published = Published(unpublished=await self._publish(req.final.events))
        run = req.run
        if run is not None:
            if req.kill:
                await self._delete_jobs_of(ns, name, uid)  # a cut-short step may have made one not yet known
            else:
                # Before the Jobs go (their pods with them): the run is not being deleted, so its logs outlive them.
                try:
                    await self._keep_logs(req.ref, req.jobs)
                except Exception:  # a log is never worth a cleanup that fails and retries: the finalizer must go
                    activity.logger.exception("the logs of AgentRun %s/%s are not kept", ns, name)
            if not req.kill and not req.keep_jobs:
                if any(job.labelled for job in req.jobs):
                    # One request for all of them: exactly this run's (by its uid), whatever their names.
                    await self._call(self.batch.delete_collection_namespaced_job, ns,
                                     label_selector=f"{LABEL_RUN_UID}={uid}", propagation_policy="Foreground",
                                     action=f"delete the Jobs of AgentRun {name}")
                for job in req.jobs:
                    if not job.labelled:  # made before the run-uid label: one by one
                        await self._delete(self.batch.delete_namespaced_job, job.name, ns, propagation="Foreground",
                                           uid=job.uid)
            if run.has_workspace:
                if req.workspace_uid:
                    await self._delete(self.core.delete_namespaced_persistent_volume_claim, workspace_name(name), ns,
                                       uid=req.workspace_uid)
                else:
                    await self._delete_owned(self.core.delete_namespaced_persistent_volume_claim,
                                             self.core.read_namespaced_persistent_volume_claim, workspace_name(name),
                                             ns, uid)
            if run.rbac:
                await self._delete_rbac(ns, lifecycle_name(name), uid)
            await self._delete_skill_rbac(run)
        await self._release(req.ref)
        return published

    async def _keep_logs(self, ref: RunRef, jobs: list[JobRef]) -> None:
        """The tail of each container's log of `jobs` (the agent's, each hook's, every attempt) in the run's ConfigMap
        `<run>-logs`, owned by the run (models/run_logs.py): made by the first step that keeps logs, added to by the
        next (a Job stopped early, then the cleanup). Best effort: a log that cannot be read is left out, and a
        ConfigMap that cannot be written is a warning; the step goes on either way."""
        if self.keep_log_bytes <= 0 or not jobs:
            return
        ns, name, uid = ref.namespace, ref.name, ref.uid
        wanted: list[tuple[str, str, str]] = []  # (key, pod, container)
        for job in jobs:
            try:
                pod = await self._pod(job, over=False)
            except KubeError as e:
                activity.logger.warning("the logs of Job %s/%s are not kept: %s", ns, job.name, e)
                continue
            if pod is None:
                continue
            # From the pod's status (the worker's view keeps no spec): the hooks' containers and the agent's.
            status = pod.status
            containers = [c.name for c in (status.init_container_statuses if status else None) or []
                          if hook_of(c.name) != c.name]
            containers += [c.name for c in (status.container_statuses if status else None) or [] if c.name == "agent"]
            wanted += [(run_logs.log_key(job.name, c), pod.metadata.name, c) for c in containers]
        limit = run_logs.per_container(len(wanted), self.keep_log_bytes)
        logs: dict[str, str] = {}
        for key, pod_name, container in wanted:
            try:
                text: str = await self._call(self.core.read_namespaced_pod_log, pod_name, ns, container=container,
                                             tail_lines=run_logs.TAIL_LINES,
                                             action=f"read log of {pod_name}/{container}")
            except KubeError:
                continue  # never started, or gone: nothing to keep
            logs[key] = run_logs.tail(text, limit)
        if not logs:
            return
        body = run_logs.manifest(namespace=ns, run=name, uid=uid, logs=logs)
        cm = body["metadata"]["name"]
        try:
            await self._call(self.core.create_namespaced_config_map, ns, body, action=f"create ConfigMap {cm}")
            return
        except Conflict:
            pass  # made by an earlier step (or try): add these logs to it
        except KubeError as e:
            activity.logger.warning("the logs of AgentRun %s/%s are not kept: %s", ns, name, e)
            return
        # One JSON patch, no read: its first operation tests that the run owns the ConfigMap (a same-named one of
        # an earlier run, or of someone else, is left alone).
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": uid}]
        ops += [{"op": "add", "path": f"/data/{key}", "value": text} for key, text in logs.items()]
        try:
            await self._call(self.core.patch_namespaced_config_map, cm, ns, ops,
                             _content_type="application/json-patch+json", action=f"add logs to ConfigMap {cm}")
        except KubeError as e:
            activity.logger.warning("the logs of AgentRun %s/%s are not kept: %s", ns, name, e)

    async def _release(self, ref: RunRef) -> None:
        """Remove our finalizer with one patch that needs no read when it is the object's only finalizer
        (it tests the uid and the list); otherwise read, then patch."""
        ops = [{"op": "test", "path": "/metadata/uid", "value": ref.uid},
               {"op": "test", "path": "/metadata/finalizers", "value": [RUN_FINALIZER]},
               {"op": "remove", "path": "/metadata/finalizers"}]
        try:
            await self.runs.patch(ref.namespace, ref.name, ops, content_type="application/json-patch+json",
                                  action=f"remove finalizer of AgentRun {ref.name}")
            return
        except NotFound:
            return  # already gone
        except Invalid as e:
            if any("/metadata/uid" in c for c in e.causes):
                return  # a newer object of that name: ours is gone
            # other finalizers too (or none): the careful way
        await self.release_run(StartRun(ref=ref))

    async def _write_status(self, ref: RunRef, update: StatusUpdate, *, first: bool = False) -> None:
        """One JSON patch of the status subresource, no read first. Its first operation tests the uid, so
        a same-named newer object is never written (a merge patch's metadata would be ignored there).
        `first`: the run has no status yet (the Pending write), so `status` is added whole."""
        status = update.status.model_dump(by_alias=True, exclude_none=True, mode="json")
        status.pop("conditions", None)
        if update.conditions is not None:
            status["conditions"] = [c.model_dump(by_alias=True, exclude_none=True, mode="json")
                                    for c in update.conditions]
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": ref.uid}]
        if first:
            ops.append({"op": "add", "path": "/status", "value": status})
        else:
            ops += [{"op": "add", "path": f"/status/{key}", "value": value} for key, value in status.items()]
        try:
            await self.runs.patch_status(ref.namespace, ref.name, ops, content_type="application/json-patch+json",
                                         action=f"write status of AgentRun {ref.name}")
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e
        except Invalid as e:
            if not any("/metadata/uid" in c for c in e.causes):  # our test operation's failure names its path
                raise
            raise ApplicationError(f"AgentRun {ref.namespace}/{ref.name} was replaced by a newer object",
                                   type=RUN_GONE, non_retryable=True) from e

    async def _publish(self, events: list[RunEvent]) -> list[RunEvent]:
        """Publish in order; from the first one NATS did not take, the rest go back to the workflow."""
        for i, event in enumerate(events):
            try:
                await self.events.publish_event(event)
            except ApplicationError as e:
                if e.non_retryable:
                    activity.logger.warning("event %s dropped: %s", event.message_id, e)
                    continue
                activity.logger.info("event %s not published now (%s); the workflow retries it", event.message_id, e)
                return events[i:]
        return []

    def all(self) -> list[Callable[..., Any]]:
        return [self.resolve_run, self.write_status, self.ensure_lifecycle_rbac, self.ensure_workspace,
                self.create_job, self.check_job, self.read_hook_outcome, self.read_agent_result,
                self.delete_job, self.cleanup, self.release_run,
                self.begin_run, self.start_job, self.observe_job, self.update_status, self.park_agent, self.clean_up]


__all__ = ["AgentRunStatus", "KubeActivities"]
