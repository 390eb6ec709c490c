"""The `agentrun` command line: the embedded stack, runs, schedules, and the processes themselves.

A click group in kopf's manner (kopf/cli.py): `auto_envvar_prefix="AGENTRUN"` and one decorator that gives every
command the shared options (cli/options.py), so they go before or after the command. Output formats are in
cli/output.py; failures print one line and exit non-zero (`main`), never a traceback.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml
from click.shell_completion import CompletionItem, get_completion_class
from kubernetes.config import ConfigException
from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from urllib3.exceptions import HTTPError

from kube import KubeError, NotFound, kube_error, typed_errors
from models.names import AGENTRUNS, GROUP, VERSION
from models.process import run_main
from models.settings import TemporalSettings

from . import follow, runs, schedules
from .api import Api, ApiError
from .errors import CliError
from .options import NAMES, Target, global_options, group_options, output_option
from .up import down, endpoints, running, up

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVERS = ("worker", "bridge", "api")


class CliSettings(BaseSettings):
    """What the CLI reads from the environment: the same Temporal variables as the processes (TLS, API key)."""

    model_config = SettingsConfigDict(env_prefix="AGENTRUN_", env_nested_delimiter="__", extra="ignore")

    temporal: TemporalSettings = TemporalSettings()


class Command(click.Command):
    """argparse's lowercase "usage:" line (scripts and the image's tests read it)."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, " ".join(self.collect_usage_pieces(ctx)), prefix="usage: ")


class Group(click.Group):
    command_class = Command
    group_class = type  # subgroups are Groups too

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, " ".join(self.collect_usage_pieces(ctx)), prefix="usage: ")


