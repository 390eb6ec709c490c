"""`agentrun list | get | logs | run | delete`, the gate verdicts and the tool-call decisions: working with runs from
a terminal.

Reads (list, get, logs, watching, the calls that wait for approval) go to Kubernetes directly; every user action (run,
delete, approve, reject, rewrite, retry, edit) goes through the HTTP API (cli/api.py), as the token's identity.
`apply` (cli/follow.py) is the one Kubernetes write.
"""

from __future__ import annotations

import codecs
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote

import yaml
from kubernetes import client, config, watch
from kubernetes.config import ConfigException

from kube import Gone, NotFound, typed_errors
from models import run_logs
from models.agentrun import TERMINAL_PHASES
from models.names import (
    AGENTRUNS,
    AGENTS,
    GROUP,
    POLICIES,
    SCHEDULES,
    VERSION,
    Component,
    agent_job_of,
    hook_container,
    job_name,
)

from . import output
from .api import Api, ApiError
from .errors import CliError

PLURALS = {"Agent": AGENTS, "SympoziumInstance": "sympoziuminstances", "AgentRun": AGENTRUNS,
           "SympoziumSchedule": SCHEDULES, "SympoziumPolicy": POLICIES}


class Session:
    """A Kubernetes client from a kubeconfig (and context), and the Temporal UI for links."""

    def __init__(self, kubeconfig: str, temporal_ui: str = "", *, context: str | None = None) -> None:
        try:
            self.api = config.new_client_from_config(kubeconfig, context=context)
        except (ConfigException, OSError) as e:
            raise CliError(f"cannot use the kubeconfig {kubeconfig}"
                           + (f" (context {context})" if context else "") + f": {e}") from e
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.temporal_ui = temporal_ui

    def run(self, ns: str, name: str) -> dict[str, Any]:
        try:
            with typed_errors(f"read AgentRun {ns}/{name}"):
                return cast(dict[str, Any],
                            self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, AGENTRUNS, name))
        except NotFound as e:
            raise CliError(f'agentrun/{name}: not found in namespace "{ns}"') from e

    def runs(self, namespace: str | None) -> list[dict[str, Any]]:
        with typed_errors(f"list AgentRuns in {namespace or 'all namespaces'}"):
            if namespace:
                items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, AGENTRUNS)
            else:
                items = self.custom.list_cluster_custom_object(GROUP, VERSION, AGENTRUNS)
        return list(cast(dict[str, Any], items).get("items", []))


# -- rows ---------------------------------------------------------------------------------------------------------

HEADER = ("NAME", "AGENT", "PHASE", "GATE", "AGE")
WIDE = ("MODEL", "ATTEMPT", "DECIDED BY", "TOKENS", "CACHED", "COST", "CREATED BY", "ERROR")
ERROR_CHARS = 80  # of the error in a wide row (get -o yaml shows it whole)


def row(run: dict[str, Any], *, wide: bool = False, namespace: bool = False,
        models: dict[tuple[str, str], str] | None = None) -> tuple[str, ...]:
    """A run as a row; `models`: (namespace, Agent) -> the Agent's model, for runs that name none themselves."""
    meta, spec, st = run.get("metadata") or {}, run.get("spec") or {}, run.get("status") or {}
    gate = st.get("gate") or {}
    agent = str(spec.get("agentRef") or spec.get("instanceRef") or "")
    out: tuple[str, ...] = (meta.get("name", ""), agent, st.get("phase") or "",
                            gate.get("state") or "", output.age(meta.get("creationTimestamp")))
    if namespace:
        out = (meta.get("namespace", ""), *out)
    if wide:
        usage = st.get("tokenUsage") or {}
        model = (spec.get("model") or {}).get("model") or (spec.get("model") or {}).get("name") \
            or (models or {}).get((str(meta.get("namespace") or ""), agent), "")
        error = str(st.get("error") or "").strip().split("\n")[0]
        out += (str(model), str(st.get("attempt") or ""),
                gate.get("decidedBy") or "", str(usage.get("totalTokens") or ""),
                str(usage.get("cachedInputTokens") or ""), cost(usage),
                (meta.get("annotations") or {}).get("agentrun.dev/created-by", ""),
                error if len(error) <= ERROR_CHARS else error[:ERROR_CHARS - 1] + "…")
    return out


def cost(usage: dict[str, Any]) -> str:
    """status.tokenUsage.estimatedCostUSD as `$<decimal>` ("" : no estimate)."""
    value = usage.get("estimatedCostUSD")
    return f"${value}" if value not in (None, "") else ""


