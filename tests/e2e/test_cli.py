"""The `agentrun` command line against the whole stack: `-o json|yaml` parse, `--state-dir` after the command,
`apply --wait` shows the approve command while a gate waits, `get -w` prints a row per change, `approve` is
recorded as the API token's identity, `run` and `delete` go through the API, `logs` prints the agent's output."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner

from cli.main import cli as cli_group
from cli.main import main as agentrun
from tests.e2e.conftest import API_TOKENS, QUIET_CRON, Stack, agent, agent_run, hook
from tests.e2e.test_gate_authority import authority_api, protected
from tests.waiting import wait_for

__all__ = ["authority_api", "protected"]  # fixtures: the API process and its webhooks registered for the namespace

ROOT = Path(__file__).resolve().parents[2]
ALICE = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")


@pytest.fixture
def state_dir(api_server: str, stack: Stack, tmp_path: Path) -> Path:
    """A state directory as `agentrun up` leaves it, pointing at the test stack and its API (alice's token)."""
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "api": api_server, "api_token": ALICE, "kubeconfig": str(stack.kube.kubeconfig),
        "temporal": stack.temporal.address}))
    return tmp_path


class Cli:
    """`agentrun ... --state-dir DIR -n NS` in-process: (exit code, stdout, stderr)."""

    def __init__(self, state_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.state_dir, self.namespace, self.capsys = state_dir, namespace, capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = agentrun([*args, "--state-dir", str(self.state_dir), "-n", self.namespace])
        out = self.capsys.readouterr()
        return code, out.out, out.err


@pytest.fixture
def cli(state_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(state_dir, namespace, capsys)


class Lines:
    """A subprocess's stdout lines as they come, read on a thread; waited for with deadlines."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env={**(env or os.environ), "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_line(self, predicate: Callable[[str], bool], *, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"no line with {what} in {timeout}s; got:\n" + "\n".join(self.lines))

    def wait_exit(self, *, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def columns(header: str, line: str) -> dict[str, str]:
    """A table row by its header's columns (a blank cell stays blank)."""
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return {n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}


@pytest.fixture
def spawn() -> Iterator[Callable[[list[str]], Lines]]:
    made: list[Lines] = []

    def start(args: list[str]) -> Lines:
        made.append(Lines(args))
        return made[-1]

    yield start
    for p in made:
        p.kill()


def test_apply_wait_then_list_get_and_logs_print_what_parses(cli: Cli, tmp_path: Path,
                                                             spawn: Callable[[list[str]], Lines]) -> None:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("plain", task="hello cli", cleanup="keep")]))
    code, out, err = cli("apply", "-f", str(manifest), "--wait", "--timeout", "120")
    assert code == 0, out + err
    assert "agent/helper created" in out and "agentrun/plain created" in out
    assert "agentrun/plain: Succeeded" in out and "result:\necho: hello cli" in out, out
    # list: a kind: List of the AgentRuns, as JSON and as YAML; a table by default.
    code, out, _ = cli("list", "-o", "json")
    listed = json.loads(out)
    assert code == 0 and listed["kind"] == "List" and [r["metadata"]["name"] for r in listed["items"]] == ["plain"]
    assert listed["items"][0]["status"]["phase"] == "Succeeded"
    as_yaml = yaml.safe_load(cli("list", "-o", "yaml")[1])
    # (The run's object may still change after Succeeded — finalizers, cleanup — so its identity is compared.)
    assert as_yaml["kind"] == "List" and [(r["metadata"]["uid"], r["status"]["phase"]) for r in as_yaml["items"]] == [
        (r["metadata"]["uid"], r["status"]["phase"]) for r in listed["items"]]
    code, out, _ = cli("list")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "AGENT", "PHASE", "GATE", "AGE"] and row.split()[:3] == [
        "plain", "helper", "Succeeded"]
    assert cli("list", "-o", "wide")[1].splitlines()[0].split()[5:] == ["MODEL", "ATTEMPT", "DECIDED", "BY",
                                                                        "TOKENS", "CACHED", "COST", "CREATED", "BY",
                                                                        "ERROR"]
    # The run names no model: it runs its Agent's, which the wide row shows.
    header, wide_row = cli("list", "-o", "wide")[1].splitlines()
    assert columns(header, wide_row)["MODEL"] == "echo-1"
    assert columns(header, wide_row)["COST"] == "$0", "echo is a local model: it costs nothing"
    # get: the object, as JSON or YAML (the default).
    code, out, _ = cli("get", "plain", "-o", "json")
    got = json.loads(out)
    assert code == 0 and got["kind"] == "AgentRun" and got["metadata"]["name"] == "plain"
    for args in (["get", "plain"], ["get", "plain", "-o", "yaml"]):
        as_yaml = yaml.safe_load(cli(*args)[1])
        assert (as_yaml["kind"], as_yaml["metadata"]["uid"], as_yaml["spec"]) == ("AgentRun", got["metadata"]["uid"],
                                                                                 got["spec"])
    # get -w of a run that has ended: its row, then the command returns (there is nothing left to wait for).
    watched = spawn(["get", "plain", "-w", "-n", cli.namespace, "--state-dir", str(cli.state_dir)])
    assert watched.wait_exit(timeout=30) == 0, watched.lines
    assert [line.split()[:3] for line in watched.lines] == [["NAME", "AGENT", "PHASE"], ["plain", "helper", "Succeeded"]]
    # logs: the agent's output, also when following a pod that has ended.
    for follow in ([], ["-f"]):
        code, out, err = cli("logs", "plain", *follow)
        assert code == 0 and "echo: hello cli" in out, (follow, out, err)
    # Shell completion offers the namespace's runs.
    words = f"agentrun --state-dir {cli.state_dir} -n {cli.namespace} logs pl"
    done = CliRunner().invoke(cli_group, env={"_AGENTRUN_COMPLETE": "bash_complete", "COMP_WORDS": words,
                                              "COMP_CWORD": str(len(words.split()) - 1)}, prog_name="agentrun")
    assert (done.exit_code, done.stdout) == (0, "plain,plain\n"), done.output
    # An unknown run is one line, not a traceback.
    for args in (["get", "ghost"], ["get", "ghost", "-w"], ["logs", "ghost"]):
        code, out, err = cli(*args)
        assert (code, out) == (1, "") and err == f'agentrun: agentrun/ghost: not found in namespace "{cli.namespace}"\n'
    code, _, err = cli("logs", "plain", "--hook", "nope")
    assert code == 1 and "has no hook 'nope'" in err
    # approve of a run that never had a gate says so (not only that it has ended).
    code, _, err = cli("approve", "plain")
    assert (code, err) == (1, "agentrun/plain: refused: the run has no gate (no postRun hook with gate: true)\n")