class Failure(click.ClickException):
    """A failure below the command line as click reports it: `agentrun: <one line>` on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"agentrun: {self.message}", file=file or sys.stderr)


class Root(Group):
    """The root group maps every failure it knows to one line and an exit code (so does click's own runner)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CliError as e:
            raise Failure(e.message) from e
        except ApiError as e:
            raise Failure(e.detail) from e
        except KubeError as e:
            raise Failure(str(e) if e.status else unreachable(e)) from e
        except ConfigException as e:
            raise Failure(f"kubeconfig: {e}") from e
        except (HTTPError, ConnectionError, TimeoutError) as e:  # a connection the layers above did not name
            raise Failure(unreachable(kube_error(e, action="talk to Kubernetes"))) from e
        except OSError as e:  # a file of the state directory, a kubeconfig, a manifest
            raise Failure(str(e)) from e


CONTEXT = {"auto_envvar_prefix": "AGENTRUN", "help_option_names": ["-h", "--help"], "max_content_width": 110}


def session(target: Target) -> runs.Session:
    """Kubernetes for reads and `apply`; the stack's Temporal UI for links when it is the stack's cluster."""
    kubeconfig = target.kubeconfig_path()
    stack = target.endpoints()
    ui = str(stack.get("temporal_ui") or "") if stack.get("kubeconfig") == kubeconfig else ""
    return runs.Session(kubeconfig, ui, context=target.context)


def complete_runs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Run names from the cluster, where a stack or kubeconfig is at hand and answers within 2s."""
    target = Target()
    for c in reversed([ctx, *_parents(ctx)]):
        target = Target(**{k: c.params.get(k) for k in NAMES}).over(target)
    try:
        return [CompletionItem(n) for n in runs.names(session(target), target.ns, incomplete)]
    except Exception:  # completion offers what it can; a shell must never see a failure
        return []


def _parents(ctx: click.Context) -> list[click.Context]:
    out = []
    while ctx.parent is not None:
        ctx = ctx.parent
        out.append(ctx)
    return out


RUN_NAME = click.argument("name", shell_complete=complete_runs)


def unreachable(e: KubeError) -> str:
    """A connection failure as one short line: what was being done, where, and the system's reason."""
    where = re.search(r"host='([^']+)', port=(\d+)", e.message)
    why = re.search(r"\[Errno -?\d+\] ([^\"')]+)", e.message)
    return (f"{e.action}: cannot reach the Kubernetes API server" + (f" at {where[1]}:{where[2]}" if where else "")
            + f" ({why[1].strip() if why else e.message})")


@click.group(cls=Root, context_settings=CONTEXT)
@click.version_option(package_name="agentrun", prog_name="agentrun", message="%(prog)s %(version)s")
@group_options
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run AI agents on Kubernetes with Temporal.

    \b
    These options go before or after the command (the command's copy wins) and read AGENTRUN_STATE_DIR,
    AGENTRUN_NAMESPACE, AGENTRUN_CONTEXT, AGENTRUN_KUBECONFIG, AGENTRUN_API, AGENTRUN_TOKEN. Reads use Kubernetes
    (the stack's kubeconfig, --kubeconfig or KUBECONFIG); user actions (run, delete, approve, reject, rewrite,
    retry, schedules) go through the agentrun API as its token's identity.
    """
    if ctx.invoked_subcommand not in SERVERS:  # the servers configure their own logging (INFO)
        logging.basicConfig(level=logging.WARNING)
        # The client's retries are its business: a failure is reported once, as one line.
        logging.getLogger("urllib3").setLevel(logging.ERROR)


# -- the embedded stack ----------------------------------------------------------------------------------------------


@cli.command("up")
@global_options
@click.option("--detach", is_flag=True, help="return once healthy, leaving the stack running")
@click.option("--in-cluster", is_flag=True, help="install the worker, the bridge and the API into localkube from "
                                                 "the Helm chart (pods with their own ServiceAccounts) instead of "
                                                 "running them as host processes")
@click.option("--otlp-endpoint", metavar="URL", default="",
              help="an OTLP/HTTP collector (http://host:4318) the worker, the bridge and the API export their spans to "
                   "(OTEL_EXPORTER_OTLP_ENDPOINT; the chart's otel.endpoint with --in-cluster)")
def up_command(target: Target, detach: bool, in_cluster: bool, otlp_endpoint: str) -> int:
    """Start the embedded stack (Temporal, localkube, NATS, worker, bridge, API) in the state directory."""
    if otlp_endpoint:
        if not otlp_endpoint.startswith(("http://", "https://")):
            raise click.BadParameter(f"{otlp_endpoint!r} is not an http(s) URL", param_hint="--otlp-endpoint")
        # The host processes inherit this process's environment; --in-cluster puts it into the chart's values.
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    return up(target.state, detach=detach, in_cluster=in_cluster)


@cli.command("down")
@global_options
def down_command(target: Target) -> int:
    """Stop the embedded stack of the state directory."""
    return down(target.state)


@cli.command("demo")
@global_options
@click.option("--demo-state-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".state/demo"),
              show_default=True, help="the demo's own stack")
@click.option("--keep", is_flag=True, help="leave the demo's stack up afterwards, to look around (the console, the "
                                           "Temporal UI); `agentrun down --state-dir DIR` stops it")
def demo_command(target: Target, demo_state_dir: Path, keep: bool) -> int:
    """Up, run the lifecycle example to the end, print it, down (unless --keep). Run it as often as you like: an
    earlier demo's run is deleted first, and a demo stack kept up is used again."""
    return demo(demo_state_dir.resolve(), keep=keep)


DEMO_FILES = ("agent.yaml", "prerun-context.yaml")
DEMO_RUN = "summarize-release"  # the AgentRun of prerun-context.yaml
DEMO_DELETE_SECONDS = 60


def demo(state_dir: Path, *, keep: bool = False) -> int:
    reused = running(state_dir)
    if reused:
        print(f"the demo's stack in {state_dir} is up: using it")
    else:
        up(state_dir, detach=True, fallback_poll_seconds=10, announce=keep)
    code = 1
    try:
        info = endpoints(state_dir)
        # The workflow's link only while its UI will still be there to open.
        s = runs.Session(info["kubeconfig"], info["temporal_ui"] if keep else "")
        _forget(s, "default", DEMO_RUN)
        code = follow.apply(s, [EXAMPLES / f for f in DEMO_FILES], "default", wait=True, timeout=180)
    finally:
        if not keep:
            down(state_dir)
    where = f" --state-dir {state_dir}"
    if keep:
        print(f"\nThe demo's stack stays up. Open the console at {info.get('api', '')}/ and sign in with the token "
              f"`agentrun token{where}` prints; `agentrun down{where}` stops it.")
    else:
        print("\nThe demo's stack is stopped. To look around, keep a stack up: `agentrun up --detach` (or `bash "
              "deploy/dev.sh demo --keep`), then open the console at the `api` address it prints and sign in with "
              "the token `agentrun token` prints; `agentrun down` stops it.")
    return code


def _forget(s: runs.Session, ns: str, name: str) -> None:
    """Delete an earlier demo's run (a run executes once, so the demo's run is a new one each time) and wait until
    its cleanup has let it go."""
    try:
        with typed_errors(f"delete AgentRun {ns}/{name}"):
            s.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, AGENTRUNS, name)
    except NotFound:
        return
    print(f"agentrun/{name} of an earlier demo deleted")
    deadline = time.monotonic() + DEMO_DELETE_SECONDS
    while time.monotonic() < deadline:
        try:
            with typed_errors(f"read AgentRun {ns}/{name}"):
                s.custom.get_namespaced_custom_object(GROUP, VERSION, ns, AGENTRUNS, name)
        except NotFound:
            return
        time.sleep(0.2)
    raise CliError(f"agentrun/{name} of an earlier demo was not gone after {DEMO_DELETE_SECONDS}s")


@cli.command("config")
@global_options
def config_command(target: Target) -> int:
    """Print where the commands will go: the state directory, namespace, kubeconfig and context, API and token
    (its first characters), after the options, the AGENTRUN_* variables and the stack's endpoints.json."""
    print(yaml.safe_dump(target.resolved(), sort_keys=False), end="")
    return 0


@cli.command("token")
@global_options
def token_command(target: Target) -> int:
    """Print the API token: the one to sign in to the web console with (the `api` address of `agentrun up`), and
    that user actions send. The embedded stack's, from its endpoints.json (or --token / AGENTRUN_TOKEN)."""
    _url, token = target.api_url_and_token()
    if not token:
        raise CliError(f"no API token: the stack in {target.state} has none and no --token (AGENTRUN_TOKEN) is set")
    print(token)
    return 0


# -- runs ----------------------------------------------------------------------------------------------------------


@cli.command("apply")
@global_options
@click.option("-f", "--filename", "files", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              multiple=True, required=True, help="a YAML file (repeatable)")
@click.option("--wait", is_flag=True, help="follow each AgentRun until it ends: a live status line per run (phase, "
                                           "gate, elapsed), the approve command when a gate waits, then the result")
@click.option("--timeout", type=float, default=600, show_default=True, help="seconds --wait waits")
@click.option("--force-conflicts", is_flag=True, help="take over fields another field manager owns (as kubectl apply "
                                                      "--server-side --force-conflicts)")
def apply_command(target: Target, files: tuple[Path, ...], wait: bool, timeout: float, force_conflicts: bool) -> int:
    """Apply Agents, policies, schedules, packs and other objects from YAML, and create AgentRuns.

    A Kubernetes write, declarative as `kubectl apply`: server-side apply (field manager `agentrun`) with strict field
    validation, as your kubeconfig's user (the admission webhook stamps that user as a run's creator), not through
    the API. An existing AgentRun is left as it is: `unchanged` when the file asks for what it has, refused when the
    file changes its spec (a run executes once). `agentrun run` creates a run through the API."""
    return follow.apply(session(target), list(files), target.ns, wait=wait, timeout=timeout,
                        force_conflicts=force_conflicts)


@cli.command("list")
@global_options
@click.option("-A", "--all-namespaces", is_flag=True, help="runs of every namespace")
@click.option("--awaiting-approval", is_flag=True, help="only runs whose gate waits for a verdict")
@output_option()
def list_command(target: Target, all_namespaces: bool, awaiting_approval: bool, output: str) -> int:
    """List AgentRuns (from Kubernetes)."""
    return runs.list_runs(session(target), None if all_namespaces else target.ns, fmt=output,
                          awaiting_approval=awaiting_approval)


@cli.command("agents")
@global_options
@click.option("-A", "--all-namespaces", is_flag=True, help="Agents of every namespace")
@output_option()
def agents_command(target: Target, all_namespaces: bool, output: str) -> int:
    """List Agents (and SympoziumInstances) with their model, provider and policy (from Kubernetes)."""
    return runs.list_agents(session(target), None if all_namespaces else target.ns, fmt=output)


@cli.command("get")
@global_options
@RUN_NAME
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default=None,
              help="yaml (the default), json, or a table row; with -w, table rows unless asked")
