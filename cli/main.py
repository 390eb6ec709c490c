"""The `agentrun` command line: the embedded stack, runs, and the processes themselves."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from models.process import run_main
from models.settings import TemporalSettings

from . import runs, schedules
from .api import Api
from .up import DEFAULT_STATE_DIR, down, endpoints, up

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class CliSettings(BaseSettings):
    """What the CLI reads from the environment: the same Temporal variables as the processes (TLS, API key)."""

    model_config = SettingsConfigDict(env_prefix="AGENTRUN_", env_nested_delimiter="__", extra="ignore")

    temporal: TemporalSettings = TemporalSettings()


def _session(args: argparse.Namespace) -> runs.Session:
    state = args.state_dir
    if (state / "endpoints.json").exists():
        info = endpoints(state)
        return runs.Session(info["kubeconfig"], info.get("temporal_ui", ""))
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit(f"no stack in {state} and no KUBECONFIG set; run `agentrun up` first")
    return runs.Session(kubeconfig)


def demo(state_dir: Path) -> int:
    """Bring the embedded stack up, run the lifecycle example to the end, print it, stop."""
    up(state_dir, detach=True, fallback_poll_seconds=10)
    try:
        info = endpoints(state_dir)
        s = runs.Session(info["kubeconfig"], info["temporal_ui"])
        files = [EXAMPLES / "agent.yaml", EXAMPLES / "prerun-context.yaml"]
        code = runs.apply(s, files, "default", wait=True, timeout=180)
        print(f"(the stack is still up while this prints; Temporal UI: {info['temporal_ui']})")
        return code
    finally:
        down(state_dir)


def _schedule_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sc = sub.add_parser("schedules", help="list, inspect, pause, resume, trigger and backfill SympoziumSchedules "
                                          "(through the HTTP API)")
    ops = sc.add_subparsers(dest="op", required=True)
    ops.add_parser("list", help="the schedules of a namespace with their phase and next run")
    for op, text in (("get", "show one schedule (spec and status)"),
                     ("pause", "set spec.suspend: true (no tick fires until resumed)"),
                     ("resume", "set spec.suspend: false"),
                     ("trigger", "run one tick now (concurrencyPolicy applies)")):
        ops.add_parser(op, help=text).add_argument("name")
    bf = ops.add_parser("backfill", help="run every tick of a past range [--from, --to): --from's tick runs, "
                                         "--to's does not")
    bf.add_argument("name")
    bf.add_argument("--from", dest="start", required=True, metavar="TIME", help="RFC 3339, e.g. 2026-01-15T08:00:00Z")
    bf.add_argument("--to", dest="end", required=True, metavar="TIME", help="RFC 3339, after --from, not in the future")
    for p in ops.choices.values():
        p.add_argument("-n", "--namespace", default="default")


def _schedules(args: argparse.Namespace) -> int:
    api = Api.locate(args.state_dir)
    if args.op == "list":
        return schedules.list_schedules(api, args.namespace)
    if args.op == "get":
        return schedules.get_schedule(api, args.namespace, args.name)
    if args.op in ("pause", "resume"):
        return schedules.set_suspend(api, args.namespace, args.name, suspend=args.op == "pause")
    if args.op == "trigger":
        return schedules.trigger(api, args.namespace, args.name)
    return schedules.backfill(api, args.namespace, args.name, start=args.start, end=args.end)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="agentrun", description="Run AI agents on Kubernetes with Temporal.")
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"where the embedded stack keeps its state (default {DEFAULT_STATE_DIR})")
    sub = p.add_subparsers(dest="command", required=True)
    # `agentrun up --state-dir DIR` as well as `agentrun --state-dir DIR up`: the subcommand's copy only sets the
    # value when given, so the global one (or its default) stands otherwise.
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument("--state-dir", type=Path, default=argparse.SUPPRESS,
                       help=f"where the embedded stack keeps its state (default {DEFAULT_STATE_DIR})")
    u = sub.add_parser("up", parents=[state], help="start the embedded stack (Temporal, localkube, NATS, worker, bridge)")
    u.add_argument("--detach", action="store_true", help="return once healthy, leaving the stack running")
    u.add_argument("--in-cluster", action="store_true",
                   help="install the worker, the bridge and the API into localkube from the Helm chart (pods with "
                        "their own ServiceAccounts) instead of running them as host processes")
    sub.add_parser("down", parents=[state], help="stop the embedded stack")
    a = sub.add_parser("apply", parents=[state], help="create Agents, AgentRuns and other objects from YAML")
    a.add_argument("-f", "--filename", type=Path, action="append", required=True)
    a.add_argument("-n", "--namespace", default="default")
    a.add_argument("--wait", action="store_true", help="follow each AgentRun until it ends")
    a.add_argument("--timeout", type=float, default=600)
    ls = sub.add_parser("list", parents=[state], help="list AgentRuns")
    ls.add_argument("-n", "--namespace", default="default")
    ls.add_argument("-A", "--all-namespaces", action="store_true")
    ls.add_argument("--awaiting-approval", action="store_true", help="only runs whose gate waits for a verdict")
    for action, needs in (("approve", False), ("reject", True), ("rewrite", True)):
        v = sub.add_parser(action, parents=[state], help=f"{action} the response of a run waiting at its gate")
        v.add_argument("name")
        v.add_argument("-n", "--namespace", default="default")
        v.add_argument("--response", required=needs and action == "rewrite", default="",
                       help="the text that replaces the agent's response")
        v.add_argument("--reason", default="")
    r = sub.add_parser("retry", parents=[state], help="send the response of a run waiting at its gate back: the agent "
                                                      "runs again with the feedback (with lifecycle.retry; else a reject)")
    r.add_argument("name")
    r.add_argument("-n", "--namespace", default="default")
    r.add_argument("--feedback", required=True, help="what the agent should do differently (it gets it with its task)")
    r.add_argument("--reason", default="")
    g = sub.add_parser("get", parents=[state], help="show one AgentRun")
    g.add_argument("name")
    g.add_argument("-n", "--namespace", default="default")
    lg = sub.add_parser("logs", parents=[state], help="the agent's log, or a hook's with --hook")
    lg.add_argument("name")
    lg.add_argument("-n", "--namespace", default="default")
    lg.add_argument("--hook")
    lg.add_argument("--attempt", type=int, help="a retried run's attempt (default: the last) for the agent and the "
                                                "gate hook")
    _schedule_commands(sub)
    tp = sub.add_parser("temporal", help="prepare a Temporal namespace for agentrun")
    tops = tp.add_subparsers(dest="op", required=True)
    ts = tops.add_parser("setup", help="register the search attributes the workflows use (idempotent); settings "
                                       "from AGENTRUN_TEMPORAL__* (TLS, API key)")
    ts.add_argument("--address", help="host:port (default AGENTRUN_TEMPORAL__ADDRESS)")
    ts.add_argument("--namespace", help="Temporal namespace (default AGENTRUN_TEMPORAL__NAMESPACE)")
    cp = sub.add_parser("codec", help="the payload codec's keys")
    cops = cp.add_subparsers(dest="op", required=True)
    nk = cops.add_parser("new-key", help="print a fresh key line ('<id> <base64 key>') for a codec key file: put it "
                                         "first to write with it, keep the old lines to read what they wrote")
    nk.add_argument("--id", default="", help="the key's ID (default: k<date>-<random>)")
    sub.add_parser("worker", help="run the Temporal worker (settings from AGENTRUN_* variables)")
    sub.add_parser("bridge", help="run the bridge (settings from AGENTRUN_* variables)")
    ap = sub.add_parser("api", help="run the HTTP API (settings from AGENTRUN_* variables)")
    ap.add_argument("--insecure", action="store_true", help="serve without tokens")
    d = sub.add_parser("demo", help="up, run the lifecycle example to the end, down")
    d.add_argument("--demo-state-dir", type=Path, default=Path(".state/demo"))
    args = p.parse_args(argv)
    args.state_dir = args.state_dir.resolve()
    if args.command not in ("worker", "bridge", "api"):  # the servers configure their own logging (INFO)
        logging.basicConfig(level=logging.WARNING)

    if args.command == "up":
        return up(args.state_dir, detach=args.detach, in_cluster=args.in_cluster)
    if args.command == "down":
        return down(args.state_dir)
    if args.command == "demo":
        return demo(args.demo_state_dir.resolve())
    if args.command == "worker":
        from worker.main import main as worker_main

        return worker_main()
    if args.command == "bridge":
        from bridge.main import main as bridge_main

        return bridge_main()
    if args.command == "api":
        from api.serve import main as api_main

        return api_main(["--insecure"] if args.insecure else [])
    if args.command == "schedules":
        return _schedules(args)
    if args.command == "codec":
        from models.codec import KeyFileError, new_key_line

        try:
            print(new_key_line(args.id))
        except KeyFileError as e:
            raise SystemExit(f"agentrun codec new-key: {e}") from e
        return 0
    if args.command == "temporal":
        from .temporal import setup

        try:
            temporal = CliSettings().temporal
        except ValidationError as e:
            raise SystemExit(f"agentrun temporal setup: {e}") from e
        overrides = {k: v for k, v in (("address", args.address), ("namespace", args.namespace)) if v}
        return setup(temporal.model_copy(update=overrides))
    s = _session(args)
    if args.command == "apply":
        return runs.apply(s, args.filename, args.namespace, wait=args.wait, timeout=args.timeout)
    if args.command == "list":
        return runs.list_runs(s, None if args.all_namespaces else args.namespace,
                              awaiting_approval=args.awaiting_approval)
    if args.command in ("approve", "reject", "rewrite"):
        return runs.verdict(Api.locate(args.state_dir), args.namespace, args.name, args.command,
                            response=args.response, reason=args.reason)
    if args.command == "retry":
        return runs.verdict(Api.locate(args.state_dir), args.namespace, args.name, "retry",
                            response=args.feedback, reason=args.reason)
    if args.command == "get":
        return runs.get_run(s, args.namespace, args.name)
    if args.command == "logs":
        return runs.logs(s, args.namespace, args.name, args.hook, args.attempt)
    return 2


def entry() -> None:
    """The `agentrun` console script: `main`, then an exit without interpreter finalization (models/process.py)."""
    run_main(main)


if __name__ == "__main__":
    entry()