def test_get_watch_shows_the_phase_change_and_approve_is_recorded_as_the_tokens_identity(
        cli: Cli, stack: Stack, namespace: str, state_dir: Path, tmp_path: Path,
        spawn: Callable[[list[str]], Lines]) -> None:
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    manifest = tmp_path / "gated.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("waits", task="gated answer",
                                                                lifecycle={"postRun": [gate], "gateTimeout": "10m"})]))
    where = ["-n", namespace, "--state-dir", str(state_dir)]
    applied = spawn(["apply", "-f", str(manifest), "--wait", "--timeout", "120", *where])
    applied.wait_line(lambda line: line == "agentrun/waits created", timeout=30, what="the run created")
    watched = spawn(["get", "waits", "-w", *where])
    header = watched.wait_line(lambda line: line.startswith("NAME "), timeout=30, what="the header")
    assert header.split() == ["NAME", "AGENT", "PHASE", "GATE", "AGE"]

    def row(phase: str, gate: str) -> Callable[[str], bool]:
        return lambda line: (columns(header, line)["PHASE"], columns(header, line)["GATE"]) == (phase, gate)

    # apply --wait shows the exact command once the gate waits; the watch has a row for it by then.
    applied.wait_line(lambda line: f"`agentrun approve waits -n {namespace}`" in line, timeout=60,
                      what="the approve command")
    watched.wait_line(row("PostRunning", "pending"), timeout=30, what="the gate pending")
    code, out, err = cli("approve", "waits", "--reason", "looks right")
    assert (code, out) == (0, "agentrun/waits: gate approved by alice@example.com\n"), err
    watched.wait_line(row("Succeeded", "approved"), timeout=60, what="the run approved")
    assert watched.wait_exit(timeout=30) == 0, "the watch ends with the run"
    rows = [columns(header, line) for line in watched.lines[1:]]
    assert all(r["NAME"] == "waits" and r["AGENT"] == "helper" for r in rows), watched.lines
    phases = [r["PHASE"] for r in rows]
    assert len(set(phases)) >= 2 and phases[-1] == "Succeeded", watched.lines
    assert applied.wait_exit(timeout=60) == 0, applied.lines
    assert "agentrun/waits: Succeeded (gate approved)" in applied.lines and "echo: gated answer" in applied.lines
    st = (stack.get_run(namespace, "waits") or {})["status"]
    assert (st["gate"]["decidedBy"], st["gate"]["reason"]) == ("alice@example.com", "looks right")
    # A second verdict is refused by the API, with its detail.
    code, _, err = cli("approve", "waits")
    assert code == 1 and err.startswith("agentrun/waits: refused: ") and err.count("\n") == 1, err