@click.option("-w", "--watch", is_flag=True, help="print the run, then again on every change, until it ends")
def get_command(target: Target, name: str, output: str | None, watch: bool) -> int:
    """Show one AgentRun (from Kubernetes)."""
    s = session(target)
    if watch:
        return runs.watch_run(s, target.ns, name, fmt=output or "table")
    return runs.get_run(s, target.ns, name, fmt=output or "yaml")


@cli.command("logs")
@global_options
@RUN_NAME
@click.option("-f", "--follow", is_flag=True, help="stream the log while the pod runs (waiting for it to start)")
@click.option("--hook", metavar="HOOK", help="a lifecycle hook's log instead of the agent's")
@click.option("--attempt", type=click.IntRange(min=1),
              help="a retried run's attempt (default: the last) for the agent and the gate hook")
def logs_command(target: Target, name: str, follow: bool, hook: str | None, attempt: int | None) -> int:
    """The agent's log, or a hook's with --hook."""
    return runs.logs(session(target), target.ns, name, hook, attempt, follow_log=follow)


def _env_pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE")
        out[key] = value
    return out


@cli.command("run")
@global_options
@click.argument("agent")
@click.option("--task", required=True, help="what the agent is asked to do")
@click.option("--model", help="the model (spec.model.model), instead of the Agent's")
@click.option("--provider", help="the model's provider (spec.model.provider)")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE", callback=_env_pairs,
              help="an environment variable for the agent (repeatable)")