def agent_models(s: Session, namespace: str | None) -> dict[tuple[str, str], str]:
    """(namespace, name) -> model of every Agent (either shape) where the runs are: a run that names no model runs
    its Agent's."""
    out: dict[tuple[str, str], str] = {}
    for plural in (AGENTS, "sympoziuminstances"):
        with typed_errors(f"list {plural} in {namespace or 'all namespaces'}"):
            got = (s.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural) if namespace
                   else s.custom.list_cluster_custom_object(GROUP, VERSION, plural))
        for a in cast(dict[str, Any], got).get("items", []):
            meta = a.get("metadata") or {}
            model = agent_row(a)[1]
            if model:
                out.setdefault((str(meta.get("namespace") or ""), str(meta.get("name") or "")), model)
    return out


def header(*, wide: bool = False, namespace: bool = False) -> tuple[str, ...]:
    return (("NAMESPACE",) if namespace else ()) + HEADER + (WIDE if wide else ())


def list_runs(s: Session, namespace: str | None, *, fmt: str, awaiting_approval: bool = False) -> int:
    items = s.runs(namespace)
    if awaiting_approval:
        items = [r for r in items if ((r.get("status") or {}).get("gate") or {}).get("state") == "pending"]
    if fmt in ("json", "yaml"):
        output.items(items, fmt)
        return 0
    wide, every = fmt == "wide", namespace is None
    models = agent_models(s, namespace) if wide else None
    output.table(header(wide=wide, namespace=every), [row(r, wide=wide, namespace=every, models=models)
                                                      for r in items])
    return 0


AGENT_HEADER = ("NAME", "MODEL", "PROVIDER", "POLICY", "AGE")
AGENT_WIDE = ("KIND", "HOOKS", "SKILLS")


