"""The bridge: Kubernetes events in, Temporal calls out.

- a new (or not yet started) AgentRun ⇒ start its workflow, idempotently (the workflow ID is
  derived from namespace, name and uid, and duplicates are rejected by Temporal);
- an AgentRun being deleted ⇒ cancel its workflow (whose cleanup then releases the object); one deleted at once
  (its workflow released it while waiting at its gate, everything it made already gone) ⇒ cancel its workflow too;
- a run's Job that completed or failed ⇒ signal the owning workflow;
- a PersonaPack or Ensemble ⇒ the Agents and SympoziumSchedules it describes (`personas.py`);
- a verdict annotation ⇒ a verdict signal, decided by the writer the admission webhook stamped in
  `sympozium.ai/gate-verdict-by` when that webhook is installed for the run's namespace (`verdicts.py`), else
  by "unverified": without the webhook anyone with `patch` could have written either annotation;
- a tool-verdict annotation (SPEC §10) ⇒ a tool decision signal, the same way (`sympozium.ai/tool-verdict-by`); the
  workflow refuses an unverified one: a tool call is never approved by whoever could patch the run.

One watch per kind for all runs, never one per run. On start (and after any watch restart)
the watches begin with a full list, so whatever happened while the bridge was down is
reconciled. Several replicas are safe: only the Lease holder acts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Any

from kubernetes import client
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentrunner.otel import ExportConfigError
from kube import Conflict, Kube, NotFound, finalizer_removed
from kube.resources import sympozium
from models import telemetry
from models.agentrun import TERMINAL_PHASES
from models.approvals import TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION, parse_tool_annotation
from models.gate import VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION, parse_annotation
from models.model import MODELS
from models.names import (
    AGENTRUNS,
    ANNOTATION_TICK,
    ANNOTATION_TRACEPARENT,
    ANNOTATION_WORKFLOW,
    LABEL_RUN,
    RUN_FINALIZER,
    SCHEDULES,
    UNVERIFIED,
)
from models.personas import ENSEMBLES, PERSONAPACKS
from models.resolve import RunRef
from models.settings import SettingsError, TemporalUnreachable, user_agent
from models.skills import SKILLPACKS
from models.steps import JobFinished, StartRun
from models.tracecontext import format_traceparent, valid
from worker.health import Health
from workflows.agent_run import SA_NAME, SA_NAMESPACE, SA_PHASE, AgentRunWorkflow, workflow_id

from .leader import LeaderElector
from .model_status import ModelStatusSync
from .personas import PackSync
from .prune import keep_prune_schedule
from .schedules import ScheduleSync
from .settings import BridgeSettings
from .skillpacks import SkillPackSync
from .verdicts import WebhookCheck
from .watch import KindWatcher

log = logging.getLogger("agentrun.bridge")
# A failed event (Temporal or Kubernetes unreachable) is handled again after this backoff.
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
# What the bridge remembers having done (workflows started, verdicts forwarded, Jobs signalled) spares repeated
# Temporal calls; each is idempotent, so forgetting only costs a call. Entries go when their object ends or is
# deleted; the bound holds where a deletion was never seen (a watch gap).
MEMO_LIMIT = 50_000


class Memo:
    """Keys (and a value each) in insertion order, at most `limit`: the oldest go first."""

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self.limit = limit
        self._items: dict[str, str] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> str | None:
        return self._items.get(key)

    def add(self, key: str, value: str = "") -> None:
        self._items.pop(key, None)
        self._items[key] = value
        while len(self._items) > self.limit:
            del self._items[next(iter(self._items))]

    def discard(self, key: str) -> None:
        self._items.pop(key, None)


class Bridge:
    def __init__(self, settings: BridgeSettings, api: client.ApiClient, temporal: Client) -> None:
        self.settings = settings
        self.api = api
        self.temporal = temporal
        self.kube = Kube(api, qps=settings.kube.qps, burst=settings.kube.burst)
        self.batch = self.kube.batch
        self._signalled = Memo()  # Job uids whose end was signalled
        self._started = Memo()  # workflow IDs known to be started
        self._verdicts = Memo()  # workflow ID -> the verdict annotation last forwarded
        self._tool_verdicts = Memo()  # workflow ID -> the tool-verdict annotation last forwarded
        self.identity = settings.identity or f"{socket.gethostname()}-{os.getpid()}"
        self.packs = PackSync(self.kube)
        self.schedules = ScheduleSync(self.kube, temporal, task_queue=settings.temporal.task_queue)
        self.skill_packs = SkillPackSync(self.kube)
        self.models = ModelStatusSync(self.kube)
        self.webhook = WebhookCheck(self.kube, settings.verdict_webhook)
        # Signs the verdicts it forwards (models/signing.py): the proof that the bridge, not anyone who can write to
        # Temporal, says who wrote the annotation.
        self.signer = settings.temporal.signer()
        self.tracer = telemetry.setup("bridge").tracer("agentrun.bridge")
        self.elector = LeaderElector(api, namespace=settings.lease_namespace, name=settings.lease_name,
                                     identity=self.identity, lease_seconds=settings.lease_seconds,
                                     renew_seconds=settings.lease_renew_seconds)

    # -- watches ---------------------------------------------------------------------------------

    def _custom(self, plural: str, ns: str) -> KindWatcher:
        """A watch of one of our kinds in a namespace ("" = all of them)."""
        kind = sympozium(self.kube, plural)
        if ns:
            return KindWatcher(kind.list_fn(), name=f"{plural}/{ns}", namespace=ns)
        return KindWatcher(kind.list_fn(all_namespaces=True), name=plural)

    def _watchers(self) -> list[tuple[KindWatcher, Any]]:
        out: list[tuple[KindWatcher, Any]] = []
        namespaces = self.settings.namespaces or [""]
        for ns in namespaces:
            if ns:
                jobs = KindWatcher(self.batch.list_namespaced_job, name=f"jobs/{ns}", namespace=ns,
                                   label_selector=LABEL_RUN)
            else:
                jobs = KindWatcher(self.batch.list_job_for_all_namespaces, name="jobs", label_selector=LABEL_RUN)
            out += [(self._custom(AGENTRUNS, ns), self.on_run), (jobs, self.on_job),
                    (self._custom(SCHEDULES, ns), self.schedules.on_schedule),
                    (self._custom(SKILLPACKS, ns), self.skill_packs.on_skill_pack),
                    (self._custom(ENSEMBLES, ns), self.packs.on_ensemble),
                    (self._custom(PERSONAPACKS, ns), self.packs.on_personapack),
                    (self._custom(MODELS, ns), self.models.on_model)]
        return out

    async def run(self, stop: asyncio.Event) -> None:
        elector = asyncio.create_task(self.elector.run())
        try:
            while not stop.is_set():
                leader = asyncio.create_task(self.elector.is_leader.wait())
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait({leader, stopping}, return_when=asyncio.FIRST_COMPLETED)
                leader.cancel()
                stopping.cancel()
                if stop.is_set():
                    break
                await self._lead(stop)
        finally:
            elector.cancel()
            await asyncio.to_thread(self.elector.release)

    async def _lead(self, stop: asyncio.Event) -> None:
        """Act while leading; stop acting as soon as the lease is lost."""
        self.elector.lost.clear()
        watchers = self._watchers()
        tasks = []
        for w, handler in watchers:
            w.start()
            tasks.append(asyncio.create_task(self._pump(w, handler)))
        tasks.append(asyncio.create_task(self.schedules.resync(self.settings.schedule_resync_seconds)))
        tasks.append(asyncio.create_task(self.packs.resync(self.settings.schedule_resync_seconds)))
        # In the background: Temporal being unreachable delays the schedule, never the watches.
        tasks.append(asyncio.create_task(keep_prune_schedule(self.temporal, self.settings)))
        lost = asyncio.create_task(self.elector.lost.wait())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w, _ in watchers:
                w.stop()
            for t in (*tasks, lost, stopping):
                t.cancel()

    async def _pump(self, w: KindWatcher, handler: Any) -> None:
        failures: dict[str, int] = {}
        loop = asyncio.get_running_loop()
        while True:
            typ, obj = await w.queue.get()
            meta = obj.get("metadata") or {}
            key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
            try:
                await handler(typ, obj)
                failures.pop(key, None)
            except Exception:  # one malformed object must never stop the bridge
                # The watch will not deliver this event again (e.g. Temporal was down when a run was
                # created), so it is retried here, with backoff, until it is handled.
                n = failures.get(key, 0) + 1
                failures[key] = n
                delay = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** (n - 1))
                log.exception("handling %s %s/%s failed (attempt %d); retrying in %.1fs", typ,
                              meta.get("namespace"), meta.get("name"), n, delay)
                loop.call_later(delay, w.queue.put_nowait, (typ, obj))

    # -- AgentRuns -------------------------------------------------------------------------------

    async def on_run(self, typ: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ns, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        if not (ns and name and uid):
            return
        ref = RunRef(namespace=ns, name=name, uid=uid, generation=int(meta.get("generation") or 1))
        wid = workflow_id(ref)
        if typ == "DELETED":
            self._started.discard(wid)
            self._verdicts.discard(wid)
            self._tool_verdicts.discard(wid)
            if not meta.get("deletionTimestamp") and (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES \
                    and (obj.get("status") or {}).get("workflowId"):
                # Deleted at once, no finalizer holding it: a run whose workflow released it while waiting at its
                # gate with nothing left to clean (workflows/agent_run.py, `_clean_up_at_gate`). Its workflow ends.
                await self._cancel(wid, ref)
            return
        if meta.get("deletionTimestamp"):
            await self._cancel(wid, ref)
            return
        phase = (obj.get("status") or {}).get("phase")
        if phase in TERMINAL_PHASES:
            self._started.discard(wid)
            self._verdicts.discard(wid)
            self._tool_verdicts.discard(wid)
            return
        if wid not in self._started:
            tick = ((meta.get("annotations") or {}).get(ANNOTATION_TICK))
            if tick and await self._tick_starts_it(tick, wid):
                return
            spec = obj.get("spec")
            parent_ref = spec.get("parent") if isinstance(spec, dict) else None
            parent = parent_ref.get("runName") if isinstance(parent_ref, dict) else None
            await self._start(StartRun(ref=ref, resource_version=meta.get("resourceVersion"),
                                       finalizers=list(meta.get("finalizers") or [])), wid,
                              parent=str(parent) if parent else None,
                              traceparent=str((meta.get("annotations") or {}).get(ANNOTATION_TRACEPARENT) or ""))
        await self._forward_verdict(obj, ref, wid)
        await self._forward_tool_verdict(obj, ref, wid)

    async def _forward_tool_verdict(self, obj: dict[str, Any], ref: RunRef, wid: str) -> None:
        """A decision on a waiting tool call by annotation (SPEC §10), as `_forward_verdict` does a gate's."""
        meta = obj.get("metadata") or {}
        notes = meta.get("annotations") or {}
        text = notes.get(TOOL_VERDICT_ANNOTATION)
        if not text:
            self._tool_verdicts.discard(wid)
            return
        if self._tool_verdicts.get(wid) == text:
            return
        decision = parse_tool_annotation(text)
        self._tool_verdicts.add(wid, text)
        if decision is None:
            log.info("ignoring a malformed tool verdict on %s/%s", ref.namespace, ref.name)
            return
        by = notes.get(TOOL_VERDICT_BY_ANNOTATION)
        decision.decided_by = by if by and await self.webhook.covers(ref.namespace) else UNVERIFIED
        # The version it was seen in: the workflow refuses a decision written before the calls were waiting.
        decision.resource_version = meta.get("resourceVersion")
        if self.signer is not None:
            self.signer.sign(decision, target=wid)
        await self.temporal.get_workflow_handle(wid).signal(AgentRunWorkflow.tool_decision, decision)
        log.info("forwarded a tool decision (%s of call %s) for %s", decision.action, decision.call_id, wid)

    async def _forward_verdict(self, obj: dict[str, Any], ref: RunRef, wid: str) -> None:
        """The Sympozium way of giving a verdict: a gate hook patches the run's annotation."""
        meta = obj.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(VERDICT_ANNOTATION)
        if not text:
            # Gone (the gate's step removes one written before the gate): the same text later is a new verdict.
            self._verdicts.discard(wid)
            return
        if self._verdicts.get(wid) == text:
            return
        verdict = parse_annotation(text)
        self._verdicts.add(wid, text)
        if verdict is None:
            log.info("ignoring malformed gate verdict on %s/%s", ref.namespace, ref.name)
            return
        by = (meta.get("annotations") or {}).get(VERDICT_BY_ANNOTATION)
        verdict.decided_by = by if by and await self.webhook.covers(ref.namespace) else UNVERIFIED
        # The version it was seen in: the workflow refuses a verdict written before its gate started.
        verdict.resource_version = meta.get("resourceVersion")
        if self.signer is not None:
            self.signer.sign(verdict, target=wid)
        await self.temporal.get_workflow_handle(wid).signal(AgentRunWorkflow.verdict, verdict)
        log.info("forwarded gate verdict %s for %s", verdict.action, wid)

    async def _tick_starts_it(self, tick: str, wid: str) -> bool:
        """A scheduled run's workflow is started by its tick, as a child; the bridge only steps in
        when that tick is gone without having started it (e.g. it was terminated)."""
        try:
            await self.temporal.get_workflow_handle(wid).describe()
            self._started.add(wid)
            return True
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        try:
            desc = await self.temporal.get_workflow_handle(tick).describe()
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return desc.status is not None and desc.status.name == "RUNNING"

    async def _parent_link(self, ns: str, parent: str) -> tuple[dict[str, str], str]:
        """A sub-agent's memo and details line naming its parent run and the parent's workflow, so the Temporal UI
        leads from child to parent (the child is not a Temporal child workflow: each run's workflow is started
        by its own object, and a parent deleted first must not take the child's history with it)."""
        try:
            obj = await sympozium(self.kube, AGENTRUNS).get(
                ns, parent, action=f"read parent AgentRun {ns}/{parent}")
            m = obj.get("metadata") or {}
            parent_wid = workflow_id(RunRef(namespace=ns, name=parent, uid=str(m.get("uid") or "")))
        except NotFound:
            parent_wid = ""  # the run fails at start naming spec.parent.runName
        memo = {"parentRun": f"{ns}/{parent}", "parentWorkflowId": parent_wid}
        return memo, f"\nsub-agent of AgentRun {ns}/{parent}" + (f" (workflow {parent_wid})" if parent_wid else "")

    async def _start(self, start: StartRun, wid: str, *, parent: str | None = None, traceparent: str = "") -> None:
        """Start the run's workflow in the run's trace (SPEC §12): a span of its own that continues `traceparent`
        (the run's annotation: where the API created it) or begins the trace (a run made with kubectl). The span is
        on the start's headers (Temporal's interceptor) and in the workflow's input, which the workflow's spans
        join."""
        ref = start.ref
        memo, details = await self._parent_link(ref.namespace, parent) if parent else ({}, "")
        context = TraceContextTextMapPropagator().extract({"traceparent": traceparent}) if valid(traceparent) else None
        with self.tracer.start_as_current_span(f"start AgentRun {ref.namespace}/{ref.name}", context=context,
                                               kind=SpanKind.PRODUCER,
                                               attributes={"agentrun.run": ref.name, "k8s.namespace.name": ref.namespace,
                                                           "temporal.workflow.id": wid}) as span:
            ctx = span.get_span_context()
            start.traceparent = format_traceparent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags))
            await self._start_workflow(start, wid, memo, details)
        self._started.add(wid)

    async def _start_workflow(self, start: StartRun, wid: str, memo: dict[str, str], details: str) -> None:
        s, ref = self.settings, start.ref
        try:
            await self.temporal.start_workflow(
                AgentRunWorkflow.run,
                start,
                id=wid,
                task_queue=s.temporal.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(SA_NAMESPACE, ref.namespace),
                    SearchAttributePair(SA_NAME, ref.name),
                    SearchAttributePair(SA_PHASE, "Pending"),
                ]),
                static_summary=f"AgentRun {ref.namespace}/{ref.name}",
                static_details=f"kubectl get agentrun {ref.name} -n {ref.namespace} -o yaml" + details,
                memo=memo or None,
            )
            log.info("started %s", wid)
        except WorkflowAlreadyStartedError:
            pass  # another replica, or an earlier life of this one, started it: nothing to do

    async def _cancel(self, wid: str, ref: RunRef) -> None:
        handle: WorkflowHandle[Any, Any] = self.temporal.get_workflow_handle(wid)
        try:
            desc = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                await self._release_orphan(ref)
                return
            raise
        if desc.status is not None and desc.status.name == "RUNNING":
            await handle.cancel()
            log.info("cancelled %s (run deleted)", wid)
        else:
            # The workflow is over but the object still carries our finalizer (e.g. it ended
            # before the deletion was seen): nothing is left to clean, let the object go.
            await self._release_orphan(ref)

    async def _release_orphan(self, ref: RunRef) -> None:

        action = f"release AgentRun {ref.namespace}/{ref.name}"
        try:
            obj: Any = await sympozium(self.kube, AGENTRUNS).get(ref.namespace, ref.name, action=action)
            patch = finalizer_removed(obj["metadata"], RUN_FINALIZER)
            if obj["metadata"]["uid"] != ref.uid or patch is None:
                return
            await sympozium(self.kube, AGENTRUNS).patch(ref.namespace, ref.name, patch, action=action)
        except (NotFound, Conflict):
            pass  # gone already, or changed meanwhile: its next event brings it back here

    # -- Jobs ------------------------------------------------------------------------------------

    async def on_job(self, typ: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if typ == "DELETED":
            self._signalled.discard(meta.get("uid") or "")
            return
        wid = (meta.get("annotations") or {}).get(ANNOTATION_WORKFLOW)
        uid = meta.get("uid")
        if not wid or not uid or uid in self._signalled:
            return
        conds = (obj.get("status") or {}).get("conditions") or []
        done = next((c for c in conds if c.get("status") == "True" and c.get("type") in ("Complete", "Failed")), None)
        if done is None:
            return
        event = JobFinished(name=meta.get("name", ""), uid=uid, succeeded=done["type"] == "Complete",
                            reason=str(done.get("reason") or ""))
        try:
            await self.temporal.get_workflow_handle(wid).signal(AgentRunWorkflow.job_finished, event)
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        self._signalled.add(uid)


async def run(settings: BridgeSettings) -> None:
    health = Health("bridge")
    spans = telemetry.setup("bridge")
    health.counters.append(spans.counters)
    probes = await health.serve(settings.health)
    temporal = await settings.temporal.connect(traced=True)
    bridge = Bridge(settings, settings.kube.api_client(user_agent=user_agent("bridge")), temporal)
    health.gauges["agentrun_bridge_leader"] = lambda: 1.0 if bridge.elector.is_leader.is_set() else 0.0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("bridge %s starting", bridge.identity)
    # Ready as soon as it takes part in the election: a follower is a healthy standby, not a failing replica.
    health.ready = True
    try:
        await bridge.run(stop)
    finally:
        health.ready = False
        if probes is not None:
            probes.close()
        await asyncio.to_thread(spans.shutdown)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run(BridgeSettings()))
    except (SettingsError, TemporalUnreachable, ExportConfigError) as e:
        # A setting that cannot work (e.g. a bad codec key file) or a Temporal that cannot be reached is the
        # operator's to fix: one message, no traceback.
        log.error("%s", e)
        print(f"agentrun bridge: {e}", file=sys.stderr)
        return 1
    return 0