@click.option("--wait", is_flag=True, help="follow the run until it ends (as apply --wait)")
@click.option("--timeout", type=float, default=600, show_default=True, help="seconds --wait waits")
def run_command(target: Target, agent: str, task: str, model: str | None, provider: str | None,
                env: dict[str, str], wait: bool, timeout: float) -> int:
    """Start a run of AGENT through the API (POST /api/v1/runs), as the token's identity."""
    name = runs.create_run(Api.of(target), target.ns, agent=agent, task=task, model=model, provider=provider,
                           env=env)
    if name is None:
        return 1
    if not wait:
        return 0
    phases = follow.follow(session(target), [(target.ns, name)], timeout=timeout)
    return 0 if phases.get(name) in ("Succeeded", "Skipped") else 1


@cli.command("delete")
@global_options
@click.argument("names", nargs=-1, required=True, shell_complete=complete_runs)
def delete_command(target: Target, names: tuple[str, ...]) -> int:
    """Delete runs through the API (DELETE /api/v1/runs/NAME), as the token's identity."""
    return runs.delete_runs(Api.of(target), target.ns, list(names))


def _verdict_command(action: str, text: str, *, option: str, required: bool, help_: str,
                     tool: str = "") -> None:
    """A gate verdict command; with `tool` (approve, reject), also the decision on a tool call (--call)."""
    text += " Through the API, as the token's identity (recorded as the gate's decidedBy)."
    if tool:
        text += f" With --call ID: {tool} the run's tool call ID that waits for approval (SPEC §10)."

    @global_options
    @RUN_NAME
    @click.option(option, "response", default="", required=False, help=help_ + (" (required)" if required else ""))
    @click.option("--reason", default="", help="why (kept with the verdict or decision)")
    def command(target: Target, name: str, response: str, reason: str, call: str | None = None,
                sha256: str | None = None) -> int:
        if call is not None:
            if response:
                raise click.UsageError(f"{option} is for a gate's verdict, not a tool call's decision")
            return runs.tool_decision(Api.of(target), session(target), target.ns, name, call, action, sha256=sha256,
                                      reason=reason)
        return runs.verdict(Api.of(target), target.ns, name, action, response=response, reason=reason)

    if tool:
        command = click.option("--call", metavar="ID", help="decide this tool call instead of the gate")(command)
        command = click.option("--sha256", metavar="HASH",
                               help="the arguments' argumentsSha256 you decide on (default: the waiting call's)")(command)
    cli.command(action, help=text)(command)


