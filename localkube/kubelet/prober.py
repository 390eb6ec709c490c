"""Container probes, as the kubelet's prober runs them.

startupProbe first (the others wait for it; failing it restarts the container), then readinessProbe
(the container's `ready` and the pod's Ready/ContainersReady conditions follow it, and through them
the Service endpoints) and livenessProbe (failureThreshold consecutive failures restart the
container: SIGTERM, SIGKILL after the grace period). httpGet (http and https, certificates not
checked, as the kubelet does), tcpSocket and exec (run in a sandbox with the container's mounts and
environment, in its PID namespace) are supported; one timer per probe, never a busy loop.

The prober asks the kubelet for what it needs through `runtime.PodRuntime` (the pod's address, a container's
environment and sandbox, status writes, events), never the kubelet class itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
from pathlib import Path
from typing import Any

from ..util import set_condition
from .runtime import PodRun, PodRuntime, open_pid_namespace, pid_namespace_fds, terminate_container

Obj = dict[str, Any]


def _port(value: Any, container: Obj) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    return None


async def check(kubelet: PodRuntime, run: PodRun, pod: Obj, c: Obj, probe: Obj, mounts: dict[str, Path]) -> bool:
    """One probe attempt: True on success."""
    ip = kubelet.pod_ip(run.uid)
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        async with asyncio.timeout(timeout):
            if "httpGet" in probe:
                return await _http(probe["httpGet"], c, ip)
            if "tcpSocket" in probe:
                port = _port(probe["tcpSocket"].get("port"), c)
                if port is None:
                    return False
                _, writer = await asyncio.open_connection(probe["tcpSocket"].get("host") or ip, port)
                writer.close()
                return True
            if "exec" in probe:
                return await _exec(kubelet, run, pod, c, probe, mounts)
    except (TimeoutError, OSError):
        return False
    return False


async def _exec(kubelet: PodRuntime, run: PodRun, pod: Obj, c: Obj, probe: Obj, mounts: dict[str, Path]) -> bool:
    """An exec probe: the command runs with the container's mounts and environment, in its PID namespace (it
    sees the container's processes, as a probe run by the container runtime does)."""
    env = kubelet.container_env(pod, c)
    cr = run.containers.get(c["name"])
    pidns = None
    if cr is not None and cr.proc is not None and run.pidns_fd is None and not pod["spec"].get("hostPID"):
        pidns = open_pid_namespace(cr.proc.pid)
    try:
        argv = kubelet.sandbox_argv(run, pod, c, mounts, list(probe["exec"].get("command") or []), pidns=pidns)
        proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
                                                    pass_fds=pid_namespace_fds(run, pidns))
    finally:
        if pidns is not None:
            os.close(pidns)
    try:
        return await proc.wait() == 0
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


async def _http(get: Obj, c: Obj, ip: str) -> bool:
    port = _port(get.get("port"), c)
    if port is None:
        return False
    tls = None
    if str(get.get("scheme", "HTTP")).upper() == "HTTPS":
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    host = get.get("host") or ip
    reader, writer = await asyncio.open_connection(host, port, ssl=tls)
    try:
        headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in get.get("httpHeaders") or [])
        writer.write(f"GET {get.get('path') or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.34\r\n"
                     f"Accept: */*\r\n{headers}Connection: close\r\n\r\n".encode())
        await writer.drain()
        status = (await reader.readline()).split()
        return len(status) >= 2 and status[1].isdigit() and 200 <= int(status[1]) < 400
    finally:
        writer.close()


async def run(kubelet: PodRuntime, pod_run: PodRun, pod: Obj, c: Obj, proc: asyncio.subprocess.Process,
              mounts: dict[str, Path]) -> None:
    """Probe one running container until it exits (the caller cancels this when it does)."""
    startup = c.get("startupProbe")
    if startup:
        if not await _until_threshold(kubelet, pod_run, pod, c, startup, mounts):
            await _restart(kubelet, pod_run, pod, c, proc, "Startup")
            return
        kubelet.write_status(pod_run.namespace, pod_run.name, lambda st: kubelet.container_status(
            st, False, c, started=True, **({} if c.get("readinessProbe") else {"ready": True})))
        if not c.get("readinessProbe"):
            _set_ready(kubelet, pod_run, c, True)
    loops = []
    if c.get("readinessProbe"):
        loops.append(_readiness(kubelet, pod_run, pod, c, c["readinessProbe"], mounts))
    if c.get("livenessProbe"):
        loops.append(_liveness(kubelet, pod_run, pod, c, c["livenessProbe"], proc, mounts))
    await asyncio.gather(*loops)


async def _until_threshold(kubelet: PodRuntime, pod_run: PodRun, pod: Obj, c: Obj, probe: Obj,
                           mounts: dict[str, Path]) -> bool:
    """The startup probe: True once it succeeds, False after failureThreshold failures."""
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    failures = 0
    while True:
        if await check(kubelet, pod_run, pod, c, probe, mounts):
            return True
        failures += 1
        if failures >= int(probe.get("failureThreshold", 3)):
            return False
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


async def _readiness(kubelet: PodRuntime, pod_run: PodRun, pod: Obj, c: Obj, probe: Obj,
                     mounts: dict[str, Path]) -> None:
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    ready, ok, bad = False, 0, 0
    while True:
        if await check(kubelet, pod_run, pod, c, probe, mounts):
            ok, bad = ok + 1, 0
            if not ready and ok >= int(probe.get("successThreshold", 1)):
                ready = True
                _set_ready(kubelet, pod_run, c, True)
        else:
            ok, bad = 0, bad + 1
            if ready and bad >= int(probe.get("failureThreshold", 3)):
                ready = False
                _set_ready(kubelet, pod_run, c, False)
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


async def _liveness(kubelet: PodRuntime, pod_run: PodRun, pod: Obj, c: Obj, probe: Obj,
                    proc: asyncio.subprocess.Process, mounts: dict[str, Path]) -> None:
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    bad = 0
    while True:
        if await check(kubelet, pod_run, pod, c, probe, mounts):
            bad = 0
        else:
            bad += 1
            if bad >= int(probe.get("failureThreshold", 3)):
                await _restart(kubelet, pod_run, pod, c, proc, "Liveness")
                return
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


def _set_ready(kubelet: PodRuntime, pod_run: PodRun, c: Obj, value: bool) -> None:
    def fn(st: Obj) -> None:
        kubelet.container_status(st, False, c, ready=value)
        statuses = st.get("containerStatuses") or []
        all_ready = bool(statuses) and all(s.get("ready") for s in statuses)
        conds = st.setdefault("conditions", [])
        for ctype in ("Ready", "ContainersReady"):
            set_condition(conds, ctype, "True" if all_ready else "False",
                          reason="" if all_ready else "ContainersNotReady")
    kubelet.write_status(pod_run.namespace, pod_run.name, fn)


async def _restart(kubelet: PodRuntime, pod_run: PodRun, pod: Obj, c: Obj, proc: asyncio.subprocess.Process,
                   which: str) -> None:
    """A failed liveness or startup probe: the container is stopped; restartPolicy brings it back."""
    kubelet.record(pod, "Unhealthy", f"{which} probe failed", type_="Warning")
    kubelet.record(pod, "Killing", f"Container {c['name']} failed {which.lower()} probe, will be restarted")
    terminate_container(proc.pid)
    grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), timeout=grace)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