def test_run_and_delete_go_through_the_api(cli: Cli, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    task = "sleep:2 from the cli"
    code, out, err = cli("run", "helper", "--task", task, "--env", "GREETING=hi", "--model", "echo-2")
    assert code == 0, err
    name = out.removeprefix("agentrun/").removesuffix(" created\n")
    assert name.startswith("helper-") and out == f"agentrun/{name} created\n"
    # logs -f waits for the agent's pod and follows its log to the end.
    code, out, err = cli("logs", name, "-f")
    assert code == 0 and "echo: from the cli" in out, (out, err)
    run = stack.wait_phase(namespace, name, timeout=60)
    assert run["metadata"]["annotations"]["agentrun.dev/created-by"] == "alice@example.com"
    assert (run["spec"]["task"], run["spec"]["env"], run["spec"]["model"]["model"]) == (
        task, {"GREETING": "hi"}, "echo-2")
    assert run["status"]["phase"] == "Succeeded"
    assert cli("delete", name) == (0, f"agentrun/{name} deleted\n", "")
    wait_for(lambda: stack.get_run(namespace, name) is None, timeout=30, what="the run deleted")
    # The API's refusals, with its detail: unknown run or agent, a bad token.
    code, _, err = cli("delete", name)
    assert code == 1 and err == f'agentrun/{name}: refused: run "{name}" not found in namespace "{namespace}"\n'
    code, _, err = cli("run", "nobody", "--task", "t")
    assert code == 1 and 'agent "nobody" not found' in err and err.count("\n") == 1
    code, _, err = cli("delete", name, "--token", "wrong-token")
    assert code == 1 and err.startswith(f"agentrun/{name}: refused: ") and err.count("\n") == 1, err


def test_apply_applies_edits_refuses_unknown_fields_prints_warnings_and_goes_on_after_a_bad_document(
        cli: Cli, stack: Stack, protected: str, tmp_path: Path) -> None:
    """`apply` is kubectl's: an edit of an Agent, a policy or a schedule is applied (server-side apply), a misspelt
    field is refused naming it, the admission webhook's warnings are printed as kubectl prints them, a bad document
    is one line and the documents after it are applied, and an existing run is left as it is, saying so."""
    ns = protected

    def write(*docs: dict[str, Any]) -> str:
        path = tmp_path / f"f{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        return str(path)

    helper: dict[str, Any] = {**agent(), "spec": {**agent()["spec"], "systemPrompt": "Be brief."}}
    team: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "team"},
            "spec": {"subagentPolicy": {"maxDepth": 2}}}
    nightly: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumSchedule", "metadata": {"name": "nightly"},
               "spec": {"agentRef": "helper", "schedule": QUIET_CRON, "task": "report", "firstTick": "afterInterval"}}
    kinds = ["agent/helper", "sympoziumpolicy/team", "sympoziumschedule/nightly"]
    code, out, err = cli("apply", "-f", write(helper, team, nightly))
    assert (code, out.splitlines()) == (0, [f"{k} created" for k in kinds]), err
    # Edited: each change reaches the cluster.
    helper["spec"]["systemPrompt"] = "Be thorough."
    team["spec"]["subagentPolicy"]["maxDepth"] = 3
    nightly["spec"]["task"] = "report, with costs"
    edited = write(helper, team, nightly)
    code, out, err = cli("apply", "-f", edited)
    assert (code, out.splitlines()) == (0, [f"{k} configured" for k in kinds]), err

    def stored(plural: str, name: str) -> dict[str, Any]:
        obj: Any = stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, plural, name)
        return dict(obj["spec"])

    assert stored("agents", "helper")["systemPrompt"] == "Be thorough."
    assert stored("sympoziumpolicies", "team")["subagentPolicy"]["maxDepth"] == 3
    assert stored("sympoziumschedules", "nightly")["task"] == "report, with costs"
    code, out, err = cli("apply", "-f", edited)
    assert (code, out.splitlines()) == (0, [f"{k} unchanged" for k in kinds]), err
    # A misspelt field is refused, naming it: one line, nothing created.
    misspelt = agent_run("typo")
    misspelt["spec"]["taks"] = misspelt["spec"].pop("task")
    code, out, err = cli("apply", "-f", write(misspelt))
    assert (code, out) == (1, "") and err.count("\n") == 1 and 'unknown field "spec.taks"' in err, err
    assert stack.get_run(ns, "typo") is None
    # The webhook's warnings, as kubectl prints them.
    warned = agent_run("dry", dryRun=True)
    code, out, err = cli("apply", "-f", write(warned))
    assert (code, out) == (0, "agentrun/dry created\n"), err
    assert [line for line in err.splitlines() if line.startswith("Warning: spec.dryRun: has no effect here")], err
    # A document without apiVersion and one of a kind the cluster does not serve: a line each, then the next one.
    nameless = {"kind": "Agent", "metadata": {"name": "x"}}
    unknown = {**agent("y"), "kind": "Agnet"}
    bad = write(nameless, unknown, agent("second"))
    code, out, err = cli("apply", "-f", bad)
    assert (code, out) == (1, "agent/second created\n"), err
    assert err.splitlines() == [
        f"{bad} (document 1): no apiVersion (every object needs apiVersion and kind, e.g. apiVersion: "
        "sympozium.ai/v1alpha1)",
        f'{bad} (document 2): the cluster serves no kind "Agnet" in sympozium.ai/v1alpha1 (it serves: Agent, '
        "AgentRun, Ensemble, Model, PersonaPack, SkillPack, SympoziumInstance, SympoziumPolicy, SympoziumSchedule)"]
    # An existing run does not stop the documents after it: unchanged when the file asks for what it has ...
    code, out, err = cli("apply", "-f", write(warned, agent("third")))
    assert (code, out) == (0, "agentrun/dry unchanged\nagent/third created\n"), err
    # ... and refused, saying why, when the file would change it.
    changed = agent_run("dry", task="another task", dryRun=True)
    again = write(changed, agent("fourth"))
    code, out, err = cli("apply", "-f", again)
    assert (code, out) == (1, "agent/fourth created\n"), err
    assert err.startswith(f"{again} (document 1): agentrun/dry: exists with another spec.task: a run executes once")
    assert err.count("\n") == 1 and (stack.get_run(ns, "dry") or {})["spec"]["task"] == "hello"
    # agentrun agents lists them, with their model and provider.
    code, out, err = cli("agents")
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["NAME", "MODEL", "PROVIDER", "POLICY", "AGE"], out + err
    assert sorted(r.split()[:3] for r in rows) == [[n, "echo-1", "echo"] for n in ("fourth", "helper", "second",
                                                                                    "third")]


