"""The pod runtime: how a container's command runs here, as a container runtime would run it for the kubelet.

Each container's command runs under bubblewrap in a private mount namespace whose root is the host's (read-only if
`readOnlyRootFilesystem`), with the pod's volumes bound at their mountPaths, in a PID namespace of its own (or the
pod's, held by a pause process, with `shareProcessNamespace`). This module holds what that takes: the sandbox's
command line, the pause sandbox, the processes of a container (to signal them), the termination message file, and
the records of what runs (`PodRun`, `ContainerRun`).

It also states `PodRuntime`, what the prober (`prober.py`) asks of the kubelet running a pod: the prober depends on
that interface, not on the kubelet, so the two never import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..services import HostsFiles

Obj = dict[str, Any]

NODE_NAME = "localkube"
TOKEN_DIR_IN_POD = "/var/run/secrets/localkube"
MAX_TERMINATION_MESSAGE = 4096  # bytes of a termination message file the kubelet reads


class ContainerConfigError(Exception):
    """CreateContainerConfigError: a referenced Secret/ConfigMap key is missing."""


def _toolchain_paths_under(root: str) -> list[str]:
    """sys.prefix, the base interpreter and sys.path entries below `root`, outermost only."""
    found = set()
    # The checkout localkube runs from: an editable install imports its packages from there.
    checkout = str(Path(__file__).resolve().parents[2])
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


def terminate_container(sandbox_pid: int) -> None:
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


def write_private(path: Path, data: bytes, *, append: bool = False) -> None:
    """Write a file readable by its owner only (a token, a Secret's key, a kubeconfig, a log), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o600)
    try:
        os.fchmod(fd, 0o600)
        if data:
            os.write(fd, data)
    finally:
        os.close(fd)


def start_error(log_path: Path) -> str | None:
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


def termination_path(c: Obj) -> str | None:
    """Where the container writes its termination message, if localkube can give it one: a file in the
    container's private /dev (the default /dev/termination-log); other paths are not supported."""
    path = os.path.normpath(str(c.get("terminationMessagePath") or "/dev/termination-log"))
    return path if path.startswith("/dev/") and path.count("/") == 2 else None


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


def pid_namespace_fds(run: PodRun, pidns: int | None = None) -> tuple[int, ...]:
    """The descriptors a sandbox made by `Sandbox.argv(..., pidns=pidns)` must inherit (pass_fds)."""
    fd = pidns if pidns is not None else run.pidns_fd
    return (fd,) if fd is not None else ()


class PodRuntime(Protocol):
    """What the prober asks of the kubelet running a pod (`kubelet.Kubelet` is one)."""

    def pod_ip(self, uid: str) -> str: ...

    def container_env(self, pod: Obj, c: Obj) -> dict[str, str]: ...

    def sandbox_argv(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], argv: list[str], *,
                     pidns: int | None = None) -> list[str]: ...

    def write_status(self, ns: str, name: str, fn: Callable[[Obj], None]) -> Obj | None: ...

    def container_status(self, st: Obj, init: bool, spec_c: Obj, **fields_: Any) -> None: ...

    def record(self, obj: Obj, reason: str, message: str, *, type_: str = "Normal") -> None: ...


class Sandbox:
    """The bubblewrap command lines of a node's containers (and of a pod's pause process)."""

    def __init__(self, bwrap: str | None, hosts: HostsFiles | None) -> None:
        self.bwrap = bwrap
        self.hosts = hosts

    def argv(self, run: PodRun, pod: Obj, c: Obj, mounts: dict[str, Path], argv: list[str], *,
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
        msg_path = termination_path(c)
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

    async def start_pause(self, run: PodRun) -> None:
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
    def stop_pause(run: PodRun) -> None:
        if run.pause is not None and run.pause.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pause.pid, signal.SIGKILL)
        if run.pidns_fd is not None:
            os.close(run.pidns_fd)
            run.pidns_fd = None
