"""Reading what a run's Jobs did: their state, their newest pod, the hooks' and the agent's outcomes, their logs.

Owned by `KubeActivities` (activities/kube.py). Looks are answered from the worker's shared view (kube/informer.py)
where it can tell, and from the API server otherwise; an outcome is read from a pod that has ended. The tail of each
container's log is kept in the run's ConfigMap (models/run_logs.py) before the Jobs and their pods go.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from kube import BadRequest, Conflict, Kube, KubeError, NotFound
from kube.informer import Informer
from models import run_logs
from models.names import LABEL_RUN, LABEL_RUN_UID, hook_of
from models.resolve import RunRef
from models.steps import HookOutcome, JobRef, JobState, Pricing, RunningHook

from .manifests import RUN_MARKER, SKIP_MARKER
from .pricing import PriceSource
from .results import AgentOutcome, agent_outcome, lost_outcome, lost_why, skip_reason

LOG_TAIL_LINES = 1000
ENDED = ("Succeeded", "Failed")
# How long a step woken by a finished Job waits for the shared view to see its pod end before it
# lists pods (the view is normally milliseconds behind; a broken watch costs this once per step).
POD_END_WAIT_SECONDS = 2.0


def state_of(job: JobRef, obj: Any) -> JobState:
    """A Job object's Complete or Failed condition, as a JobState."""
    state = JobState(job=job)
    for c in obj.status.conditions or []:
        if c.status == "True" and c.type in ("Complete", "Failed"):
            state.finished = True
            state.succeeded = c.type == "Complete"
            state.reason = c.reason or ""
    return state


def see_pod(state: JobState, pod: Any | None) -> None:
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


class JobReader:
    """The looks at a run's Jobs and pods, and the logs kept of them."""

    def __init__(self, kube: Kube, *, informer: Informer | None = None, prices: PriceSource | None = None,
                 keep_log_bytes: int = run_logs.DEFAULT_KEEP_LOG_BYTES) -> None:
        self.kube, self.core, self.batch = kube, kube.core, kube.batch
        self.informer = informer
        # What agents' tokens cost (activities/pricing.py): genai-prices, local providers, the prices ConfigMap.
        self.prices = prices or PriceSource(None)
        self.keep_log_bytes = keep_log_bytes  # of each container's log, kept at cleanup (0: none)

    async def pod_of(self, job: JobRef) -> Any | None:
        pods = await self.kube.call(self.core.list_namespaced_pod, job.namespace,
                                    label_selector=f"batch.kubernetes.io/controller-uid={job.uid}",
                                    action=f"list pods of Job {job.name}")
        items: list[Any] = sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)
        return items[-1] if items else None

    async def job_state(self, job: JobRef) -> JobState:
        try:
            obj = await self.kube.call(self.batch.read_namespaced_job, job.name, job.namespace, action=f"read Job {job.name}")
        except NotFound:
            return JobState(job=job, missing=True, finished=True)
        if obj.metadata.uid != job.uid:
            return JobState(job=job, missing=True, finished=True)
        return state_of(job, obj)

    def seen_state(self, job: JobRef) -> JobState | None:
        """The Job as the shared view last saw it; None when it has not seen it (then ask)."""
        obj = self.informer.job(job.uid) if self.informer is not None else None
        return state_of(job, obj) if obj is not None else None

    async def pod(self, job: JobRef, *, over: bool, finished: bool = False) -> Any | None:
        """The Job's newest pod, from the shared view while it can tell; for a Job that is over, only
        a pod seen ending will do (its exit codes are what the outcome is read from). A Job known to
        have finished has a pod that ended: the view is given a moment to see it before the API is asked."""
        if self.informer is None:
            return await self.pod_of(job)
        pod = self.informer.pod_of(job.uid)
        if pod is not None and (not over or pod.status.phase in ENDED):
            return pod
        if finished:
            pod = await self.informer.wait_pod(job.uid, lambda p: (p.get("status") or {}).get("phase") in ENDED,
                                               within=POD_END_WAIT_SECONDS)
            if pod is not None:
                return pod
        return await self.pod_of(job)

    async def hook_outcome(self, state: JobState, pod: Any | None) -> HookOutcome:
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
            text: str = await self.kube.call(self.core.read_namespaced_pod_log, pod, ns, container=container,
                                             tail_lines=LOG_TAIL_LINES, action=f"read log of {pod}/{container}")
            return text
        except (BadRequest, NotFound):
            return ""  # the container never started, or the pod is gone

    async def agent_outcome(self, job: JobRef, pod: Any | None, *, timed_out: bool,
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

    async def keep_stopped_logs(self, job: JobRef) -> None:
        """The run a Job belongs to is in its labels (the shared view's copy, else read)."""
        if self.keep_log_bytes <= 0 or not job.labelled:
            return
        obj = self.informer.job(job.uid) if self.informer is not None else None
        if obj is None:
            try:
                obj = await self.kube.call(self.batch.read_namespaced_job, job.name, job.namespace,
                                           action=f"read Job {job.name}")
            except NotFound:
                return
        labels = obj.metadata.labels or {}
        run, uid = labels.get(LABEL_RUN), labels.get(LABEL_RUN_UID)
        if run and uid and obj.metadata.uid == job.uid:
            await self.keep_logs(RunRef(namespace=job.namespace, name=run, uid=uid), [job])

    async def keep_logs(self, ref: RunRef, jobs: list[JobRef]) -> None:
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
                pod = await self.pod(job, over=False)
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
                text: str = await self.kube.call(self.core.read_namespaced_pod_log, pod_name, ns, container=container,
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
            await self.kube.call(self.core.create_namespaced_config_map, ns, body, action=f"create ConfigMap {cm}")
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
            await self.kube.call(self.core.patch_namespaced_config_map, cm, ns, ops,
                                 _content_type="application/json-patch+json", action=f"add logs to ConfigMap {cm}")
        except KubeError as e:
            activity.logger.warning("the logs of AgentRun %s/%s are not kept: %s", ns, name, e)


__all__ = ["ENDED", "JobReader", "see_pod", "state_of"]
