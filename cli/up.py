"""`agentrun up` / `agentrun down`: the embedded stack in one state directory.

Temporal dev server (with UI, search attributes, tuned), localkube (persistent, CRDs
installed, the agent image mapped to the reference agent program), NATS when `nats-server`
is installed, the API with its admission webhooks registered in localkube, the worker and the bridge. Endpoints go to `<state>/endpoints.json`, process
ids to `<state>/pids.json`, so `down` (or a second terminal) finds everything. Every process encrypts the payloads it
hands Temporal with the keys of `<state>/codec-keys` (made at the first `up`), and the Temporal UI decodes them
through the API's codec endpoint for an operator signed in at `<api>/codec/login`.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from localkube.certs import ensure_tls
from localkube.server import ADMIN
from models.codec import ensure_key_file
from models.crds import all_crds
from models.kube import Conflict, typed_errors

from . import incluster, webhooks
from .stack import LocalKubeProcess, NatsServer, TemporalDevServer, free_port, stop_process, wait_port

DEFAULT_STATE_DIR = Path(os.environ.get("AGENTRUN_STATE_DIR", str(Path.home() / ".agentrun")))


def endpoints(state_dir: Path) -> dict[str, Any]:
    path = state_dir / "endpoints.json"
    if not path.exists():
        raise SystemExit(f"no stack in {state_dir}: run `agentrun up --state-dir {state_dir}` first")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def install_crds(kubeconfig: Path) -> None:
    api = client.ApiextensionsV1Api(config.new_client_from_config(str(kubeconfig)))
    for crd in all_crds().values():
        name = crd["metadata"]["name"]
        try:
            with typed_errors(f"create CustomResourceDefinition {name}"):
                api.create_custom_resource_definition(crd)  # type: ignore[arg-type]
        except Conflict:
            with typed_errors(f"update CustomResourceDefinition {name}"):
                current: Any = api.read_custom_resource_definition(name)
                crd = {**crd, "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version}}
                api.replace_custom_resource_definition(name, crd)  # type: ignore[arg-type]


def _spawn(name: str, args: list[str], env: dict[str, str], state_dir: Path) -> subprocess.Popen[bytes]:
    log = (state_dir / f"{name}.log").open("ab")
    return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def running(state_dir: Path) -> bool:
    """Whether a stack of this state directory is up (its endpoints written, a process of it alive)."""
    pids = state_dir / "pids.json"
    return pids.exists() and (state_dir / "endpoints.json").exists() and _alive(json.loads(pids.read_text()))


def describe(info: dict[str, Any], state_dir: Path, *, in_cluster: bool = False) -> None:
    """What `up` prints: the endpoints, which one is the console, how to sign in and to stop."""
    print("agentrun is up" + (" (control plane in pods, installed from the Helm chart):" if in_cluster else ":"))
    for k, v in info.items():
        if k != "api_token":
            print(f"  {k:<12} {v}")
    print(f"  api_token    in {state_dir / 'endpoints.json'}")
    where = "" if state_dir == DEFAULT_STATE_DIR.expanduser().resolve() else f" --state-dir {state_dir}"
    if info.get("api"):
        print(f"The web console is the api address: open {info['api']}/ and sign in with the API token, which "
              f"`agentrun token{where}` prints.")
        if info.get("temporal_ui") and not in_cluster:
            print(f"Each run's workflow is in the Temporal UI ({info['temporal_ui']}); signed in to the console, "
                  "the UI shows its payloads decrypted in the same browser.")
    print(f"  export KUBECONFIG={info['kubeconfig']}")
    print(f"`agentrun down{where}` stops it.")


def up(state_dir: Path, *, detach: bool, fallback_poll_seconds: int = 60, in_cluster: bool = False,
       announce: bool = True) -> int:
    state_dir.mkdir(parents=True, exist_ok=True)
    if running(state_dir):
        there = endpoints(state_dir)
        print(f"the stack in {state_dir} is already up")
        describe(there, state_dir, in_cluster=there.get("mode") == "in-cluster")
        # Detached, that is what was asked for: a stack that is up. In the foreground this process would own
        # nothing to wait on.
        return 0 if detach else 1
    image_map = state_dir / "image-map.yaml"
    image_map.write_text(yaml.safe_dump(incluster.image_map()))
    # Every payload the stack's processes hand Temporal is encrypted with this key file's keys (made once, 0600).
    codec_keys = ensure_key_file(state_dir / "codec-keys")
    # The API's port is chosen now so that the Temporal UI can start with the API's codec endpoint (the host
    # processes' API only: in-cluster, the API's address is its Service's, known after the install).
    api_port = 0 if in_cluster else free_port()
    # The browser opens the UI through a front on its own port (cli/uifront.py), whose /codec is the API's: the UI's
    # codec calls are then same-origin, so they carry the console's sign-in with nothing to set in the UI.
    front_port = 0 if in_cluster else free_port()
    temporal = TemporalDevServer(state_dir / "temporal",
                                 ui_codec_endpoint=f"http://127.0.0.1:{front_port}/codec" if front_port else "").start()
    kube_args = ["--image-map", str(image_map), "--job-backoff-seconds", "1"]
    if in_cluster:
        # Every request with the user it authenticated as: shows that the control plane's pods use their own
        # ServiceAccounts (and what each of them did).
        kube_args += ["--audit-log", str(state_dir / "audit.log")]
    kube = LocalKubeProcess(state_dir / "localkube", persist=True, extra_args=kube_args).start()
    kubeconfig = _link_kubeconfig(state_dir, kube.kubeconfig)
    nats = NatsServer(state_dir).start() if NatsServer.available() else None
    info: dict[str, Any] = {
        "temporal": temporal.address,
        "temporal_ui": temporal.ui_url,
        "kubernetes": kube.server,
        "kubeconfig": str(kubeconfig),
        "state_dir": str(state_dir),
    }
    if nats is not None:
        info["nats"] = nats.url
    pids: dict[str, int] = {}
    if nats is not None and nats.proc is not None:
        pids["nats"] = nats.proc.pid
    pids["localkube"] = kube.proc.pid if kube.proc else 0
    pids["temporal"] = temporal.proc.pid if temporal.proc else 0
    # Written before anything can fail, so `agentrun down` always finds what was started.
    (state_dir / "pids.json").write_text(json.dumps(pids))
    if in_cluster:
        _up_in_cluster(state_dir, kubeconfig, info, temporal=temporal, nats=nats,
                       fallback_poll_seconds=fallback_poll_seconds)
        procs = [p for p in (temporal.proc, kube.proc, nats.proc if nats else None) if p is not None]
    else:
        procs = _up_processes(state_dir, kubeconfig, info, pids, temporal=temporal, nats=nats,
                              fallback_poll_seconds=fallback_poll_seconds, api_port=api_port, codec_keys=codec_keys,
                              front_port=front_port)
    (state_dir / "endpoints.json").write_text(json.dumps(info, indent=2))
    (state_dir / "endpoints.json").chmod(0o600)  # it holds the API's token
    if announce:
        describe(info, state_dir, in_cluster=in_cluster)
    else:
        print(f"agentrun is up (in {state_dir})")
    if detach:
        return 0
    print("Ctrl-C stops everything.")
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        print("a process of the stack exited; stopping", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    return down(state_dir)


def _up_processes(state_dir: Path, kubeconfig: Path, info: dict[str, Any], pids: dict[str, int], *,
                  temporal: TemporalDevServer, nats: NatsServer | None, fallback_poll_seconds: int,
                  api_port: int, codec_keys: Path, front_port: int) -> list[subprocess.Popen[bytes]]:
    """The worker, the bridge and the API as host processes with the admin kubeconfig (the default).

    The API comes first, with its admission webhooks on a TLS listener of their own (a certificate for 127.0.0.1
    signed by a CA in `<state-dir>/webhook-tls`) registered in localkube, so the embedded stack is protected as a
    cluster is (policy, who may give a verdict, creator and verdict stamps) before the worker and bridge act."""
    install_crds(kubeconfig)
    env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address,
           "AGENTRUN_KUBE__KUBECONFIG": str(kubeconfig),
           "AGENTRUN_FALLBACK_POLL_SECONDS": str(fallback_poll_seconds), "PYTHONUNBUFFERED": "1",
           "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE": str(codec_keys)}
    if nats is not None:
        env["AGENTRUN_NATS__URL"] = nats.url
    token_file = state_dir / "api-tokens"
    if not token_file.exists():
        token_file.write_text(f"# token identity\n{secrets.token_urlsafe(24)} {getpass.getuser()}\n")
        token_file.chmod(0o600)
    api_token = next(line.split()[0] for line in token_file.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))
    webhook_port = free_port()
    tls = ensure_tls(state_dir / "webhook-tls")
    ui = f"http://127.0.0.1:{front_port}"  # what browsers open: the front of the dev server's UI
    # Every process here uses the admin kubeconfig, so the API's runs reach the webhook as localkube's admin: the
    # creator it stamps (its token's identity) is kept.
    api = _spawn("api", [sys.executable, "-m", "api"],
                 {**env, "AGENTRUN_TOKEN_FILE": str(token_file), "AGENTRUN_PORT": str(api_port),
                  "AGENTRUN_WEBHOOK_PORT": str(webhook_port), "AGENTRUN_TLS_CERT_FILE": str(tls.cert),
                  "AGENTRUN_TLS_KEY_FILE": str(tls.key), "AGENTRUN_TRUSTED_CREATORS": json.dumps([ADMIN.name]),
                  # A UI opened by the host's other name calls the codec across origins (with credentials).
                  "AGENTRUN_CODEC_CORS_ORIGINS": json.dumps([ui, f"http://localhost:{front_port}"]),
                  # The console links each run to its workflow in this UI.
                  "AGENTRUN_TEMPORAL_UI_URL": ui},
                 state_dir)
    info["api"] = f"http://127.0.0.1:{api_port}"
    info["codec"] = f"{info['api']}/codec"
    info["codec_login"] = f"{info['api']}/codec/login"
    info["codec_keys"] = str(codec_keys)
    info["api_token"] = api_token
    info["webhook"] = f"https://127.0.0.1:{webhook_port}"
    pids["api"] = api.pid
    (state_dir / "pids.json").write_text(json.dumps(pids))
    wait_port(api_port, timeout=60, proc=api, what="the API")
    wait_port(webhook_port, timeout=60, proc=api, what="the API's admission webhooks")
    front = _spawn("ui", [sys.executable, "-m", "cli.uifront", "--port", str(front_port), "--ui", temporal.ui_url,
                          "--api", info["api"]], env, state_dir)
    pids["ui"] = front.pid
    (state_dir / "pids.json").write_text(json.dumps(pids))
    wait_port(front_port, timeout=60, proc=front, what="the Temporal UI's front")
    info["temporal_ui"] = ui
    kube_api = config.new_client_from_config(str(kubeconfig))
    try:
        webhooks.register(kube_api, webhooks.configurations(info["webhook"], tls.ca_pem))
    finally:
        kube_api.close()
    worker = _spawn("worker", [sys.executable, "-m", "worker"], env, state_dir)
    bridge = _spawn("bridge", [sys.executable, "-m", "bridge"], env, state_dir)
    pids.update({"bridge": bridge.pid, "worker": worker.pid})
    (state_dir / "pids.json").write_text(json.dumps(pids))
    _wait_healthy(state_dir, worker, bridge)
    return [worker, bridge, api, front]


def _up_in_cluster(state_dir: Path, kubeconfig: Path, info: dict[str, Any], *, temporal: TemporalDevServer,
                   nats: NatsServer | None, fallback_poll_seconds: int) -> None:
    """The control plane as pods of the Helm chart; Temporal, NATS and localkube stay host processes."""
    values = incluster.chart_values(temporal_address=temporal.address, nats_url=nats.url if nats else "",
                                    fallback_poll_seconds=fallback_poll_seconds)
    release = incluster.install_chart(kubeconfig, values)
    # What `helm install` prints: the chart's NOTES, rendered with these values (what to do next on a cluster).
    notes = str(release.get("notes") or "").strip()
    if notes:
        print(notes, end="\n\n")
    api = incluster.kube_client(kubeconfig)
    try:
        incluster.wait_available(api)
        info["api"], info["api_token"] = incluster.api_endpoint(api)
    finally:
        api.close()
    info["mode"] = "in-cluster"
    info["namespace"] = incluster.NAMESPACE
    info["audit_log"] = str(state_dir / "audit.log")


def _link_kubeconfig(state_dir: Path, target: Path) -> Path:
    """`<state-dir>/kubeconfig`, the one path users and tools are told about, whatever localkube's own layout."""
    link = state_dir / "kubeconfig"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target.relative_to(state_dir))
    return link


