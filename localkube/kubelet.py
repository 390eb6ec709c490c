"""The kubelet: runs each pod's containers as local processes.

A pod is bound to the single node, its init containers run one after another and then its
containers concurrently. Each container's `command` + `args` run under bubblewrap in a private
mount namespace whose root is the host's (read-only if `readOnlyRootFilesystem`), with the
pod's volumes (PVC directories with `subPath`, emptyDirs, configMaps, secrets, the projected
ServiceAccount token) bound at their `mountPath`s. `KUBECONFIG` in the container points at a
kubeconfig carrying the pod's own ServiceAccount token, so `kubectl` and the `kubernetes`
client inside act with exactly the pod's RBAC. Images are not pulled: an image is only needed
when a container has no `command`, and is then resolved through the image map.

Pod status follows the real kubelet: Pending → Running → Succeeded/Failed with
initContainerStatuses/containerStatuses, exit codes, reasons (ContainerCreating,
CreateContainerConfigError, CrashLoopBackOff, StartError) and timestamps. Logs are kept per
container in the CRI file format and served by `/log`. Stopping a pod (deletion, its
activeDeadlineSeconds) sends SIGTERM to the container's processes and SIGKILL once the grace
period is over; a later delete may shorten the grace period, and a pod gone from the API is
killed at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import probes
from .apiserver import INTERNAL, APIServer
from .controllers import PVCController, record_event
from .errors import StatusError, bad_request
from .network import allocate_pod_ip
from .server import Auth, LogSource
from .services import HostsFiles
from .store import DELETED, Event, Obj
from .util import deep, now, parse_time, rfc3339, set_condition

log = logging.getLogger("localkube.kubelet")

PODS = ("", "pods")
NODE_NAME = "localkube"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
TOKEN_DIR_IN_POD = "/var/run/secrets/localkube"
MAX_TERMINATION_MESSAGE = 4096  # bytes of a termination message file the kubelet reads
MAX_LOG_ENTRY = 16 * 1024  # containerd splits longer lines into partial entries
RESTART_BACKOFF_SECONDS = 1.0  # the real kubelet starts at 10s; locally a quick retry serves better
_KINDS = {"secrets": "Secret", "configmaps": "ConfigMap"}

# Images whose default entrypoint is a shell; anything else needs an explicit command or a map entry.
DEFAULT_IMAGE_MAP: dict[str, list[str]] = {
    "busybox": ["sh"],
    "alpine": ["/bin/sh"],
    "debian": ["bash"],
    "ubuntu": ["bash"],
    "bash": ["bash"],
    "python": ["python3"],
}


def _toolchain_paths_under(root: str) -> list[str]:
    """sys.prefix, the base interpreter and sys.path entries below `root`, outermost only."""
    found = set()
    # The checkout localkube runs from: an editable install imports its packages from there.
    checkout = str(Path(__file__).resolve().parents[1])
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, checkout, *sys.path):
        if p and os.path.isdir(p):
            real = os.path.realpath(p)
            if real.startswith(root.rstrip("/") + "/"):
                found.add(real)
    outer = sorted(found)
    return [p for p in outer if not any(p != q and p.startswith(q + "/") for q in outer)]


def _resolve_host_path(path: str) -> str:
    """Resolve symlinks in the existing prefix of `path`, keeping the missing remainder."""
    head, tail = path, ""
    while head != "/" and not os.path.exists(head):
        head, last = os.path.split(head)
        tail = os.path.join(last, tail) if tail else last
    real = os.path.realpath(head)
    return os.path.join(real, tail) if tail else real


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (read from the host's /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pid:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields_ = stat.rsplit(")", 1)[-1].split()
        if len(fields_) > 2 and fields_[2] == str(pid):
            out.append(int(entry))
    return out


def _is_namespace_init(pid: int) -> bool:
    """bwrap's own reaper, PID 1 of a container's PID namespace (the container's command is its child)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap"
    except OSError:
        return False


def _container_processes(sandbox_pid: int) -> list[int]:
    """The container's own top processes: the sandbox's children, or, in a PID namespace of its own, the children
    of the namespace's init (bwrap's reaper, which a signal from outside the namespace does not reach)."""
    out = []
    for child in _children(sandbox_pid):
        out += _children(child) if _is_namespace_init(child) else [child]
    return out


def _terminate_container(sandbox_pid: int) -> None:
    """SIGTERM to the container's processes, but not to bubblewrap itself.

    bwrap (the session leader, so its pid is the group id) would die of the signal and take the
    container with it through --die-with-parent's SIGKILL, so a TERM trap would never get to run.
    Left alive, it exits with the container's status once the container has handled the signal.
    The reaper bwrap runs as PID 1 of the container's PID namespace ignores a signal from outside it
    (the kernel's rule for a namespace's init), so the signal goes to the command beneath it.
    """
    members = _container_processes(sandbox_pid)
    if not members:  # the container is not up yet (or is gone): the whole group, bwrap included
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sandbox_pid, signal.SIGTERM)
        return
    for pid in members:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def open_pid_namespace(sandbox_pid: int) -> int | None:
    """A descriptor of the PID namespace a container's sandbox made (for an exec probe to join it), or None."""
    for child in _children(sandbox_pid):
        with contextlib.suppress(OSError):
            return os.open(f"/proc/{child}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    return None


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


_BWRAP_FAILURE = re.compile(rb"^\S+ stdout F bwrap: (?:execvp (?P<cmd>.+): (?P<why>[^:]+)|(?P<other>.+))$")


def _write_private(path: Path, data: bytes, *, append: bool = False) -> None:
    """Write a file readable by its owner only (a token, a Secret's key, a kubeconfig, a log), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o600)
    try:
        os.fchmod(fd, 0o600)
        if data:
            os.write(fd, data)
    finally:
        os.close(fd)


def _start_error(log_path: Path) -> str | None:
    """The runtime's StartError message when bwrap failed before exec'ing the command, else None."""
    try:
        lines = log_path.read_bytes().splitlines()
    except OSError:
        return None
    m = _BWRAP_FAILURE.match(lines[0]) if len(lines) == 1 else None
    if m is None:
        return None
    prefix = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
              "runc create failed: unable to start container process: ")
    if m.group("cmd") is not None:
        cmd, why = m.group("cmd").decode(errors="replace"), m.group("why").decode(errors="replace")
        detail = "executable file not found in $PATH" if why == "No such file or directory" else why.lower()
        return f'{prefix}exec: "{cmd}": {detail}: unknown'
    return f"{prefix}{m.group('other').decode(errors='replace')}: unknown"


def _termination_path(c: Obj) -> str | None:
    """Where the container writes its termination message, if localkube can give it one: a file in the
    container's private /dev (the default /dev/termination-log); other paths are not supported."""
    path = os.path.normpath(str(c.get("terminationMessagePath") or "/dev/termination-log"))
    return path if path.startswith("/dev/") and path.count("/") == 2 else None


def _cri_message(line: bytes) -> bytes:
    """The text of one CRI log entry (`<time> <stream> <F|P> <text>`), with its newline unless partial."""
    parts = line.split(b" ", 3)
    if len(parts) < 4:
        return b""
    return parts[3] if parts[2] == b"P" else parts[3] + b"\n"


class ContainerConfigError(Exception):
    """CreateContainerConfigError: a referenced Secret/ConfigMap key is missing."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: unknown references stay as written, $$ escapes."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return VAR_REF.sub(repl, text)


def image_base(image: str) -> str:
    """'docker.io/library/busybox:1.36@sha256:...' -> 'busybox'; 'ghcr.io/o/agent:v1' -> 'ghcr.io/o/agent'."""
    ref = image.split("@", 1)[0]
    name, _, tag = ref.rpartition(":")
    if name and "/" not in tag:
        ref = name
    for prefix in ("docker.io/library/", "docker.io/", "library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
    return ref


@dataclass
class ContainerRun:
    name: str
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    started_at: str | None = None


@dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    dir: Path
    task: asyncio.Task[None] | None = None
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    killing: bool = False
    killed: asyncio.Event = field(default_factory=asyncio.Event)  # set with `killing`
    term_sent: bool = False
    kill_at: float | None = None  # monotonic time of the scheduled SIGKILL
    admitted: bool = False  # holds a slot under the concurrency cap
    kill_reason: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # shareProcessNamespace: the pod's one PID namespace, held by a pause process, which every container joins.
    pidns_fd: int | None = None
    pause: asyncio.subprocess.Process | None = None


class Kubelet(LogSource):
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
        self.pvcs = pvcs
        self.pods_dir = state_dir / "pods"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        # Pods' ServiceAccount tokens, Secrets and logs are under it: the user running localkube's alone.
        self.pods_dir.chmod(0o700)
        self.server_url = server_url
        self.ca_pem = ca_pem
        self.slots = asyncio.Semaphore(max_pods)
        self.image_map = {**DEFAULT_IMAGE_MAP, **(image_map or {})}
        self.bwrap = bwrap if bwrap is not None else shutil.which("bwrap")
        self.runs: dict[str, PodRun] = {}
        self._queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.venv_bin = str(Path(sys.executable).parent)
        self.hosts = hosts
        # Each running pod's own address (network.POD_NET), released when the pod's run ends.
        self.pod_ips: dict[str, str] = {}
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
            self.api.finalize_pod(ns, name)
            return
        if not pod["spec"].get("nodeName"):
            new = deep(pod)
            new["spec"]["nodeName"] = NODE_NAME
            set_condition(new.setdefault("status", {}).setdefault("conditions", []), "PodScheduled", "True")
            pod = self.api.update(self._pods_rt(), ns, name, new, INTERNAL)
            pod = self._write_status(ns, name, lambda s: set_condition(s.setdefault("conditions", []),
                                                                        "PodScheduled", "True")) or pod
            record_event(self.api, pod, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE_NAME}",
                         component="default-scheduler")
        phase = (pod.get("status") or {}).get("phase")
        if run is None and phase not in ("Succeeded", "Failed"):
            run = PodRun(uid, ns, name, self.pods_dir / uid)
            self.runs[uid] = run
            run.task = asyncio.get_running_loop().create_task(self._run_pod(run))

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
        self._write_status(pod["metadata"]["namespace"], pod["metadata"]["name"], fn)

    # -- status writes ---------------------------------------------------------------------------

    def _write_status(self, ns: str, name: str, fn: Any) -> Obj | None:
        pod = self.api.store.get(PODS, ns, name)
        if pod is None:
            return None
        new = deep(pod)
        st = new.setdefault("status", {})
        fn(st)
        return self.api.update(self._pods_rt(), ns, name, new, INTERNAL, "status")

    def _container_status(self, st: Obj, init: bool, spec_c: Obj, **fields_: Any) -> None:
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
            self._write_status(run.namespace, run.name, lambda st: st.update(
                phase="Failed", reason="KubeletError", message=msg))
        finally:
            run.done.set()
            self.pod_ips.pop(run.uid, None)
            for c in run.containers.values():
                c.finished.set()
                c.changed.set()
            self.runs.pop(run.uid, None)
            self.api.recheck_pvcs(run.namespace)
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
                self._container_status(st, True, c, state={"waiting": {"reason": "PodInitializing"}})
            for c in mains:
                self._container_status(st, False, c, state={"waiting": {
                    "reason": "PodInitializing" if inits else "ContainerCreating"}})

        self._write_status(run.namespace, run.name, initial)
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
                await self._start_pause(run)
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
                self._write_status(run.namespace, run.name, lambda st: set_condition(
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
            self._stop_pause(run)

    async def _start_pause(self, run: PodRun) -> None:
        """shareProcessNamespace: one PID namespace for the pod, as the real pause container holds it. A sandbox
        with a PID namespace of its own idles in it (bwrap's reaper as its PID 1, which reaps what containers
        leave behind) and every container of the pod joins it, so they see (and may signal) each other's
        processes, and no others."""
        if not self.bwrap:
            raise ContainerConfigError("bubblewrap (bwrap) is not installed; localkube needs it to mount volumes")
        read, write = os.pipe()
        try:
            run.pause = await asyncio.create_subprocess_exec(
                self.bwrap, "--die-with-parent", "--unshare-pid", "--info-fd", str(write), "--ro-bind", "/", "/",
                "--proc", "/proc", "--dev", "/dev", "--", "sleep", "infinity", stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
                pass_fds=(write,))
            os.close(write)
            write = -1
            # bwrap writes {"child-pid": N, ...} once the namespace's init exists, then closes the descriptor.
            info = await asyncio.get_running_loop().run_in_executor(None, _read_all, read)
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)
        child = json.loads(info or b"{}").get("child-pid")
        if not isinstance(child, int):
            raise RuntimeError("the pod's pause sandbox did not start")
        run.pidns_fd = os.open(f"/proc/{child}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    @staticmethod
    def _stop_pause(run: PodRun) -> None:
        if run.pause is not None and run.pause.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pause.pid, signal.SIGKILL)
        if run.pidns_fd is not None:
            os.close(run.pidns_fd)
            run.pidns_fd = None

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
            _terminate_container(p.pid)
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

        self._write_status(run.namespace, run.name, waiting)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.killed.wait(), timeout=delay)
        if run.killing:
            return False
        self._write_status(run.namespace, run.name, restarted)
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
        self._write_status(run.namespace, run.name, fn)

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
                _terminate_container(p.pid)
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

    # -- volumes -------------------------------------------------------------------------------

    async def _prepare_volumes(self, run: PodRun, pod: Obj) -> dict[str, Path] | None:
        """Host directories for each volume; waits (Pending) for missing claims, as the real kubelet does."""
        run.dir.mkdir(parents=True, exist_ok=True)
        vols: dict[str, Path] = {}
        reported = ""
        while True:
            missing = ""
            for v in pod["spec"].get("volumes") or []:
                try:
                    vols[v["name"]] = self._volume(run, pod, v)
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
            self._write_status(run.namespace, run.name, lambda st, msg=missing: set_condition(
                st.setdefault("conditions", []), "PodReadyToStartContainers", "False", reason="VolumeNotReady",
                message=msg))
            for _ in range(20):
                if run.killing:
                    return None
                await asyncio.sleep(0.1)
            fresh = self.api.store.get(PODS, run.namespace, run.name)
            if fresh is None:
                return None

    def _volume(self, run: PodRun, pod: Obj, v: Obj) -> Path:
        ns = run.namespace
        name = v["name"]
        base = run.dir / "volumes" / name
        if "emptyDir" in v:
            base.mkdir(parents=True, exist_ok=True)
            return base
        if "hostPath" in v:
            p = Path(v["hostPath"]["path"])
            if v["hostPath"].get("type") in ("DirectoryOrCreate",):
                p.mkdir(parents=True, exist_ok=True)
            return p
        if "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"]["claimName"]
            pvc = self.api.store.get(("", "persistentvolumeclaims"), ns, claim)
            if pvc is None:
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" not found')
            if pvc["metadata"].get("deletionTimestamp"):
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" is being deleted')
            if (pvc.get("status") or {}).get("phase") != "Bound":
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" is not bound')
            return self.pvcs.volume_path(pvc)
        files: dict[str, bytes] = {}
        if "configMap" in v:
            files = self._keys_from(ns, "configmaps", v["configMap"])
        elif "secret" in v:
            src = dict(v["secret"])
            src["name"] = src.get("secretName", "")
            files = self._keys_from(ns, "secrets", src)
        elif "projected" in v:
            for s in v["projected"].get("sources") or []:
                if "serviceAccountToken" in s:
                    token = self.auth.issue(ns, pod["spec"].get("serviceAccountName", "default"), run.name, run.uid)
                    files[s["serviceAccountToken"].get("path", "token")] = token.encode()
                    self._write_kubeconfig(run, token)
                elif "configMap" in s:
                    files.update(self._keys_from(ns, "configmaps", s["configMap"]))
                elif "secret" in s:
                    files.update(self._keys_from(ns, "secrets", s["secret"]))
                elif "downwardAPI" in s:
                    for item in s["downwardAPI"].get("items") or []:
                        files[item["path"]] = self._field_ref(pod, item.get("fieldRef") or {}).encode()
        elif "downwardAPI" in v:
            for item in v["downwardAPI"].get("items") or []:
                files[item["path"]] = self._field_ref(pod, item.get("fieldRef") or {}).encode()
        else:
            raise ContainerConfigError(f'volume "{name}" has a type localkube does not support')
        base.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            _write_private(p, data)
        return base

    def _keys_from(self, ns: str, resource: str, src: Obj) -> dict[str, bytes]:
        obj = self.api.store.get(("", resource), ns, src.get("name", ""))
        optional = bool(src.get("optional"))
        if obj is None:
            if optional:
                return {}
            raise ContainerConfigError(f'{resource[:-1]} "{src.get("name")}" not found')
        data: dict[str, bytes] = {}
        for k, val in (obj.get("data") or {}).items():
            data[k] = base64.b64decode(val) if resource == "secrets" else str(val).encode()
        for k, val in (obj.get("binaryData") or {}).items():
            data[k] = base64.b64decode(val)
        items = src.get("items")
        if items:
            out = {}
            for it in items:
                if it["key"] not in data:
                    if optional:
                        continue
                    raise ContainerConfigError(f'couldn\'t find key {it["key"]} in {resource[:-1]} {ns}/{src.get("name")}')
                out[it["path"]] = data[it["key"]]
            return out
        return data

    def _write_kubeconfig(self, run: PodRun, token: str) -> None:
        d = run.dir / "localkube"
        d.mkdir(parents=True, exist_ok=True)
        cfg = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "localkube", "cluster": {
                "server": self.server_url,
                "certificate-authority-data": base64.b64encode(self.ca_pem.encode()).decode()}}],
            "users": [{"name": "pod", "user": {"token": token}}],
            "contexts": [{"name": "pod", "context": {"cluster": "localkube", "user": "pod",
                                                     "namespace": run.namespace}}],
            "current-context": "pod",
        }
        _write_private(d / "kubeconfig", yaml.safe_dump(cfg).encode())

    # -- env -----------------------------------------------------------------------------------

    def _field_ref(self, pod: Obj, ref: Obj) -> str:
        path = ref.get("fieldPath", "")
        m = pod["metadata"]
        simple = {
            "metadata.name": m.get("name", ""),
            "metadata.namespace": m.get("namespace", ""),
            "metadata.uid": m.get("uid", ""),
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
            "spec.nodeName": NODE_NAME,
            "status.podIP": self.pod_ips.get(m.get("uid", ""), "127.0.0.1"),
            "status.hostIP": "127.0.0.1",
            "status.podIPs": self.pod_ips.get(m.get("uid", ""), "127.0.0.1"),
            "status.hostIPs": "127.0.0.1",
        }
        if path in simple:
            return str(simple[path])
        mm = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if mm:
            return str((m.get(mm.group(1)) or {}).get(mm.group(2), ""))
        if path in ("metadata.labels", "metadata.annotations"):
            d = m.get(path.split(".")[1]) or {}
            return "\n".join(f'{k}="{v}"' for k, v in sorted(d.items()))
        raise ContainerConfigError(f"unsupported fieldPath {path!r}")

    def _env(self, pod: Obj, c: Obj) -> dict[str, str]:
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {
            "PATH": f"{self.venv_bin}:{DEFAULT_PATH}",
            "HOSTNAME": pod["metadata"]["name"],
            "HOME": "/root",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": self.server_url.rsplit(":", 1)[-1],
            "KUBERNETES_SERVICE_PORT_HTTPS": self.server_url.rsplit(":", 1)[-1],
            "KUBECONFIG": f"{TOKEN_DIR_IN_POD}/kubeconfig",
        }
        # An image mapped to this venv's Python imports the code localkube itself runs from: a checkout started
        # with PYTHONPATH (a git worktree sharing the venv) runs its own agent program, not the installed one.
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                data = self._keys_from(ns, "configmaps", src["configMapRef"])
            elif "secretRef" in src:
                data = self._keys_from(ns, "secrets", src["secretRef"])
            else:
                continue
            for k, v in data.items():
                env[prefix + k] = v.decode(errors="replace")
        for e in c.get("env") or []:
            name = e["name"]
            if "valueFrom" not in e:
                env[name] = expand(str(e.get("value", "")), env)
                continue
            vf = e["valueFrom"]
            if "secretKeyRef" in vf or "configMapKeyRef" in vf:
                resource = "secrets" if "secretKeyRef" in vf else "configmaps"
                ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef")
                data = self._keys_from(ns, resource, {"name": ref.get("name"), "optional": ref.get("optional")})
                if ref.get("key") not in data:
                    if ref.get("optional"):
                        continue
                    raise ContainerConfigError(f"couldn't find key {ref.get('key')} in {_KINDS[resource]} "
                                               f"{ns}/{ref.get('name')}")
                env[name] = data[ref["key"]].decode(errors="replace")
            elif "fieldRef" in vf:
                env[name] = self._field_ref(pod, vf["fieldRef"])
            elif "resourceFieldRef" in vf:
                env[name] = "0"
        return env

    # -- one container -------------------------------------------------------------------------

    def _argv(self, c: Obj, env: dict[str, str]) -> list[str]:
        command = [expand(str(x), env) for x in c.get("command") or []]
        args = [expand(str(x), env) for x in c.get("args") or []]
        if not command:
            base = image_base(str(c.get("image", "")))
            entry = self.image_map.get(str(c.get("image", ""))) or self.image_map.get(base)
            if entry is None:
                raise ContainerConfigError(
                    f'image "{c.get("image")}" has no command and no entry in the image map; give the container a '
                    "command or add the image to localkube's image map")
            command = list(entry)
        return command + args

    @staticmethod
    def pid_namespace_fds(run: PodRun, pidns: int | None = None) -> tuple[int, ...]:
        """The descriptors a sandbox made by `_sandbox(..., pidns=pidns)` must inherit (pass_fds)."""
        fd = pidns if pidns is not None else run.pidns_fd
        return (fd,) if fd is not None else ()

    def _sandbox(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], argv: list[str], *,
                 pidns: int | None = None) -> list[str]:
        """The bwrap command line of one container. Each container has a PID namespace of its own, as in a real
        pod: its processes (and their /proc, environment included) are invisible to the pod's other containers.
        `pidns` (a descriptor, passed on by the caller): join that namespace instead (an exec probe joins its
        container's); with shareProcessNamespace every container joins the pod's; hostPID keeps the host's."""
        if not self.bwrap:
            raise ContainerConfigError("bubblewrap (bwrap) is not installed; localkube needs it to mount volumes")
        if pod["spec"].get("hostPID"):
            pid_args: list[str] = []
        elif pidns is not None or run.pidns_fd is not None:
            pid_args = ["--pidns", str(pidns if pidns is not None else run.pidns_fd)]
        else:
            pid_args = ["--unshare-pid"]
        sc = {**(pod["spec"].get("securityContext") or {}), **(c.get("securityContext") or {})}
        ro_root = bool(sc.get("readOnlyRootFilesystem"))
        # The kubelet always mounts API-data volumes read-only, whatever the volumeMount says.
        api_data = {v.get("name") for v in pod["spec"].get("volumes") or []
                    if {"configMap", "secret", "downwardAPI", "projected"} & set(v)}
        targets: dict[str, tuple[Path, bool]] = {}
        for vm in c.get("volumeMounts") or []:
            src = mounts[vm["name"]]
            if vm.get("subPath"):
                src = src / vm["subPath"]
                src.mkdir(parents=True, exist_ok=True)
            targets[os.path.normpath(vm["mountPath"])] = (src, bool(vm.get("readOnly")) or vm["name"] in api_data)
        tmp = run.dir / "tmp" / c["name"]
        tmp.mkdir(parents=True, exist_ok=True)
        tmp.chmod(0o1777)
        args = [self.bwrap, "--die-with-parent", *pid_args, "--unshare-uts", "--hostname", run.name[:63],
                "--proc", "/proc", "--dev", "/dev"]
        for entry in sorted(os.listdir("/")):
            host = "/" + entry
            if entry in ("proc", "dev") or host in targets:
                continue
            if os.path.islink(host):
                args += ["--symlink", os.readlink(host), host]
            elif entry == "tmp":
                args += ["--ro-bind" if ro_root else "--bind", str(tmp), "/tmp"]
            elif os.path.isdir(host):
                args += ["--ro-bind" if ro_root or entry == "sys" else "--bind", host, host]
        token_dir = run.dir / "localkube"
        token_dir.mkdir(parents=True, exist_ok=True)
        targets.setdefault(TOKEN_DIR_IN_POD, (token_dir, True))
        if self.hosts is not None and not pod["spec"].get("hostNetwork"):
            # Service names resolve through the pod's /etc/hosts (no DNS server): see network.py.
            targets.setdefault("/etc/hosts", (self.hosts.path(run.namespace), True))
        resolved: dict[str, tuple[Path, bool]] = {}
        for target, spec in targets.items():
            top = "/" + target.strip("/").split("/")[0]
            if top != target and os.path.isdir(top) and top != "/tmp":
                # Nested under a host directory we bind: bwrap cannot follow host symlinks such as
                # /var/run -> /run while building the new root, so mount at the resolved path, and
                # the mount point must exist on the host.
                target = _resolve_host_path(target)
                with contextlib.suppress(OSError):
                    os.makedirs(target, exist_ok=True)
            resolved[target] = spec
        for target in sorted(resolved, key=lambda t: t.count("/")):
            src, ro = resolved[target]
            args += ["--ro-bind" if ro else "--bind", str(src), target]
        # A private /tmp (the container's own, or an emptyDir mounted there) hides the host's;
        # localkube's own toolchain (the Python that runs `python -m ...` images, kubectl, an
        # editable checkout) may live there, so it is bound again on top, read-only.
        tmp_source = resolved["/tmp"][0] if "/tmp" in resolved else tmp
        for path in _toolchain_paths_under("/tmp"):
            if path not in resolved:
                # The mount point must already exist: the container's /tmp may be read-only.
                with contextlib.suppress(OSError):
                    os.makedirs(Path(tmp_source) / os.path.relpath(path, "/tmp"), exist_ok=True)
                args += ["--ro-bind", path, path]
        msg_path = _termination_path(c)
        if msg_path is not None:
            # The container writes its termination message into a file of its own (fresh at each start),
            # read when it ends; bwrap's private /dev takes the mount point.
            msg_file = run.dir / "termination" / c["name"]
            msg_file.parent.mkdir(parents=True, exist_ok=True)
            msg_file.write_bytes(b"")
            msg_file.chmod(0o666)
            args += ["--bind", str(msg_file), msg_path]
        wd = c.get("workingDir")
        if wd:
            args += ["--chdir", wd]
        return [*args, "--", *argv]

    async def _run_container(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], *, init: bool) -> int | None:
        ns, name = run.namespace, run.name
        cname = c["name"]
        while True:
            try:
                env = self._env(pod, c)
                argv = self._argv(c, env)
                cmd = self._sandbox(run, pod, c, mounts, argv)
                break
            except ContainerConfigError as e:
                msg = str(e)
                if "image map" in msg or "bubblewrap" in msg:
                    def unresolvable(st: Obj, m: str = msg) -> None:
                        self._container_status(st, init, c, state={"waiting": {"reason": "InvalidImageName",
                                                                               "message": m}})
                        st.update(reason="UnresolvableImage", message=m)

                    self._write_status(ns, name, unresolvable)
                    record_event(self.api, pod, "Failed", msg, type_="Warning", component="kubelet")
                    return None
                self._write_status(ns, name, lambda st, m=msg: self._container_status(
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
        _write_private(cr.log_path, b"", append=True)  # a log may hold what a container printed of a Secret
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
                pass_fds=self.pid_namespace_fds(run))
        except OSError as e:
            msg = f"failed to create containerd task: exec: {e}"
            self._write_status(ns, name, lambda st: self._container_status(
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
            self._container_status(st, init, c, state={"running": {"startedAt": started}},
                                   started=not c.get("startupProbe"), ready=ready, containerID=cid)
            if not init:
                st["phase"] = "Running"
                statuses = st.get("containerStatuses") or []
                if statuses and all(s.get("ready") for s in statuses):
                    conds = st.setdefault("conditions", [])
                    set_condition(conds, "Ready", "True")
                    set_condition(conds, "ContainersReady", "True")

        self._write_status(ns, name, running)
        record_event(self.api, pod, "Started", f"Started container {cname}", component="kubelet")
        prober = asyncio.create_task(probes.run(self, run, pod, c, proc, mounts)) if probed else None
        try:
            await self._pump(proc, cr)
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
        start_error = _start_error(cr.log_path) if code == 1 else None
        if start_error is not None:
            # The command never ran (bwrap could not exec it or enter workingDir): the runtime's
            # StartError, and no container output.
            code, reason = 128, "StartError"
            cr.log_path.write_bytes(b"")
        message = start_error or self._termination_message(run, c, cr, failed=code != 0)
        extra = {"message": message} if message else {}

        def terminated(st: Obj) -> None:
            self._container_status(st, init, c, state={"terminated": {
                "exitCode": code, "reason": reason, **extra, "startedAt": started, "finishedAt": finished,
                "containerID": cid}}, ready=False, started=False)
            if not init:
                conds = st.setdefault("conditions", [])
                set_condition(conds, "Ready", "False", reason="ContainersNotReady")
                set_condition(conds, "ContainersReady", "False", reason="ContainersNotReady")

        self._write_status(ns, name, terminated)
        cr.finished.set()
        cr.changed.set()
        return code

    @staticmethod
    def _termination_message(run: PodRun, c: Obj, cr: ContainerRun, *, failed: bool) -> str:
        """As the kubelet reads it: the file's first 4096 bytes; with `FallbackToLogsOnError`, a failed
        container that wrote none gets the tail of its log (80 lines, 2048 bytes) instead."""
        text = ""
        if _termination_path(c) is not None:
            with contextlib.suppress(OSError):
                with open(run.dir / "termination" / c["name"], "rb") as f:
                    text = f.read(MAX_TERMINATION_MESSAGE).decode("utf-8", "replace")
        if not text and failed and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            with contextlib.suppress(OSError):
                lines = [_cri_message(line) for line in cr.log_path.read_bytes().splitlines()[-80:]]
                text = b"".join(lines)[-2048:].decode("utf-8", "replace")
        return text

    async def _pump(self, proc: asyncio.subprocess.Process, cr: ContainerRun) -> None:
        """Copy the container's output into its CRI log: one entry per line, and lines longer
        than MAX_LOG_ENTRY split into partial (P) entries, as container runtimes do."""
        assert proc.stdout is not None
        buf = b""
        with cr.log_path.open("ab", buffering=0) as f:

            def entry(data: bytes, tag: bytes) -> None:
                stamp = now().strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
                f.write(stamp.encode() + b" stdout " + tag + b" " + data + b"\n")

            while True:
                chunk = await proc.stdout.read(65536)
                if not chunk:
                    break
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if 0 <= nl <= MAX_LOG_ENTRY:
                        entry(buf[:nl], b"F")
                        buf = buf[nl + 1:]
                    elif len(buf) > MAX_LOG_ENTRY:
                        entry(buf[:MAX_LOG_ENTRY], b"P")
                        buf = buf[MAX_LOG_ENTRY:]
                    else:
                        break
                cr.changed.set()
            if buf:
                entry(buf, b"P")
            cr.changed.set()

    # -- logs ----------------------------------------------------------------------------------

    def _log_files(self, pod: Obj, container: str) -> list[Path]:
        d = self.pods_dir / pod["metadata"]["uid"] / "logs"
        files = sorted(d.glob(f"{container}-*.log"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        return files

    def check(self, pod: Obj, container: str, previous: bool) -> None:
        files = self._log_files(pod, container)
        if previous:
            if len(files) < 2:
                raise bad_request(f'previous terminated container "{container}" in pod "{pod["metadata"]["name"]}" '
                                  "not found")
            return
        if not files:
            raise bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start: '
                              + self._waiting_reason(pod, container))

    def _waiting_reason(self, pod: Obj, container: str) -> str:
        st = pod.get("status") or {}
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            if cs["name"] == container:
                w = (cs.get("state") or {}).get("waiting") or {}
                return str(w.get("reason") or "ContainerCreating")
        return "ContainerCreating"

    async def stream(self, pod: Obj, container: str, *, follow: bool, tail: int | None, timestamps: bool,
                     since_seconds: int | None, limit_bytes: int | None,
                     disconnected: asyncio.Event, previous: bool = False) -> AsyncIterator[bytes]:
        files = self._log_files(pod, container)
        path = files[-2] if previous else files[-1]
        run = self.runs.get(pod["metadata"]["uid"])
        cr = run.containers.get(container) if run else None
        if cr is not None and cr.log_path != path:
            cr = None
        since = (now() - dt.timedelta(seconds=since_seconds)) if since_seconds else None
        sent = 0

        def render(raw: bytes) -> bytes | None:
            parts = raw.split(b" ", 3)
            if len(parts) < 4:
                return None
            ts, _stream, tag, text = parts
            if since is not None and parse_time(ts.decode()[:26] + "Z") < since:
                return None
            body = text if tag == b"P" else text + b"\n"
            if tag == b"P" and body.endswith(b"\n"):
                body = body[:-1]
            return (ts + b" " + body) if timestamps else body

        data = path.read_bytes()
        offset = len(data)
        lines = [ln for ln in data.split(b"\n") if ln]
        if tail is not None and tail >= 0:
            lines = lines[-tail:] if tail else []
        for ln in lines:
            out = render(ln)
            if out is None:
                continue
            if limit_bytes is not None:
                if sent >= limit_bytes:
                    return
                out = out[: limit_bytes - sent]
            sent += len(out)
            yield out
        if not follow or cr is None:
            return
        while not disconnected.is_set():
            cr.changed.clear()
            with path.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
            if chunk:
                complete, _, rest = chunk.rpartition(b"\n")
                if complete or not rest:
                    offset += len(complete) + 1 if complete else 0
                    for ln in complete.split(b"\n"):
                        if ln:
                            out = render(ln)
                            if out is not None:
                                if limit_bytes is not None:
                                    if sent >= limit_bytes:
                                        return
                                    out = out[: limit_bytes - sent]
                                sent += len(out)
                                yield out
            if cr.finished.is_set():
                with path.open("rb") as f:
                    f.seek(offset)
                    rest_data = f.read()
                for ln in rest_data.split(b"\n"):
                    if ln:
                        out = render(ln)
                        if out is not None:
                            yield out
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cr.changed.wait(), timeout=0.5)

    def pod_dir(self, pod: Obj) -> Path:
        return self.pods_dir / pod["metadata"]["uid"]
