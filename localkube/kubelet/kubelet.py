"""The kubelet: runs each pod's containers as local processes, and reports their status.

A pod is bound to the single node, its init containers run one after another and then its
containers concurrently, each in a sandbox of the pod runtime (`runtime.py`) with its environment
(`env.py`) and volumes (`volumes.py`); logs go to `logs.py`, probes to `prober.py`.

Pod status follows the real kubelet: Pending → Running → Succeeded/Failed with
initContainerStatuses/containerStatuses, exit codes, reasons (ContainerCreating,
CreateContainerConfigError, CrashLoopBackOff, StartError) and timestamps. Stopping a pod (deletion, its
activeDeadlineSeconds) sends SIGTERM to the container's processes and SIGKILL once the grace
period is over; a later delete may shorten the grace period, and a pod gone from the API is
killed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..apiserver import APIServer
from ..authn import Auth
from ..controllers import PVCController, record_event
from ..errors import StatusError
from ..network import allocate_pod_ip
from ..request import INTERNAL
from ..scheduler import FAILED_SCHEDULING, UNSCHEDULABLE, unschedulable
from ..services import HostsFiles
from ..store import DELETED, Event, Obj
from ..util import deep, rfc3339, set_condition
from .env import Environment
from .logs import PodLogs, cri_message, pump
from .prober import run as probe
from .runtime import (
    MAX_TERMINATION_MESSAGE,
    NODE_NAME,
    ContainerConfigError,
    ContainerRun,
    PodRun,
    Sandbox,
    pid_namespace_fds,
    terminate_container,
    termination_path,
    write_private,
)
from .runtime import start_error as start_error_of
from .volumes import Volumes

log = logging.getLogger("localkube.kubelet")

PODS = ("", "pods")
NODES = ("", "nodes")
RESTART_BACKOFF_SECONDS = 1.0  # the real kubelet starts at 10s; locally a quick retry serves better


class Kubelet:
    def __init__(
        self,
        api: APIServer,
        auth: Auth,
        pvcs: PVCController,
        state_dir: Path,
        *,
        server_url: str,
        ca_pem: str = "",
        max_pods: int = 16,
        image_map: dict[str, list[str]] | None = None,
        bwrap: str | None = None,
        hosts: HostsFiles | None = None,
    ) -> None:
        self.api = api
        self.auth = auth
        self.pods_dir = state_dir / "pods"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        # Pods' ServiceAccount tokens, Secrets and logs are under it: the user running localkube's alone.
        self.pods_dir.chmod(0o700)
        self.slots = asyncio.Semaphore(max_pods)
        self.runs: dict[str, PodRun] = {}
        self._queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        # Each running pod's own address (network.POD_NET), released when the pod's run ends.
        self.pod_ips: dict[str, str] = {}
        self.sandbox = Sandbox(bwrap if bwrap is not None else shutil.which("bwrap"), hosts)
        self.env = Environment(api, server_url=server_url, pod_ips=self.pod_ips, image_map=image_map)
        self.volumes = Volumes(api, auth, pvcs, self.env, server_url=server_url, ca_pem=ca_pem)
        # What the API's /log endpoint reads.
        self.logs = PodLogs(self.pods_dir, self.runs)
        api.store.add_listener(self._on_event)
        api.on_pod_terminating = self._on_terminating

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())
        # Pods that were running when a persisted server stopped lost their processes.
        for pod in self.api.store.select(PODS):
            phase = (pod.get("status") or {}).get("phase")
            if pod["spec"].get("nodeName") and phase in ("Pending", "Running"):
                self._mark_lost(pod)
            self._queue.put_nowait((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    async def stop(self) -> None:
        for run in list(self.runs.values()):
            await self._kill(run, grace=0)
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for run in list(self.runs.values()):
            if run.task:
                run.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run.task

    def _on_event(self, ev: Event) -> None:
        if ev.key == NODES and ev.type != DELETED and ev.obj["metadata"]["name"] == NODE_NAME:
            # The node's labels changed: pods it did not fit may fit now (the scheduler retries them).
            for pod in self.api.store.select(PODS):
                if not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                    self._queue.put_nowait((pod["metadata"]["namespace"], pod["metadata"]["name"]))
            return
        if ev.key != PODS:
            return
        m = ev.obj["metadata"]
        if ev.type == DELETED:
            run = self.runs.get(m["uid"])
            if run is not None and self._kill_due_sooner(run, 0):
                # Gone from the API (a zero grace period, or force): whatever still runs dies now.
                asyncio.get_running_loop().create_task(self._kill(run, grace=0))
            self.auth.revoke_pod(m["uid"])
            return
        self._queue.put_nowait((m["namespace"], m["name"]))

    def _on_terminating(self, pod: Obj) -> None:
        self._queue.put_nowait((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    async def _loop(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            try:
                await self._sync(*item)
            except StatusError as e:
                log.info("kubelet sync %s: %s", item, e.message)
            except Exception:
                log.exception("kubelet sync %s failed", item)

    def _pods_rt(self) -> Any:
        return self.api.registry.lookup("", "v1", "pods")

    async def _sync(self, ns: str, name: str) -> None:
        pod = self.api.store.get(PODS, ns, name)
        if pod is None:
            return
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if pod["metadata"].get("deletionTimestamp"):
            if run is not None and not run.done.is_set():
                grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
                if self._kill_due_sooner(run, grace):  # a second delete may shorten the grace period
                    asyncio.get_running_loop().create_task(self._kill_then_finalize(run, grace))
                return
            if run is None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                # A pod deleted before it ever ran (unscheduled, or not yet started) ends Failed, as PodGC marks
                # unscheduled terminating pods: whoever tracks it with a finalizer (a Job) counts it and lets go.
                self.write_status(ns, name, lambda s: s.update(phase="Failed"))
            self.api.finalize_pod(ns, name)
            return
        if not pod["spec"].get("nodeName"):
            why = unschedulable(pod, self.api.store.get(NODES, "", NODE_NAME))
            if why is not None:
                self._refuse_scheduling(pod, why)
                return
            new = deep(pod)
            new["spec"]["nodeName"] = NODE_NAME
            set_condition(new.setdefault("status", {}).setdefault("conditions", []), "PodScheduled", "True")
            pod = self.api.update(self._pods_rt(), ns, name, new, INTERNAL)
            pod = self.write_status(ns, name, lambda s: set_condition(s.setdefault("conditions", []),
                                                                        "PodScheduled", "True")) or pod
            record_event(self.api, pod, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE_NAME}",
                         component="default-scheduler")
        phase = (pod.get("status") or {}).get("phase")
        if run is None and phase not in ("Succeeded", "Failed"):
            run = PodRun(uid, ns, name, self.pods_dir / uid)
            self.runs[uid] = run
            run.task = asyncio.get_running_loop().create_task(self._run_pod(run))

    def _refuse_scheduling(self, pod: Obj, why: str) -> None:
        """The pod stays Pending and unbound, saying why, as kube-scheduler leaves a pod no node fits (once: the
        condition and the event are written again only if the reason changes)."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        current: Obj = next((c for c in (pod.get("status") or {}).get("conditions") or []
                              if c.get("type") == "PodScheduled"), {})
        if current.get("status") == "False" and current.get("message") == why:
            return
        self.write_status(ns, name, lambda s: set_condition(s.setdefault("conditions", []), "PodScheduled", "False",
                                                              reason=UNSCHEDULABLE, message=why))
        record_event(self.api, pod, FAILED_SCHEDULING, why, type_="Warning", component="default-scheduler")

    async def _kill_then_finalize(self, run: PodRun, grace: int) -> None:
        await self._kill(run, grace)
        await run.done.wait()
        self.api.finalize_pod(run.namespace, run.name)

    def _mark_lost(self, pod: Obj) -> None:
        def fn(st: Obj) -> None:
            st["phase"] = "Failed"
            st["reason"] = "NodeLost"
            st["message"] = "localkube restarted while the pod was running; its processes are gone"
            for cs in st.get("containerStatuses") or []:
                if "terminated" not in (cs.get("state") or {}):
                    cs["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                                  "message": "The container could not be located when the pod was "
                                                             "terminated", "finishedAt": rfc3339()}}
                    cs["ready"] = False
        self.write_status(pod["metadata"]["namespace"], pod["metadata"]["name"], fn)

    # -- status writes ---------------------------------------------------------------------------

    def write_status(self, ns: str, name: str, fn: Callable[..., object]) -> Obj | None:
        pod = self.api.store.get(PODS, ns, name)
        if pod is None:
            return None
        new = deep(pod)
        st = new.setdefault("status", {})
        fn(st)
        return self.api.update(self._pods_rt(), ns, name, new, INTERNAL, "status")

    def container_status(self, st: Obj, init: bool, spec_c: Obj, **fields_: Any) -> None:
        key = "initContainerStatuses" if init else "containerStatuses"
        lst: list[Obj] = st.setdefault(key, [])
        entry = next((c for c in lst if c["name"] == spec_c["name"]), None)
        if entry is None:
            entry = {"name": spec_c["name"], "image": spec_c.get("image", ""),
                     "imageID": f"localkube://{spec_c.get('image', '')}", "restartCount": 0,
                     "ready": False, "started": False, "state": {"waiting": {"reason": "PodInitializing"}},
                     "containerID": ""}
            lst.append(entry)
        entry.update(fields_)

    # -- running a pod -------------------------------------------------------------------------

    async def _run_pod(self, run: PodRun) -> None:
        try:
            async with self.slots:
                run.admitted = True
                if run.killing:
                    return
                await self._run_pod_inner(run)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("pod %s/%s crashed in the kubelet", run.namespace, run.name)
            msg = str(e)
            self.write_status(run.namespace, run.name, lambda st: st.update(
                phase="Failed", reason="KubeletError", message=msg))
        finally:
            run.done.set()
            self.pod_ips.pop(run.uid, None)
            for c in run.containers.values():
                c.finished.set()
                c.changed.set()
            self.runs.pop(run.uid, None)
            pod = self.api.store.get(PODS, run.namespace, run.name)
            if pod is not None and pod["metadata"].get("deletionTimestamp"):
                self.api.finalize_pod(run.namespace, run.name)

    async def _run_pod_inner(self, run: PodRun) -> None:
        pod = self.api.store.get(PODS, run.namespace, run.name)
        if pod is None:
            return
        spec = pod["spec"]
        inits = [c for c in spec.get("initContainers") or [] if isinstance(c, dict)]
        mains = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
        start = rfc3339()

        pod_ip = self.pod_ips.get(run.uid) or allocate_pod_ip(self.pod_ips.values())
        self.pod_ips[run.uid] = pod_ip

        def initial(st: Obj) -> None:
            st["phase"] = "Pending"
            st["hostIP"] = "127.0.0.1"
            st["hostIPs"] = [{"ip": "127.0.0.1"}]
            st["podIP"] = pod_ip
            st["podIPs"] = [{"ip": pod_ip}]
            st["startTime"] = start
            conds = st.setdefault("conditions", [])
            set_condition(conds, "PodReadyToStartContainers", "True")
            set_condition(conds, "Initialized", "True" if not inits else "False",
                          reason="" if not inits else "ContainersNotInitialized",
                          message="" if not inits else f"containers with incomplete status: [{' '.join(c['name'] for c in inits)}]")
            set_condition(conds, "Ready", "False", reason="ContainersNotReady",
                          message=f"containers with unready status: [{' '.join(c['name'] for c in mains)}]")
            set_condition(conds, "ContainersReady", "False", reason="ContainersNotReady",
                          message=f"containers with unready status: [{' '.join(c['name'] for c in mains)}]")
            # As the kubelet reports: main containers wait in PodInitializing behind init containers,
            # otherwise in ContainerCreating.
            for c in inits:
                self.container_status(st, True, c, state={"waiting": {"reason": "PodInitializing"}})
            for c in mains:
                self.container_status(st, False, c, state={"waiting": {
                    "reason": "PodInitializing" if inits else "ContainerCreating"}})

        self.write_status(run.namespace, run.name, initial)
        deadline_task = None
        sidecars: list[asyncio.Task[None]] = []
        sidecars_stop = asyncio.Event()
        ads = spec.get("activeDeadlineSeconds")
        if ads:
            deadline_task = asyncio.create_task(self._deadline(run, int(ads)))
        try:
            mounts = await self._prepare_volumes(run, pod)
            if mounts is None:
                return
            if spec.get("shareProcessNamespace") and not spec.get("hostPID"):
                await self.sandbox.start_pause(run)
            restart = spec.get("restartPolicy", "Always")
            for c in inits:
                if c.get("restartPolicy") == "Always":
                    # A native sidecar (Kubernetes 1.29+): started in its turn, not waited for, restarted
                    # when it exits, and stopped once the main containers are done.
                    sidecars.append(asyncio.create_task(self._run_sidecar(run, pod, c, mounts, sidecars_stop)))
                    continue
                while True:
                    code = await self._run_container(run, pod, c, mounts, init=True)
                    if code is None or run.killing:
                        return self._finish(run, failed=True)
                    if code == 0:
                        break
                    if restart == "Never" or not await self._back_off(run, c, init=True):
                        return self._finish(run, failed=True)
            if inits:
                self.write_status(run.namespace, run.name, lambda st: set_condition(
                    st.setdefault("conditions", []), "Initialized", "True"))
            results = await asyncio.gather(*(self._run_main(run, pod, c, mounts, restart) for c in mains))
            await self._stop_sidecars(run, pod, sidecars, sidecars_stop)
            self._finish(run, failed=any(code != 0 for code in results) or run.killing)
        finally:
            if deadline_task:
                deadline_task.cancel()
            sidecars_stop.set()
            for t in sidecars:
                t.cancel()
            self.sandbox.stop_pause(run)

    async def _run_sidecar(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], stop: asyncio.Event) -> None:
        while not stop.is_set() and not run.killing:
            code = await self._run_container(run, pod, c, mounts, init=True)
            if code is None or stop.is_set() or run.killing or not await self._back_off(run, c, init=True):
                return

    async def _stop_sidecars(self, run: PodRun, pod: Obj, tasks: list[asyncio.Task[None]], stop: asyncio.Event) -> None:
        """SIGTERM to the native sidecars once the main containers are over, SIGKILL after the grace period; their
        exit does not change the pod's phase (as the kubelet does it)."""
        if not tasks:
            return
        stop.set()
        names = {c["name"] for c in pod["spec"].get("initContainers") or [] if c.get("restartPolicy") == "Always"}
        procs = [cr.proc for n, cr in run.containers.items() if n in names and cr.proc is not None
                 and cr.proc.returncode is None]
        for p in procs:
            terminate_container(p.pid)
        grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        try:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=grace)
        except TimeoutError:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_main(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], restart: str) -> int:
        while True:
            code = await self._run_container(run, pod, c, mounts, init=False)
            if code is None:
                return 1
            if run.killing or restart == "Never" or (restart == "OnFailure" and code == 0):
                return code
            if not await self._back_off(run, c, init=False):
                return code

    async def _back_off(self, run: PodRun, c: Obj, *, init: bool) -> bool:
        """Waits in CrashLoopBackOff before a restart; False if the pod is killed meanwhile."""
        key = "initContainerStatuses" if init else "containerStatuses"
        delay = RESTART_BACKOFF_SECONDS

        def waiting(st: Obj) -> None:
            for cs in st.get(key) or []:
                if cs["name"] == c["name"]:
                    cs["lastState"] = cs.get("state", {})
                    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": (
                        f"back-off {delay:g}s restarting failed container={c['name']} "
                        f"pod={run.name}_{run.namespace}({run.uid})")}}
                    cs["ready"] = False
                    cs["started"] = False

        def restarted(st: Obj) -> None:
            for cs in st.get(key) or []:
                if cs["name"] == c["name"]:
                    cs["restartCount"] = int(cs.get("restartCount", 0)) + 1

        self.write_status(run.namespace, run.name, waiting)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.killed.wait(), timeout=delay)
        if run.killing:
            return False
        self.write_status(run.namespace, run.name, restarted)
        return True

    def _finish(self, run: PodRun, failed: bool) -> None:
        def fn(st: Obj) -> None:
            st["phase"] = "Failed" if failed else "Succeeded"
            if run.kill_reason:
                st["reason"] = run.kill_reason
                st["message"] = "Pod was active on the node longer than the specified deadline"
            conds = st.setdefault("conditions", [])
            reason = "PodFailed" if failed else "PodCompleted"
            set_condition(conds, "Ready", "False", reason=reason)
            set_condition(conds, "ContainersReady", "False", reason=reason)
            set_condition(conds, "PodReadyToStartContainers", "False")
        self.write_status(run.namespace, run.name, fn)

    async def _deadline(self, run: PodRun, seconds: int) -> None:
        await asyncio.sleep(seconds)
        run.kill_reason = "DeadlineExceeded"
        pod = self.api.store.get(PODS, run.namespace, run.name)
        if pod is not None:
            record_event(self.api, pod, "DeadlineExceeded", "Pod was active on the node longer than the specified "
                         "deadline", type_="Warning", component="kubelet")
        await self._kill(run, grace=int((pod or {}).get("spec", {}).get("terminationGracePeriodSeconds", 30)))

    async def _kill(self, run: PodRun, grace: int) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; a later call may only bring the SIGKILL forward."""
        run.killing = True
        run.killed.set()
        if not run.admitted and run.task is not None:
            # Still queued behind the concurrency cap: nothing runs, so nothing waits for a slot.
            run.task.cancel()
            return
        kill_at = time.monotonic() + max(grace, 0)
        if run.kill_at is not None and kill_at >= run.kill_at:
            return
        run.kill_at = kill_at
        procs = [c.proc for c in run.containers.values() if c.proc is not None and c.proc.returncode is None]
        if grace > 0 and not run.term_sent:
            run.term_sent = True
            for p in procs:
                terminate_container(p.pid)
        if grace > 0 and procs:
            try:
                await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), timeout=grace)
                return
            except TimeoutError:
                pass
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)

    def _kill_due_sooner(self, run: PodRun, grace: int) -> bool:
        return run.kill_at is None or time.monotonic() + grace < run.kill_at

    async def _prepare_volumes(self, run: PodRun, pod: Obj) -> dict[str, Path] | None:
        """Host directories for each volume; waits (Pending) for missing claims, as the real kubelet does."""
        run.dir.mkdir(parents=True, exist_ok=True)
        vols: dict[str, Path] = {}
        reported = ""
        while True:
            missing = ""
            for v in pod["spec"].get("volumes") or []:
                try:
                    vols[v["name"]] = self.volumes.volume(run, pod, v)
                except ContainerConfigError as e:
                    missing = str(e)
                    failed_volume = v["name"]
                    break
            if not missing:
                return vols
            if missing != reported:
                reported = missing
                record_event(self.api, pod, "FailedMount", f'MountVolume.SetUp failed for volume "{failed_volume}" : '
                             f"{missing}", type_="Warning", component="kubelet")
            self.write_status(run.namespace, run.name, lambda st, msg=missing: set_condition(
                st.setdefault("conditions", []), "PodReadyToStartContainers", "False", reason="VolumeNotReady",
                message=msg))
            for _ in range(20):
                if run.killing:
                    return None
                await asyncio.sleep(0.1)
            fresh = self.api.store.get(PODS, run.namespace, run.name)
            if fresh is None:
                return None

    async def _run_container(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], *, init: bool) -> int | None:
        ns, name = run.namespace, run.name
        cname = c["name"]
        while True:
            try:
                env = self.env.env(pod, c)
                argv = self.env.argv(c, env)
                cmd = self.sandbox.argv(run, pod, c, mounts, argv)
                break
            except ContainerConfigError as e:
                msg = str(e)
                if "image map" in msg or "bubblewrap" in msg:
                    def unresolvable(st: Obj, m: str = msg) -> None:
                        self.container_status(st, init, c, state={"waiting": {"reason": "InvalidImageName",
                                                                               "message": m}})
                        st.update(reason="UnresolvableImage", message=m)

                    self.write_status(ns, name, unresolvable)
                    record_event(self.api, pod, "Failed", msg, type_="Warning", component="kubelet")
                    return None
                self.write_status(ns, name, lambda st, m=msg: self.container_status(
                    st, init, c, state={"waiting": {"reason": "CreateContainerConfigError", "message": m}}))
                for _ in range(10):
                    if run.killing:
                        return None
                    await asyncio.sleep(0.2)
        restart_count = 0
        for cs in ((self.api.store.get(PODS, ns, name) or {}).get("status") or {}).get(
                "initContainerStatuses" if init else "containerStatuses") or []:
            if cs["name"] == cname:
                restart_count = int(cs.get("restartCount", 0))
        logs = run.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        cr = ContainerRun(cname, logs / f"{cname}-{restart_count}.log")
        write_private(cr.log_path, b"", append=True)  # a log may hold what a container printed of a Secret
        old = run.containers.get(cname)
        run.containers[cname] = cr
        if old is not None:
            old.finished.set()
        started = rfc3339()
        cr.started_at = started
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True,
                pass_fds=pid_namespace_fds(run))
        except OSError as e:
            msg = f"failed to create containerd task: exec: {e}"
            self.write_status(ns, name, lambda st: self.container_status(
                st, init, c, state={"terminated": {"exitCode": 128, "reason": "StartError", "message": msg,
                                                   "startedAt": started, "finishedAt": rfc3339()}}))
            return 128
        cr.proc = proc
        if run.killing:  # the kill came while this container was being started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        cid = f"localkube://{run.uid[:8]}-{cname}-{restart_count}"

        probed = not init and any(c.get(k) for k in ("readinessProbe", "livenessProbe", "startupProbe"))

        def running(st: Obj) -> None:
            # Ready at once unless a readiness (or startup) probe has to say so first.
            ready = not init and not c.get("readinessProbe") and not c.get("startupProbe")
            self.container_status(st, init, c, state={"running": {"startedAt": started}},
                                   started=not c.get("startupProbe"), ready=ready, containerID=cid)
            if not init:
                st["phase"] = "Running"
                statuses = st.get("containerStatuses") or []
                if statuses and all(s.get("ready") for s in statuses):
                    conds = st.setdefault("conditions", [])
                    set_condition(conds, "Ready", "True")
                    set_condition(conds, "ContainersReady", "True")

        self.write_status(ns, name, running)
        record_event(self.api, pod, "Started", f"Started container {cname}", component="kubelet")
        prober = asyncio.create_task(probe(self, run, pod, c, proc, mounts)) if probed else None
        try:
            await pump(proc, cr)
            code = await proc.wait()
        finally:
            if prober is not None:
                prober.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await prober
        if code < 0:
            code = 128 - code  # killed by signal N: 128+N, as container runtimes report
        finished = rfc3339()
        reason = "Completed" if code == 0 else "Error"
        start_error = start_error_of(cr.log_path) if code == 1 else None
        if start_error is not None:
            # The command never ran (bwrap could not exec it or enter workingDir): the runtime's
            # StartError, and no container output.
            code, reason = 128, "StartError"
            cr.log_path.write_bytes(b"")
        message = start_error or self._termination_message(run, c, cr, failed=code != 0)
        extra = {"message": message} if message else {}

        def terminated(st: Obj) -> None:
            self.container_status(st, init, c, state={"terminated": {
                "exitCode": code, "reason": reason, **extra, "startedAt": started, "finishedAt": finished,
                "containerID": cid}}, ready=False, started=False)
            if not init:
                conds = st.setdefault("conditions", [])
                set_condition(conds, "Ready", "False", reason="ContainersNotReady")
                set_condition(conds, "ContainersReady", "False", reason="ContainersNotReady")

        self.write_status(ns, name, terminated)
        cr.finished.set()
        cr.changed.set()
        return code

    @staticmethod
    def _termination_message(run: PodRun, c: Obj, cr: ContainerRun, *, failed: bool) -> str:
        """As the kubelet reads it: the file's first 4096 bytes; with `FallbackToLogsOnError`, a failed
        container that wrote none gets the tail of its log (80 lines, 2048 bytes) instead."""
        text = ""
        if termination_path(c) is not None:
            with contextlib.suppress(OSError):
                with open(run.dir / "termination" / c["name"], "rb") as f:
                    text = f.read(MAX_TERMINATION_MESSAGE).decode("utf-8", "replace")
        if not text and failed and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            with contextlib.suppress(OSError):
                lines = [cri_message(line) for line in cr.log_path.read_bytes().splitlines()[-80:]]
                text = b"".join(lines)[-2048:].decode("utf-8", "replace")
        return text

    # -- the pod runtime the prober uses (runtime.PodRuntime) ----------------------------------

    def pod_ip(self, uid: str) -> str:
        return self.pod_ips.get(uid, "127.0.0.1")

    def container_env(self, pod: Obj, c: Obj) -> dict[str, str]:
        return self.env.env(pod, c)

    def sandbox_argv(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], argv: list[str], *,
                     pidns: int | None = None) -> list[str]:
        return self.sandbox.argv(run, pod, c, mounts, argv, pidns=pidns)

    def record(self, obj: Obj, reason: str, message: str, *, type_: str = "Normal") -> None:
        record_event(self.api, obj, reason, message, type_=type_, component="kubelet")

    def pod_dir(self, pod: Obj) -> Path:
        return self.pods_dir / pod["metadata"]["uid"]