_verdict_command("approve", "Approve the response of a run waiting at its gate.", option="--response",
                 required=False, help_="a text that replaces the agent's response", tool="approve")
_verdict_command("reject", "Reject the response of a run waiting at its gate, with a replacement.",
                 option="--response", required=True, help_="the text that replaces the agent's response",
                 tool="reject (with --reason, which the agent's model reads)")
_verdict_command("rewrite", "Rewrite the response of a run waiting at its gate.", option="--response",
                 required=True, help_="the text that replaces the agent's response")
_verdict_command("retry", "Send the response of a run waiting at its gate back: the agent runs again with the "
                          "feedback (with lifecycle.retry; else a reject).", option="--feedback", required=True,
                 help_="what the agent should do differently (it gets it with its task)")


@cli.command("edit")
@global_options
@RUN_NAME
@click.option("--call", metavar="ID", required=True, help="the tool call that waits for approval")
@click.option("--arguments", metavar="JSON", required=True, help="the arguments it runs with instead (a JSON object)")
@click.option("--sha256", metavar="HASH", help="the original arguments' argumentsSha256 (default: the waiting call's)")
@click.option("--reason", default="", help="why (kept with the decision)")
def edit_command(target: Target, name: str, call: str, arguments: str, sha256: str | None, reason: str) -> int:
    """Approve a tool call that waits for approval with other arguments: it runs with them, and the audit
    (status.toolApprovals) keeps both. Through the API, as the token's identity."""
    return runs.tool_decision(Api.of(target), session(target), target.ns, name, call, "edit", sha256=sha256,
                              arguments=arguments, reason=reason)


@cli.command("approvals")
@global_options
@RUN_NAME
@output_option()
def approvals_command(target: Target, name: str, output: str) -> int:
    """The run's tool calls that wait for approval (tool, full arguments, their hash) and the decisions so far (from
    Kubernetes)."""
    return runs.approvals(session(target), target.ns, name, fmt=output)


# -- schedules -----------------------------------------------------------------------------------------------------


@cli.group("schedules", cls=Group)
@group_options(root=False)
def schedules_group() -> None:
    """List, inspect, pause, resume, trigger and backfill SympoziumSchedules (through the API)."""


@schedules_group.command("list")
@global_options
@output_option()
def schedules_list(target: Target, output: str) -> int:
    """The schedules of a namespace with their phase and next run."""
    return schedules.list_schedules(Api.of(target), target.ns, fmt=output)


@schedules_group.command("get")
@global_options
@click.argument("name")
@output_option(default="yaml")
def schedules_get(target: Target, name: str, output: str) -> int:
    """Show one schedule (spec and status)."""
    return schedules.get_schedule(Api.of(target), target.ns, name, fmt=output)


def _schedule_op(op: str, text: str, call: Callable[[Api, str, str], int]) -> None:
    @schedules_group.command(op, help=text)
    @global_options
    @click.argument("name")
    def command(target: Target, name: str) -> int:
        return call(Api.of(target), target.ns, name)


_schedule_op("pause", "Set spec.suspend: true (no tick fires until resumed).",
             lambda api, ns, name: schedules.set_suspend(api, ns, name, suspend=True))
_schedule_op("resume", "Set spec.suspend: false.", lambda api, ns, name: schedules.set_suspend(api, ns, name,
                                                                                              suspend=False))
