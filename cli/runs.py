"""`agentrun apply | list | get | logs`: working with runs from a terminal."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import yaml
from kubernetes import client, config, utils, watch

from models.agentrun import TERMINAL_PHASES
from models.kube import Conflict, KubeError, typed_errors
from models.names import (
    AGENTRUNS,
    AGENTS,
    GROUP,
    POLICIES,
    SCHEDULES,
    VERSION,
    Component,
    hook_container,
    job_name,
)

from .api import Api, ApiError

PLURALS = {"Agent": AGENTS, "SympoziumInstance": "sympoziuminstances", "AgentRun": AGENTRUNS,
           "SympoziumSchedule": SCHEDULES, "SympoziumPolicy": POLICIES}


class Session:
    def __init__(self, kubeconfig: str, temporal_ui: str = "") -> None:
        self.api = config.new_client_from_config(kubeconfig)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.temporal_ui = temporal_ui

    def run(self, ns: str, name: str) -> dict[str, Any]:
        with typed_errors(f"read AgentRun {ns}/{name}"):
            return cast(dict[str, Any], self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, AGENTRUNS, name))


def apply(s: Session, files: list[Path], namespace: str, *, wait: bool, timeout: float) -> int:
    runs: list[str] = []
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        for doc in docs:
            kind = doc.get("kind", "")
            name = doc.get("metadata", {}).get("name") or doc.get("metadata", {}).get("generateName", "")
            ns = doc.get("metadata", {}).get("namespace") or namespace
            if kind in PLURALS:
                try:
                    with typed_errors(f"create {kind} {ns}/{name}"):
                        created = cast(dict[str, Any], s.custom.create_namespaced_custom_object(
                            GROUP, VERSION, ns, PLURALS[kind], doc))
                    name = created["metadata"]["name"]
                    print(f"{kind.lower()}/{name} created")
                except KubeError as e:
                    if not isinstance(e, Conflict):
                        print(f"{kind.lower()}/{name}: {e.message}", file=sys.stderr)
                        return 1
                    if kind == "AgentRun":
                        print(f"agentrun/{name} already exists (a run executes once; delete it or pick a new name)",
                              file=sys.stderr)
                        return 1
                    print(f"{kind.lower()}/{name} unchanged (exists)")
                if kind == "AgentRun":
                    runs.append(f"{ns}/{name}")
            else:
                try:
                    utils.create_from_dict(s.api, doc, namespace=ns)
                    print(f"{kind.lower()}/{name} created")
                except utils.FailToCreateError as e:
                    if all(getattr(x, "status", 0) == 409 for x in e.api_exceptions):
                        print(f"{kind.lower()}/{name} unchanged (exists)")
                    else:
                        print(f"{kind.lower()}/{name}: {e}", file=sys.stderr)
                        return 1
    if not wait:
        return 0
    worst = 0
    for key in runs:
        ns, name = key.split("/", 1)
        phase = follow(s, ns, name, timeout=timeout)
        worst = max(worst, 0 if phase == "Succeeded" or phase == "Skipped" else 1)
    return worst


def follow(s: Session, ns: str, name: str, *, timeout: float) -> str:
    """Print each phase as it happens; then the result or error and the Temporal UI link."""
    deadline = time.monotonic() + timeout
    seen = ""
    announced = False
    w = watch.Watch()
    while time.monotonic() < deadline:
        for ev in w.stream(s.custom.list_namespaced_custom_object, GROUP, VERSION, ns, AGENTRUNS,
                           field_selector=f"metadata.name={name}", timeout_seconds=10):
            status = (ev["object"].get("status") or {})
            phase = status.get("phase") or ""
            if phase and phase != seen:
                seen = phase
                print(f"agentrun/{name}: {phase}")
            gate = (status.get("gate") or {}).get("state")
            if gate == "pending" and not announced:
                announced = True
                print(f"agentrun/{name}: waiting for approval — approve with `agentrun approve {name} -n {ns}` "
                      f"(or reject/rewrite with --response TEXT, or retry with --feedback TEXT)")
            if phase in TERMINAL_PHASES:
                w.stop()
                _summary(s, ev["object"])
                return phase
            if time.monotonic() > deadline:
                break
    print(f"agentrun/{name}: still {seen or 'not started'} after {timeout:.0f}s", file=sys.stderr)
    return seen


def _summary(s: Session, run: dict[str, Any]) -> None:
    st = run.get("status") or {}
    if st.get("result"):
        print(f"result:\n{st['result']}")
    if st.get("error"):
        print(f"error: {st['error']}")
    for c in st.get("conditions") or []:
        if c.get("type") in ("PostRunFailed", "StepFailed") and c.get("status") == "True":
            print(f"condition {c['type']}: {c.get('message', '')}")
    if st.get("workflowId") and s.temporal_ui:
        print(f"temporal: {s.temporal_ui}/namespaces/default/workflows/{quote(st['workflowId'], safe='')}")


def verdict(api: Api, ns: str, name: str, action: str, *, response: str, reason: str) -> int:
    """Give the run's gate a verdict through the HTTP API: the token's identity decides, and the API's rules
    (no gate waiting, already decided, who may approve) answer as they do for every caller."""
    if action in ("reject", "rewrite") and not response:
        print(f"{action} needs --response TEXT (the text that replaces the agent's answer)", file=sys.stderr)
        return 2
    if action == "retry" and not response:
        print("retry needs --feedback TEXT (what the agent should do differently)", file=sys.stderr)
        return 2
    body = {"action": action, "response": response, "reason": reason}
    try:
        view = api.call("POST", f"/api/v1/runs/{quote(name, safe='')}/gate-verdict", namespace=ns, body=body)
    except ApiError as e:
        print(f"agentrun/{name}: refused: {e.detail}" if e.status else e.detail, file=sys.stderr)
        return 1
    by = view.get("decided_by")
    print(f"agentrun/{name}: gate {view.get('state')}" + (f" by {by}" if by else ""))
    return 0


def list_runs(s: Session, namespace: str | None, *, awaiting_approval: bool = False) -> int:
    if namespace:
        items = cast(dict[str, Any], s.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, AGENTRUNS))
    else:
        items = cast(dict[str, Any], s.custom.list_cluster_custom_object(GROUP, VERSION, AGENTRUNS))
    rows = [("NAMESPACE", "NAME", "AGENT", "PHASE", "GATE", "CREATED")]
    for r in items.get("items", []):
        st = r.get("status") or {}
        if awaiting_approval and (st.get("gate") or {}).get("state") != "pending":
            continue
        rows.append((r["metadata"]["namespace"], r["metadata"]["name"], (r.get("spec") or {}).get("agentRef", ""),
                     st.get("phase", ""), (st.get("gate") or {}).get("state", ""),
                     r["metadata"].get("creationTimestamp", "")))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def get_run(s: Session, ns: str, name: str) -> int:
    try:
        print(yaml.safe_dump(s.run(ns, name), sort_keys=False), end="")
    except KubeError as e:
        print(e.message, file=sys.stderr)
        return 1
    return 0


def logs(s: Session, ns: str, name: str, hook: str | None, attempt: int | None = None) -> int:
    try:
        return _logs(s, ns, name, hook, attempt)
    except KubeError as e:
        print(e.message, file=sys.stderr)
        return 1


def _logs(s: Session, ns: str, name: str, hook: str | None, attempt: int | None) -> int:
    run = s.run(ns, name)
    # A retried run's agent and gate hook ran once per attempt, each in Jobs of their own: the last, unless asked.
    attempt = attempt or int((run.get("status") or {}).get("attempt") or 1)
    if hook is None:
        job, container = job_name(name, "agent-run", attempt), "agent"
    else:
        lifecycle = (run.get("spec") or {}).get("lifecycle") or {}
        pre = {h.get("name") for h in lifecycle.get("preRun") or []}
        gated = {h.get("name") for h in lifecycle.get("postRun") or [] if h.get("gate")}
        # With a gate, the other postRun hooks run after the verdict in a Job of their own.
        component: Component = ("prerun" if hook in pre else
                                "post-gate" if gated and hook not in gated else "post-run")
        job = job_name(name, component, attempt if component == "post-run" else 1)
        container = hook_container(component, hook)
    with typed_errors(f"list pods of Job {job}"):
        pods: Any = s.core.list_namespaced_pod(ns, label_selector=f"job-name={job}")
    if not pods.items:
        print(f"no pod for Job {job} (it may have been cleaned up; use cleanup: keep to retain it)", file=sys.stderr)
        return 1
    pod = sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)[-1]
    with typed_errors(f"read log of {pod.metadata.name}/{container}"):
        print(s.core.read_namespaced_pod_log(pod.metadata.name, ns, container=container), end="")
    return 0
