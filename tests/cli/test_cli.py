"""The `agentrun` command line in-process (click's runner): every command's help, the shared options before or after
the command, AGENTRUN_* variables, the stack's endpoints.json as defaults, and failures as one line and a non-zero
exit, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result

from cli.main import cli, main
from cli.stack import free_port


def _walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _walk(sub, (*path, name))


COMMANDS = list(_walk(cli))


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    # A clean environment for the variables the CLI reads: the developer's own must not leak in.
    base: dict[str, str | None] = {k: None for k in ("AGENTRUN_STATE_DIR", "AGENTRUN_NAMESPACE", "AGENTRUN_CONTEXT", "AGENTRUN_KUBECONFIG",
                              "AGENTRUN_API", "AGENTRUN_API_URL", "AGENTRUN_TOKEN", "AGENTRUN_API_TOKEN",
                              "KUBECONFIG")}
    base["HOME"] = "/nonexistent"  # no ~/.kube/config of the developer's
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})}, prog_name="agentrun")


def config(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    r = invoke(*args, env=env)
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = yaml.safe_load(r.stdout)
    return out


def test_the_tree_has_every_command() -> None:
    assert {" ".join(p) for p in COMMANDS} >= {
        "", "up", "down", "demo", "apply", "list", "get", "logs", "approve", "reject", "rewrite", "retry", "run",
        "delete", "config", "completion", "schedules", "schedules list", "schedules get", "schedules pause",
        "schedules resume", "schedules trigger", "schedules backfill", "temporal", "temporal setup", "codec",
        "codec new-key", "worker", "bridge", "api", "token", "agents"}


def test_version_is_the_packages() -> None:
    from importlib.metadata import version

    r = invoke("--version")
    assert (r.exit_code, r.stdout) == (0, f"agentrun {version('agentrun')}\n")


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "agentrun")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    r = invoke(*path, "--help")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"usage: {' '.join(('agentrun', *path))} "), r.stdout
    assert "Traceback" not in r.output


NOT_THE_STACKS = ("temporal", "codec", "worker", "bridge", "api", "completion")
STACK_COMMANDS = [p for p in COMMANDS if (len(p) == 1 and p[0] not in (*NOT_THE_STACKS, "schedules"))
                  or (len(p) == 2 and p[0] == "schedules")]


@pytest.mark.parametrize("path", STACK_COMMANDS, ids=" ".join)
def test_commands_that_reach_the_stack_take_the_shared_options(path: tuple[str, ...]) -> None:
    r = invoke(*path, "--help")
    for option in ("--state-dir", "-n, --namespace", "--context", "--kubeconfig", "--api", "--token"):
        assert option in r.stdout, (path, option)


def test_shared_options_before_and_after_the_command_are_the_same(tmp_path: Path) -> None:
    options = ["--state-dir", str(tmp_path), "-n", "team-a", "--context", "ctx", "--kubeconfig",
               str(tmp_path / "kc"), "--api", "http://api.example:8080/", "--token", "secret-token"]
    before = config(*options, "config")
    after = config("config", *options)
    assert before == after == {"stateDir": str(tmp_path), "namespace": "team-a", "kubeconfig": str(tmp_path / "kc"),
                               "context": "ctx", "api": "http://api.example:8080", "token": "secr..."}
    # Also for a subgroup's commands: before the group, between, or after (the API named is the one tried).
    down = f"http://127.0.0.1:{free_port()}"
    for args in (["--api", down, "schedules", "list"], ["schedules", "--api", down, "list"],
                 ["schedules", "list", "--api", down], ["--api", "http://127.0.0.1:1", "schedules", "list",
                                                        "--api", down]):
        r = invoke("--state-dir", str(tmp_path), *args)
        assert r.exit_code == 1 and f"cannot reach the API at {down}:" in r.stderr, (args, r.output)


def test_the_commands_value_wins_over_the_groups(tmp_path: Path) -> None:
    got = config("-n", "outer", "--state-dir", str(tmp_path / "a"), "config", "-n", "inner")
    assert (got["namespace"], got["stateDir"]) == ("inner", str(tmp_path / "a"))


def test_environment_variables_set_the_shared_options(tmp_path: Path) -> None:
    env = {"AGENTRUN_STATE_DIR": str(tmp_path), "AGENTRUN_NAMESPACE": "from-env", "AGENTRUN_CONTEXT": "c1",
           "AGENTRUN_KUBECONFIG": str(tmp_path / "kc"), "AGENTRUN_API": "http://env:1", "AGENTRUN_TOKEN": "envtoken"}
    assert config("config", env=env) == {"stateDir": str(tmp_path), "namespace": "from-env",
                                         "kubeconfig": str(tmp_path / "kc"), "context": "c1", "api": "http://env:1",
                                         "token": "envt..."}
    # An option given wins over the variable.
    assert config("config", "-n", "given", env=env)["namespace"] == "given"
    # The API's earlier variable names still work.
    got = config("config", env={"AGENTRUN_API_URL": "http://old:2", "AGENTRUN_API_TOKEN": "oldtoken"})
    assert (got["api"], got["token"]) == ("http://old:2", "oldt...")


def test_a_commands_own_options_read_prefixed_variables(tmp_path: Path) -> None:
    # auto_envvar_prefix: AGENTRUN_<COMMAND>_<OPTION>.
    r = invoke("list", "--state-dir", str(tmp_path), env={"AGENTRUN_LIST_OUTPUT": "nonsense"})
    assert r.exit_code == 2 and "'nonsense' is not one of" in r.output


def test_the_stacks_endpoints_supply_kubeconfig_api_and_token(tmp_path: Path) -> None:
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "kubeconfig": str(tmp_path / "kubeconfig"), "api": "http://127.0.0.1:9/", "api_token": "stacktoken"}))
    got = config("config", "--state-dir", str(tmp_path))
    assert (got["kubeconfig"], got["api"], got["token"]) == (str(tmp_path / "kubeconfig"), "http://127.0.0.1:9",
                                                             "stac...")
    # Another API does not get the stack's token.
    got = config("config", "--state-dir", str(tmp_path), "--api", "http://elsewhere:1")
    assert (got["api"], got["token"]) == ("http://elsewhere:1", None)


def test_without_a_stack_commands_say_what_is_missing(tmp_path: Path) -> None:
    for args, message in ((["list"], "no cluster to talk to: no stack in"),
                          (["get", "x", "-o", "json"], "no cluster to talk to"),
                          (["approve", "x"], "no API to talk to: no stack in"),
                          (["run", "helper", "--task", "t"], "no API to talk to"),
                          (["delete", "x"], "no API to talk to"),
                          (["schedules", "list"], "no API to talk to")):
        r = invoke(*args, "--state-dir", str(tmp_path))
        assert r.exit_code == 1, (args, r.output)
        assert r.stderr.startswith("agentrun: ") and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert "Traceback" not in r.output


def test_an_api_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    for args in (["approve", "x"], ["run", "helper", "--task", "t"], ["delete", "x"], ["schedules", "list"],
                 ["schedules", "trigger", "s"]):
        r = invoke(*args, "--state-dir", str(tmp_path), "--api", down, "--token", "t")
        assert r.exit_code == 1, (args, r.output)
        assert f"cannot reach the API at {down}" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_kubeconfig_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text("not: a kubeconfig\n")
    r = invoke("list", "--kubeconfig", str(tmp_path / "kc"))
    assert r.exit_code == 1 and r.stderr.startswith(f"agentrun: cannot use the kubeconfig {tmp_path / 'kc'}")
    assert "Traceback" not in r.output


def test_a_kubernetes_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "kc").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    for args, action in ((["list"], "list AgentRuns in default"), (["get", "x"], "read AgentRun default/x"),
                         (["logs", "x", "-n", "ns"], "read AgentRun ns/x")):
        r = invoke(*args, "--kubeconfig", str(tmp_path / "kc"))
        assert r.exit_code == 1, r.output
        assert r.stderr == f"agentrun: {action}: cannot reach the Kubernetes API server at 127.0.0.1:{port} " \
                           "(Connection refused)\n", r.stderr


def test_main_returns_the_exit_code_and_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(tmp_path), "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agentrun: no cluster to talk to") and err.count("\n") == 1
    assert main(["get"]) == 2
    assert "usage: agentrun get [OPTIONS] NAME" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert main(["run", "helper", "--task", "t", "--env", "novalue"]) == 2
    assert "'novalue' is not KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shells_script(shell: str) -> None:
    r = invoke("completion", shell)
    assert r.exit_code == 0 and "_AGENTRUN_COMPLETE" in r.stdout


def test_completion_completes_commands_and_options() -> None:
    r = invoke(env={"_AGENTRUN_COMPLETE": "bash_complete", "COMP_WORDS": "agentrun ap", "COMP_CWORD": "1"})
    assert r.exit_code == 0 and set(r.stdout.split()) >= {"plain,apply", "plain,approve", "plain,api"}
    r = invoke(env={"_AGENTRUN_COMPLETE": "bash_complete", "COMP_WORDS": "agentrun list -o ", "COMP_CWORD": "3"})
    assert {"plain,table", "plain,wide", "plain,json", "plain,yaml"} <= set(r.stdout.split())