_schedule_op("trigger", "Run one tick now (concurrencyPolicy applies).", schedules.trigger)


@schedules_group.command("backfill")
@global_options
@click.argument("name")
@click.option("--from", "start", required=True, metavar="TIME", help="RFC 3339, e.g. 2026-01-15T08:00:00Z")
@click.option("--to", "end", required=True, metavar="TIME", help="RFC 3339, after --from, not in the future")
def schedules_backfill(target: Target, name: str, start: str, end: str) -> int:
    """Run every tick of a past range [--from, --to): --from's tick runs, --to's does not."""
    return schedules.backfill(Api.of(target), target.ns, name, start=start, end=end)


# -- operating agentrun ----------------------------------------------------------------------------------------------


@cli.group("temporal", cls=Group)
def temporal_group() -> None:
    """Prepare a Temporal namespace for agentrun."""


@temporal_group.command("setup")
@click.option("--address", help="host:port (default AGENTRUN_TEMPORAL__ADDRESS)")
@click.option("--namespace", help="the Temporal namespace (default AGENTRUN_TEMPORAL__NAMESPACE)")
def temporal_setup(address: str | None, namespace: str | None) -> int:
    """Register the search attributes the workflows use (idempotent); settings from AGENTRUN_TEMPORAL__* (TLS,
    API key)."""
    from .temporal import setup

    try:
        temporal = CliSettings().temporal
    except ValidationError as e:
        raise CliError(f"temporal setup: {e}") from e
    overrides = {k: v for k, v in (("address", address), ("namespace", namespace)) if v}
    return setup(temporal.model_copy(update=overrides))


@cli.group("codec", cls=Group)
def codec_group() -> None:
    """The payload codec's keys."""


@codec_group.command("new-key")
@click.option("--id", "key_id", default="", help="the key's ID (default: k<date>-<random>)")
def codec_new_key(key_id: str) -> int:
    """Print a fresh key line ('<id> <base64 key>') for a codec key file: put it first to write with it, keep the
    old lines to read what they wrote."""
    from models.codec import KeyFileError, new_key_line

    try:
        print(new_key_line(key_id))
    except KeyFileError as e:
        raise CliError(f"codec new-key: {e}") from e
    return 0


@cli.command("worker")
def worker_command() -> int:
    """Run the Temporal worker (settings from AGENTRUN_* variables)."""
    from worker.main import main as worker_main

    return worker_main()


@cli.command("bridge")
def bridge_command() -> int:
    """Run the bridge (settings from AGENTRUN_* variables)."""
    from bridge.main import main as bridge_main

    return bridge_main()


@cli.command("api")
@click.option("--insecure", is_flag=True, help="serve without tokens")
def api_command(insecure: bool) -> int:
    """Run the HTTP API (settings from AGENTRUN_* variables)."""
    from api.serve import main as api_main

    return api_main(["--insecure"] if insecure else [])


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_command(shell: str) -> int:
    """Print the shell completion script: `eval "$(agentrun completion bash)"` (or zsh; fish: `agentrun completion
    fish | source`). Run names complete from the cluster."""
    cls = get_completion_class(shell)
    assert cls is not None  # every choice has a class
    print(cls(cli, {}, "agentrun", "_AGENTRUN_COMPLETE").source())
    return 0


# -- entry points --------------------------------------------------------------------------------------------------


@cli.result_callback()
def _exit_code(result: Any, **_: Any) -> None:
    """A command's int result is the process's exit code."""
    if isinstance(result, int) and result:
        click.get_current_context().exit(result)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; its exit code. Every failure is one line on stderr."""
    try:
        result: Any = cli.main(args=argv, prog_name="agentrun", standalone_mode=False)
    except click.exceptions.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:  # Ctrl-C (click turns it into Abort): how `get -w` and `logs -f` are left
        return 130
    except SystemExit as e:  # the stack's own stops (`agentrun up`) say why in their message
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


def entry() -> None:
    """The `agentrun` console script: `main`, then an exit without interpreter finalization (models/process.py)."""
    run_main(main)


if __name__ == "__main__":
    entry()