def agent_row(obj: dict[str, Any], *, wide: bool = False, namespace: bool = False) -> tuple[str, ...]:
    """An Agent (either shape: spec.agents.default and authRefs, or a SympoziumInstance's spec.provider) as a row."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    default = (spec.get("agents") or {}).get("default") or {}
    legacy = spec.get("provider") or {}
    refs = spec.get("authRefs") or []
    model = str(default.get("model") or legacy.get("model") or "")
    provider = str((refs[0].get("provider") if refs and isinstance(refs[0], dict) else "") or legacy.get("name") or "")
    policy = spec.get("policyRef") or spec.get("policy") or ""
    out: tuple[str, ...] = (str(meta.get("name", "")), model, provider, str(policy if isinstance(policy, str) else ""),
                            output.age(meta.get("creationTimestamp")))
    if namespace:
        out = (str(meta.get("namespace", "")), *out)
    if wide:
        lifecycle = default.get("lifecycle") or {}
        hooks = [str(h.get("name")) for phase in ("preRun", "postRun") for h in lifecycle.get(phase) or []
                 if isinstance(h, dict)]
        skills = [str(k if isinstance(k, str) else (k or {}).get("skillPackRef") or "") for k in spec.get("skills") or []]
        out += (str(obj.get("kind", "")), ",".join(hooks), ",".join(k for k in skills if k))
    return out


def list_agents(s: Session, namespace: str | None, *, fmt: str) -> int:
    items: list[dict[str, Any]] = []
    for plural in (AGENTS, "sympoziuminstances"):
        with typed_errors(f"list {plural} in {namespace or 'all namespaces'}"):
            got = (s.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural) if namespace
                   else s.custom.list_cluster_custom_object(GROUP, VERSION, plural))
        items += cast(dict[str, Any], got).get("items", [])
    if fmt in ("json", "yaml"):
        output.items(items, fmt)
        return 0
    wide, every = fmt == "wide", namespace is None
    output.table((("NAMESPACE",) if every else ()) + AGENT_HEADER + (AGENT_WIDE if wide else ()),
                 [agent_row(a, wide=wide, namespace=every) for a in items])
    return 0


def get_run(s: Session, ns: str, name: str, *, fmt: str) -> int:
    run = s.run(ns, name)
    if fmt in ("json", "yaml"):
        output.document(run, fmt)
    else:
        wide = fmt == "wide"
        output.table(header(wide=wide), [row(run, wide=wide, models=agent_models(s, ns) if wide else None)])
    return 0


def watch_run(s: Session, ns: str, name: str, *, fmt: str) -> int:
    """`get NAME -w`: the run now, then again on every change (a row when the row changes), until it ends or is
    deleted."""
    run = s.run(ns, name)
    wide = fmt == "wide"
    models = agent_models(s, ns) if wide else None
    printer = _RowPrinter(header(wide=wide))
    last: tuple[str, ...] | None = None

    def show(obj: dict[str, Any]) -> None:
        nonlocal last
        if fmt in ("json", "yaml"):
            print(*([yaml.safe_dump(obj, sort_keys=False).rstrip(), "---"] if fmt == "yaml"
                    else [json.dumps(obj)]), sep="\n", flush=True)
            return
        r = row(obj, wide=wide, models=models)
        # AGE moves on its own: a row is printed when anything else changes.
        if last is None or r[:4] + r[5:] != last[:4] + last[5:]:
            printer.print(r)
        last = r

    shown_calls: list[str] = []

    def calls(obj: dict[str, Any]) -> None:
        """The tool calls waiting for approval, once each round (a table's row cannot hold their arguments)."""
        nonlocal shown_calls
        waiting = _waiting(obj)
        ids = [str(c.get("id")) for c in waiting]
        if fmt in ("json", "yaml") or ids == shown_calls:
            return
        shown_calls = ids
        for c in waiting:
            print(f"  waiting for approval: call {c.get('id')} {c.get('tool')} {c.get('arguments')}"
                  f"  (agentrun approve {name} --call {c.get('id')})", flush=True)

    show(run)
    calls(run)
    if (run.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return 0  # it has ended: nothing will change any more (kubectl would wait for a change that never comes)
    for event, obj in _watch_one(s, ns, name, run):
        if event == "DELETED":
            print(f"agentrun/{name} deleted", flush=True)
            return 0
        show(obj)
        calls(obj)
        if (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
    return 0


def _waiting(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of the run that wait for a decision now (status.toolApproval, state pending)."""
    st = run.get("status") or {}
    ta = st.get("toolApproval") or {}
    if ta.get("state") != "pending" or st.get("phase") in TERMINAL_PHASES:
        return []
    return [c for c in ta.get("calls") or [] if isinstance(c, dict)]


def approvals(s: Session, ns: str, name: str, *, fmt: str) -> int:
    """`agentrun approvals NAME`: the tool calls that wait for approval (tool, full arguments, their hash), and the
    decisions taken so far."""
    run = s.run(ns, name)
    st = run.get("status") or {}
    if fmt in ("json", "yaml"):
        output.document({"toolApproval": st.get("toolApproval"), "toolApprovals": st.get("toolApprovals") or []}, fmt)
        return 0
    waiting = _waiting(run)
    ta = st.get("toolApproval") or {}
    if waiting:
        print(f"agentrun/{name}: {len(waiting)} tool call(s) wait for approval since {ta.get('requestedAt')} (until "
              f"{ta.get('expiresAt')}, then onTimeout: {ta.get('onTimeout')})")
        for c in waiting:
            print(f"\ncall {c.get('id')}: {c.get('tool')}\n  argumentsSha256: {c.get('argumentsSha256')}\n"
                  f"  arguments: {_pretty(str(c.get('arguments') or '{}'))}")
        print(f"\ndecide with: agentrun approve {name} --call ID | agentrun reject {name} --call ID --reason TEXT | "
              f"agentrun edit {name} --call ID --arguments JSON")
    else:
        print(f"agentrun/{name}: no tool call waits for approval")
    decided = [d for d in st.get("toolApprovals") or [] if isinstance(d, dict)]
    if decided:
        print()
        output.table(("CALL", "TOOL", "ACTION", "DECIDED BY", "SOURCE", "AT", "REASON"),
                     [(str(d.get("callId", "")), str(d.get("tool", "")), str(d.get("action", "")),
                       str(d.get("decidedBy", "")), str(d.get("source", "")), str(d.get("decidedAt", "")),
                       str(d.get("reason") or "")) for d in decided])
    return 0


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False).replace("\n", "\n  ")
    except ValueError:
        return arguments


def tool_decision(api: Api, s: Session, ns: str, name: str, call: str, action: str, *, sha256: str | None,
                  arguments: str | None = None, reason: str = "") -> int:
    """Decide a tool call that waits for approval, through the API (as the token's identity). The decision binds the
    arguments' hash: `sha256`, else the waiting call's as the run's status shows it now."""
    if sha256 is None:
        waiting = {str(c.get("id")): c for c in _waiting(s.run(ns, name))}
        found = waiting.get(call)
        if found is None:
            print(f"agentrun/{name}: no call {call} waits for approval (waiting: {', '.join(waiting) or 'none'})",
                  file=sys.stderr)
            return 1
        sha256 = str(found.get("argumentsSha256") or "")
    body: dict[str, Any] = {"callId": call, "action": action, "argumentsSha256": sha256}
    if reason:
        body["reason"] = reason
    if arguments is not None:
        try:
            body["arguments"] = json.loads(arguments)
        except ValueError as e:
            print(f"--arguments is not JSON: {e}", file=sys.stderr)
            return 2
    try:
        view = api.call("POST", f"/api/v1/runs/{quote(name, safe='')}/tool-approvals", namespace=ns, body=body)
    except ApiError as e:
        return _refused(name, e)
    rest = view.get("waiting") or []
    print(f"agentrun/{name}: call {view.get('call_id')} {view.get('action')} by {view.get('decided_by')}; "
          + (f"still waiting: {', '.join(rest)}" if rest else "the agent goes on"))
    return 0


@dataclass
class _RowPrinter:
    """Rows printed one at a time, aligned on widths fixed at the first row (as `kubectl get -w` does)."""

    header: tuple[str, ...]
    widths: list[int] = field(default_factory=list)

    def print(self, r: tuple[str, ...]) -> None:
        if not self.widths:
            # Room for the longest phase and gate state, so later rows stay aligned.
            floor = {"PHASE": 11, "GATE": 18}
            self.widths = [max(len(h), len(v), floor.get(h, 0)) for h, v in zip(self.header, r, strict=True)]
            self._line(self.header)
        self._line(r)

    def _line(self, values: tuple[str, ...]) -> None:
        print("   ".join(v.ljust(w) for v, w in zip(values, self.widths, strict=True)).rstrip(), flush=True)


def _watch_one(s: Session, ns: str, name: str, run: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Events of one AgentRun from the resourceVersion of `run` on, resumed when the server ends the watch."""
    rv = str((run.get("metadata") or {}).get("resourceVersion") or "")
    while True:
        w = watch.Watch()
        try:
            with typed_errors(f"watch AgentRun {ns}/{name}"):
                for ev in w.stream(s.custom.list_namespaced_custom_object, GROUP, VERSION, ns, AGENTRUNS,
                                   field_selector=f"metadata.name={name}", resource_version=rv,
                                   timeout_seconds=30):
                    obj = ev["raw_object"]
                    rv = str(obj["metadata"]["resourceVersion"])
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        yield ev["type"], obj
        except Gone:
            # Too old to resume: start again from what the run is now.
            run = s.run(ns, name)
            rv = str(run["metadata"]["resourceVersion"])
            yield "MODIFIED", run
        finally:
            w.stop()


# -- through the API ------------------------------------------------------------------------------------------------


def _refused(name: str, e: ApiError) -> int:
    print(f"agentrun/{name}: refused: {e.detail}" if e.status else f"agentrun: {e.detail}", file=sys.stderr)
    return 1


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
        return _refused(name, e)
    by = view.get("decided_by")
    print(f"agentrun/{name}: gate {view.get('state')}" + (f" by {by}" if by else ""))
    return 0


def create_run(api: Api, ns: str, *, agent: str, task: str, model: str | None, provider: str | None,
               env: dict[str, str]) -> str | None:
    """POST /api/v1/runs: the run's name, or None after saying why not."""
    body: dict[str, Any] = {"agentRef": agent, "task": task}
    if model or provider:
        body["model"] = {k: v for k, v in (("model", model), ("provider", provider)) if v}
    if env:
        body["env"] = env
    try:
        made = api.call("POST", "/api/v1/runs", namespace=ns, body=body)
    except ApiError as e:
        print(f"agentrun: {agent}: refused: {e.detail}" if e.status else f"agentrun: {e.detail}", file=sys.stderr)
        return None
    name = str(made["metadata"]["name"])
    print(f"agentrun/{name} created", flush=True)
    return name


def delete_runs(api: Api, ns: str, names: list[str]) -> int:
    worst = 0
    for name in names:
        try:
            api.call("DELETE", f"/api/v1/runs/{quote(name, safe='')}", namespace=ns)
        except ApiError as e:
            worst = _refused(name, e)
            if e.status == 0:
                break
            continue
        print(f"agentrun/{name} deleted")
    return worst


# -- logs -----------------------------------------------------------------------------------------------------------


def logs(s: Session, ns: str, name: str, hook: str | None, attempt: int | None = None, *,
         follow_log: bool = False, wait: float = 300) -> int:
    run = s.run(ns, name)
    job, container = _log_source(run, name, hook, attempt)
    pod = _pod(s, ns, job, run, wait=wait if follow_log else 0)
    if pod is None:
        # Cleaned up: the tail the worker kept of the log before it deleted the Jobs (models/run_logs.py).
        kept = _kept_log(s, ns, run, job, container)
        if kept is None:
            raise CliError(f"no pod for Job {job} and no log kept of it (it may not have started, or was cleaned up "
                           "without keeping logs)")
        print(kept, end="" if kept.endswith("\n") or not kept else "\n")
        return 0
    action = f"read log of {pod}/{container}"
    if not follow_log:
        with typed_errors(action):
            print(s.core.read_namespaced_pod_log(pod, ns, container=container), end="")
        return 0
    with typed_errors(action):
        resp: Any = s.core.read_namespaced_pod_log(pod, ns, container=container, follow=True,
                                                   _preload_content=False)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            for chunk in resp.stream(4096, decode_content=False):
                sys.stdout.write(text.decode(chunk))
                sys.stdout.flush()
        finally:
            resp.release_conn()
    return 0


def _kept_log(s: Session, ns: str, run: dict[str, Any], job: str, container: str) -> str | None:
    meta = run.get("metadata") or {}
    try:
        with typed_errors(f"read the kept logs of AgentRun {ns}/{meta.get('name')}"):
            cm: Any = s.core.read_namespaced_config_map(run_logs.logs_name(str(meta.get("name"))), ns)
    except NotFound:
        return None
    return run_logs.kept_log(s.api.sanitize_for_serialization(cm), run_uid=str(meta.get("uid") or ""), job=job,
                             container=container)


def _log_source(run: dict[str, Any], name: str, hook: str | None, attempt: int | None) -> tuple[str, str]:
    """The Job and container whose log is asked for."""
    # A retried run's agent and gate hook ran once per attempt, each in Jobs of their own: the last, unless asked.
    attempt = attempt or int((run.get("status") or {}).get("attempt") or 1)
    if hook is None:
        return agent_job_of(run, attempt), "agent"
    lifecycle = (run.get("spec") or {}).get("lifecycle") or {}
    pre = {h.get("name") for h in lifecycle.get("preRun") or []}
    post = {h.get("name") for h in lifecycle.get("postRun") or []}
    if hook not in pre | post:
        known = ", ".join(sorted(str(h) for h in pre | post)) or "none"
        raise CliError(f"agentrun/{name} has no hook {hook!r} (its hooks: {known})")
    gated = {h.get("name") for h in lifecycle.get("postRun") or [] if h.get("gate")}
    # With a gate, the other postRun hooks run after the verdict in a Job of their own.
    component: Component = ("prerun" if hook in pre else
                            "post-gate" if gated and hook not in gated else "post-run")
    return job_name(name, component, attempt if component == "post-run" else 1), hook_container(component, hook)


def _pod(s: Session, ns: str, job: str, run: dict[str, Any], *, wait: float) -> str | None:
    """The newest pod of the Job; with `wait`, the first one past Pending (watching the Job's pods until the run
    ends or `wait` seconds pass)."""

    def pick(pods: list[Any]) -> Any:
        return sorted(pods, key=lambda p: p.metadata.creation_timestamp)[-1] if pods else None

    with typed_errors(f"list pods of Job {job}"):
        pods: Any = s.core.list_namespaced_pod(ns, label_selector=f"job-name={job}")
    pod = pick(pods.items)

    def ready(p: Any) -> bool:
        return p is not None and p.status is not None and p.status.phase != "Pending"

    if not wait or ready(pod):
        return str(pod.metadata.name) if pod is not None else None
    deadline = time.monotonic() + wait
    rv = pods.metadata.resource_version
    while time.monotonic() < deadline:
        w = watch.Watch()
        try:
            with typed_errors(f"watch pods of Job {job}"):
                for ev in w.stream(s.core.list_namespaced_pod, ns, label_selector=f"job-name={job}",
                                   resource_version=rv, timeout_seconds=5):
                    p = ev["object"]
                    rv = p.metadata.resource_version
                    if ev["type"] != "DELETED" and ready(p):
                        return str(p.metadata.name)
        except Gone:
            rv = None
        finally:
            w.stop()
        if (s.run(ns, run["metadata"]["name"]).get("status") or {}).get("phase") in TERMINAL_PHASES:
            break
    with typed_errors(f"list pods of Job {job}"):
        pod = pick(s.core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items)
    return str(pod.metadata.name) if pod is not None else None


def names(s: Session, ns: str, prefix: str) -> list[str]:
    """Runs whose names start with `prefix` (shell completion): a short, bounded list call."""
    with typed_errors(f"list AgentRuns in {ns}"):
        items = cast(dict[str, Any], s.custom.list_namespaced_custom_object(GROUP, VERSION, ns, AGENTRUNS,
                                                                            _request_timeout=2))
    return sorted(n for n in (i["metadata"]["name"] for i in items.get("items", [])) if n.startswith(prefix))