def _wait_healthy(state_dir: Path, worker: subprocess.Popen[bytes], bridge: subprocess.Popen[bytes]) -> None:
    """The worker and bridge log a line once connected; fail fast if either dies first."""
    deadline = time.monotonic() + 60
    marks = {"worker": "worker polling", "bridge": "became leader"}
    ready: set[str] = set()
    while time.monotonic() < deadline and len(ready) < 2:
        for name, proc in (("worker", worker), ("bridge", bridge)):
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited with code {proc.returncode}; see {state_dir / (name + '.log')}")
            log = state_dir / f"{name}.log"
            if name not in ready and log.exists() and marks[name] in log.read_text(errors="replace"):
                ready.add(name)
        time.sleep(0.1)
    if len(ready) < 2:
        raise SystemExit(f"the stack did not become healthy in 60s; logs are in {state_dir}")


def _gone(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
        if done:
            return True
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _alive(pids: dict[str, int]) -> bool:
    for pid in pids.values():
        try:
            os.kill(pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def down(state_dir: Path) -> int:
    path = state_dir / "pids.json"
    if not path.exists():
        print(f"nothing is running from {state_dir}")
        return 0
    pids: dict[str, int] = json.loads(path.read_text())
    for name in ("ui", "api", "bridge", "worker", "nats", "localkube", "temporal"):
        pid = pids.get(name)
        if not pid:
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if _gone(pid):
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
        print(f"stopped {name}")
    path.unlink()
    return 0


__all__ = ["DEFAULT_STATE_DIR", "describe", "down", "endpoints", "install_crds", "running", "stop_process", "up"]
