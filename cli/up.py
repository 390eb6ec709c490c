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

from api.auth import parse_tokens
from kube import Conflict, typed_errors
from localkube.certs import ensure_client_tls, ensure_tls
from localkube.server import ADMIN
from models.codec import SIGNING_KEYS_HEADER, ensure_key_file
from models.crds import all_crds

from . import incluster, roles, webhooks
from .stack import (
    LocalKubeProcess,
    NatsServer,
    TemporalDevServer,
    free_port,
    private_dir,
    private_log,
    stop_process,
    wait_port,
)

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


WEBHOOK_CLIENT_DIR = "webhook-client"
WEBHOOK_CLIENT = "localkube-webhook-client"


def webhook_client_config(state_dir: Path) -> Path:
    """kube-apiserver's --admission-control-config-file for localkube: both webhook plug-ins present the stack's
    client certificate to every webhook (the kubeconfig's user `*`)."""
    client = ensure_client_tls(state_dir / WEBHOOK_CLIENT_DIR, WEBHOOK_CLIENT)
    kubeconfig = state_dir / WEBHOOK_CLIENT_DIR / "kubeconfig"
    write_private(kubeconfig, yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": [
        {"name": "*", "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}]}))
    config_file = state_dir / "admission-config.yaml"
    plugin = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
              "kubeConfigFile": str(kubeconfig)}
    write_private(config_file, yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                                               "plugins": [{"name": name, "configuration": plugin} for name in
                                                           ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}))
    return config_file