def test_logs_of_the_agent_and_each_hook_stay_readable_after_the_cleanup_deleted_the_pods(
        cli: Cli, stack: Stack, namespace: str, api_server: str, tmp_path: Path) -> None:
    """The cleanup keeps the tail of each container's log in the run's ConfigMap before it deletes the Jobs: `agentrun
    logs` and the API (the console's logs) read it once the pods are gone, for as long as the run exists."""
    lifecycle = {"preRun": [hook("fetch", "echo 'fetched the context'")],
                 "postRun": [hook("report", "echo \"reported: $AGENT_EXIT_CODE\"")]}
    manifest = tmp_path / "kept.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("kept", task="keep my logs", lifecycle=lifecycle)]))
    code, out, err = cli("apply", "-f", str(manifest), "--wait", "--timeout", "120")
    assert code == 0 and "agentrun/kept: Succeeded" in out, out + err
    stack.wait_gone(namespace, "kept", kinds=("jobs", "pods"))
    expected = {None: "echo: keep my logs", "fetch": "fetched the context\n", "report": "reported: 0\n"}
    for hook_name, text in expected.items():
        code, out, err = cli("logs", "kept", *(["--hook", hook_name] if hook_name else []))
        assert code == 0 and text in out, (hook_name, out, err)
        with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as api:
            got = api.get("/api/v1/runs/kept/logs", params={"namespace": namespace, **({"hook": hook_name} if hook_name
                                                                                        else {})})
        assert got.status_code == 200 and text in got.text, (hook_name, got.text)
    # Owned by the run: it goes with it.
    run = stack.get_run(namespace, "kept") or {}
    kept = stack.core.read_namespaced_config_map("kept-logs", namespace)
    assert [o.uid for o in kept.metadata.owner_references] == [run["metadata"]["uid"]]
    assert cli("delete", "kept")[0] == 0
    wait_for(lambda: not [c for c in stack.core.list_namespaced_config_map(namespace).items
                          if c.metadata.name == "kept-logs"], timeout=30, what="the kept logs to go with the run")


