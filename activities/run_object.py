"""The run object itself, as a run's steps read and write it: the AgentRun, its finalizer, its status, its verdict
annotations, and its place under a parent run.

Owned by `KubeActivities` (activities/kube.py), which holds one per worker. Every write here is guarded: the finalizer
patches carry the version read (kube/finalizers.py), the status writes test the object's uid (a same-named newer
object is never written), and the read-modify-write ones go through `update_with_retry` (kube/resources.py). A run
that is gone, or replaced by a newer object of its name, ends its steps for good (`RUN_GONE`, non-retryable).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from temporalio.exceptions import ApplicationError

from kube import Conflict, Invalid, Kube, NotFound, finalizer_added, sympozium
from kube.informer import Informer
from models.agentrun import DelegateStatus
from models.base import FieldProblem, PolicyViolation
from models.evaluate import Reader, RunLister, evaluate_run, lifecycle_author
from models.gate import VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION
from models.names import AGENTRUNS, GROUP, LABEL_PARENT_RUN, RUN_FINALIZER, VERSION
from models.resolve import RunRef
from models.run import StatusUpdate
from models.slots import slot_limit
from models.steps import Resolution, StartRun, StatusWrite

RUN_GONE = "RunGone"


class RunObject:
    """Reads and writes of the AgentRun a step works for (`runs`: the AgentRun kind on the worker's client)."""

    def __init__(self, kube: Kube, *, default_image: str, fallback_poll_seconds: int,
                 informer: Informer | None = None) -> None:
        self.kube = kube
        self.runs = sympozium(kube, AGENTRUNS, kind="AgentRun")
        self.node = client.NodeV1Api(kube.api)
        # The worker's shared view: a run's Agent and policy are read from it when it holds them.
        self.informer = informer
        self.default_image = default_image
        self.fallback_poll_seconds = fallback_poll_seconds

    async def get(self, ns: str, name: str) -> dict[str, Any]:
        try:
            return await self.runs.get(ns, name, action=f"read AgentRun {ns}/{name}")
        except NotFound as e:
            raise ApplicationError(f"AgentRun {ns}/{name} no longer exists", type=RUN_GONE,
                                   non_retryable=True) from e

    async def resolve(self, start: StartRun) -> Resolution:
        """Read the run, its Agent and policy; add our finalizer; resolve and validate the spec."""
        ref = start.ref
        run = await self._finalized_as_seen(start)
        if run is None:
            run = await self.get(ref.namespace, ref.name)
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
            await self.kube.call(self.node.read_runtime_class, name, action=f"read RuntimeClass {name}")
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

    async def merge_status(self, req: StatusWrite) -> None:
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

    async def clear_verdict(self, ref: RunRef, keys: tuple[str, str] = (VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION),
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

    async def release_careful(self, start: StartRun) -> None:
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

    async def release(self, ref: RunRef) -> None:
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
        await self.release_careful(StartRun(ref=ref))

    async def write_status(self, ref: RunRef, update: StatusUpdate, *, first: bool = False) -> None:
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


__all__ = ["RUN_GONE", "RunObject"]