def write_private(path: Path, text: str) -> None:
    """Replace a file with `text`, readable by its owner only from the start (never a moment world-readable)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def _spawn(name: str, args: list[str], env: dict[str, str], state_dir: Path) -> subprocess.Popen[bytes]:
    log = private_log(state_dir / f"{name}.log")
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
    # The state directory is its user's alone: it holds the API token, the codec and signing keys, localkube's
    # database (every Secret) and its pods' tokens and logs, Temporal's history. Tightened if it existed.
    private_dir(state_dir)
    if running(state_dir):
        there = endpoints(state_dir)
        print(f"the stack in {state_dir} is already up")
        describe(there, state_dir, in_cluster=there.get("mode") == "in-cluster")
        # Detached, that is what was asked for: a stack that is up. In the foreground this process would own
        # nothing to wait on.
        return 0 if detach else 1
    image_map = state_dir / "image-map.yaml"
    write_private(image_map, yaml.safe_dump(incluster.image_map()))
    # Every payload the stack's processes hand Temporal is encrypted with this key file's keys (made once, 0600), and
    # the verdicts its API and bridge send are signed with this one's (models/signing.py; the codec never uses it).
    codec_keys = ensure_key_file(state_dir / "codec-keys")
    signing_keys = ensure_key_file(state_dir / "signing-keys", header=SIGNING_KEYS_HEADER)
    # The API's port is chosen now so that the Temporal UI can start with the API's codec endpoint (the host
    # processes' API only: in-cluster, the API's address is its Service's, known after the install).
    api_port = 0 if in_cluster else free_port()
    # The browser opens the UI through a front on its own port (cli/uifront.py), whose /codec is the API's: the UI's
    # codec calls are then same-origin, so they carry the console's sign-in with nothing to set in the UI.
    front_port = 0 if in_cluster else free_port()
    temporal = TemporalDevServer(state_dir / "temporal",
                                 ui_codec_endpoint=f"http://127.0.0.1:{front_port}/codec" if front_port else "").start()
    kube_args = ["--image-map", str(image_map), "--job-backoff-seconds", "1"]
    if not in_cluster:
        # localkube calls the API's admission webhooks with a client certificate of a CA of the stack's own, which
        # the webhook listener requires: nothing else on the host may post AdmissionReviews to it.
        kube_args += ["--admission-control-config-file", str(webhook_client_config(state_dir))]
    if in_cluster:
        # Every request with the user it authenticated as: shows that the control plane's pods use their own
        # ServiceAccounts (and what each of them did).
        kube_args += ["--audit-log", str(state_dir / "audit.log")]
    kube = LocalKubeProcess(state_dir / "localkube", persist=True, extra_args=kube_args).start()
    kubeconfig = _link_kubeconfig(state_dir, kube.kubeconfig)
    # NATS takes only clients with the stack's token (0600; the worker reads it from the file).
    nats_token = state_dir / "nats-token"
    if not nats_token.exists():
        write_private(nats_token, secrets.token_urlsafe(32) + "\n")
    nats = NatsServer(state_dir, token=nats_token.read_text().strip()).start() if NatsServer.available() else None
    info: dict[str, Any] = {
        "temporal": temporal.address,
        "temporal_ui": temporal.ui_url,
        "kubernetes": kube.server,
        "kubeconfig": str(kubeconfig),
        "state_dir": str(state_dir),
    }
    if nats is not None:
        info["nats"] = nats.url
        info["nats_token"] = str(nats_token)
    pids: dict[str, int] = {}
    if nats is not None and nats.proc is not None:
        pids["nats"] = nats.proc.pid
    pids["localkube"] = kube.proc.pid if kube.proc else 0
    pids["temporal"] = temporal.proc.pid if temporal.proc else 0
    # Written before anything can fail, so `agentrun down` always finds what was started.
    write_private(state_dir / "pids.json", json.dumps(pids))
    if in_cluster:
        _up_in_cluster(state_dir, kubeconfig, info, temporal=temporal, nats=nats,
                       fallback_poll_seconds=fallback_poll_seconds)
        procs = [p for p in (temporal.proc, kube.proc, nats.proc if nats else None) if p is not None]
    else:
        procs = _up_processes(state_dir, kubeconfig, info, pids, temporal=temporal, nats=nats,
                              fallback_poll_seconds=fallback_poll_seconds, api_port=api_port, codec_keys=codec_keys,
                              signing_keys=signing_keys, front_port=front_port)
    write_private(state_dir / "endpoints.json", json.dumps(info, indent=2))  # it holds the API token
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
                  api_port: int, codec_keys: Path, signing_keys: Path, front_port: int) -> list[subprocess.Popen[bytes]]:
    """The worker, the bridge and the API as host processes with the admin kubeconfig (the default).

    The API comes first, with its admission webhooks on a TLS listener of their own (a certificate for 127.0.0.1
    signed by a CA in `<state-dir>/webhook-tls`) registered in localkube, so the embedded stack is protected as a
    cluster is (policy, who may give a verdict, creator and verdict stamps) before the worker and bridge act."""
    install_crds(kubeconfig)
    env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address,
           "AGENTRUN_KUBE__KUBECONFIG": str(kubeconfig),
           "AGENTRUN_FALLBACK_POLL_SECONDS": str(fallback_poll_seconds), "PYTHONUNBUFFERED": "1",
           "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE": str(codec_keys),
           "AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE": str(signing_keys)}
    if nats is not None:
        env["AGENTRUN_NATS__URL"] = nats.url
        env["AGENTRUN_NATS__TOKEN_FILE"] = str(state_dir / "nats-token")
    token_file = state_dir / "api-tokens"
    if not token_file.exists():
        write_private(token_file, f"# token identity\n{secrets.token_urlsafe(24)} {getpass.getuser()}\n")
    token_file.chmod(0o600)  # (one made by an earlier version may not have been)
    api_token, api_caller = next(iter(parse_tokens(token_file.read_text()).items()))
    api_identity = api_caller.identity
    # Every API call is authorised by RBAC (api/access.py): the stack's own token may read, create, delete and approve
    # runs and edit schedules in every namespace, as the API's ClusterRoles bound cluster-wide.
    kube_api = config.new_client_from_config(str(kubeconfig))
    try:
        roles.ensure_roles(kube_api)
        roles.bind(kube_api, "agentrun-up", [roles.user(api_identity)])
    finally:
        kube_api.close()
    webhook_port = free_port()
    tls = ensure_tls(state_dir / "webhook-tls")
    client_ca = ensure_client_tls(state_dir / WEBHOOK_CLIENT_DIR, WEBHOOK_CLIENT).ca_cert
    ui = f"http://127.0.0.1:{front_port}"  # what browsers open: the front of the dev server's UI
    # Every process here uses the admin kubeconfig, so the API's runs, the worker's ticks and the bridge's stamped
    # Agents reach the webhooks as localkube's admin: the author each carries (its caller, the schedule's, the
    # pack's) is kept. (That admin may carry any author: it is the cluster's administrator anyway.)
    trusted = json.dumps([ADMIN.name])
    api = _spawn("api", [sys.executable, "-m", "api"],
                 {**env, "AGENTRUN_TOKEN_FILE": str(token_file), "AGENTRUN_PORT": str(api_port),
                  "AGENTRUN_WEBHOOK_PORT": str(webhook_port), "AGENTRUN_TLS_CERT_FILE": str(tls.cert),
                  "AGENTRUN_TLS_KEY_FILE": str(tls.key), "AGENTRUN_WEBHOOK_CLIENT_CA_FILE": str(client_ca),
                  "AGENTRUN_TRUSTED__API": trusted, "AGENTRUN_TRUSTED__WORKER": trusted,
                  "AGENTRUN_TRUSTED__BRIDGE": trusted,
                  # A UI opened by the host's other name calls the codec across origins (with credentials).
                  "AGENTRUN_CODEC_CORS_ORIGINS": json.dumps([ui, f"http://localhost:{front_port}"]),
                  # The console links each run to its workflow in this UI.
                  "AGENTRUN_TEMPORAL_UI_URL": ui,
                  # The console's sessions are sealed Secrets here, so restarting the API signs nobody out.
                  "AGENTRUN_SESSION_NAMESPACE": "default"},
                 state_dir)
    info["api"] = f"http://127.0.0.1:{api_port}"
    info["codec"] = f"{info['api']}/codec"
    info["codec_login"] = f"{info['api']}/codec/login"
    info["codec_keys"] = str(codec_keys)
    info["signing_keys"] = str(signing_keys)
    info["api_token"] = api_token
    info["webhook"] = f"https://127.0.0.1:{webhook_port}"
    pids["api"] = api.pid
    write_private(state_dir / "pids.json", json.dumps(pids))
    wait_port(api_port, timeout=60, proc=api, what="the API")
    wait_port(webhook_port, timeout=60, proc=api, what="the API's admission webhooks")
    front = _spawn("ui", [sys.executable, "-m", "cli.uifront", "--port", str(front_port), "--ui", temporal.ui_url,
                          "--api", info["api"]], env, state_dir)
    pids["ui"] = front.pid
    write_private(state_dir / "pids.json", json.dumps(pids))
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
    write_private(state_dir / "pids.json", json.dumps(pids))
    _wait_healthy(state_dir, worker, bridge)
    return [worker, bridge, api, front]


def _up_in_cluster(state_dir: Path, kubeconfig: Path, info: dict[str, Any], *, temporal: TemporalDevServer,
                   nats: NatsServer | None, fallback_poll_seconds: int) -> None:
    """The control plane as pods of the Helm chart; Temporal, NATS and localkube stay host processes."""
    if nats is not None and nats.token:
        incluster.ensure_nats_secret(kubeconfig, nats.token)
    values = incluster.chart_values(temporal_address=temporal.address, nats_url=nats.url if nats else "",
                                    fallback_poll_seconds=fallback_poll_seconds,
                                    nats_secret=incluster.NATS_SECRET if nats is not None and nats.token else "")
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