def test_the_log_of_a_gate_hook_stopped_by_its_own_verdict_is_kept(cli: Cli, stack: Stack, namespace: str,
                                                                      tmp_path: Path) -> None:
    """A gate hook that gives the verdict itself and goes on running is stopped (its pod deleted) as soon as the
    verdict counts: its log is kept then, before the cleanup."""
    rbac = [{"apiGroups": ["sympozium.ai"], "resources": ["agentruns"], "verbs": ["get", "patch"]}]
    script = ("echo 'scanned: clean'; kubectl annotate agentrun \"$AGENT_RUN_ID\" --overwrite "
              "'sympozium.ai/gate-verdict={\"action\":\"approve\",\"reason\":\"clean\"}'; sleep 60")
    lifecycle = {"rbac": rbac, "gateTimeout": "5m", "postRun": [hook("scan", script, gate=True)]}
    manifest = tmp_path / "self-gated.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("self-gated", lifecycle=lifecycle)]))
    code, out, err = cli("apply", "-f", str(manifest), "--wait", "--timeout", "120")
    assert code == 0 and "agentrun/self-gated: Succeeded (gate approved)" in out, out + err
    stack.wait_gone(namespace, "self-gated", kinds=("jobs", "pods"))
    code, out, err = cli("logs", "self-gated", "--hook", "scan")
    assert code == 0 and "scanned: clean" in out, (out, err)
    code, out, err = cli("logs", "self-gated")
    assert code == 0 and "echo: hello" in out, (out, err)
