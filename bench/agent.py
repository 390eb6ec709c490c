"""The agent program's own costs (agentrunner/), against the scripted fake model (tests/fake_model.py), which
answers at once: what the runner adds to a run, apart from the model and the cluster.

- cold start: ``python -m agentrunner`` started as a process until the model receives its first request, p50 of
  ``--starts`` (OpenAI and Anthropic providers; bytecode as the installed packages have it);
- round overhead: a ``--rounds`` run, one tool call (``list_directory``) per round, in this process through the
  real provider (the OpenAI SDK via pydantic-ai) with the journal on: each round's time minus the model call's and
  the tool's, p50;
- exec round trip: ``execute_command`` of ``true`` through the executor (dash, another process), p50 of
  ``--execs``;
- file tools: write_file, read_file and edit_file of a small file under a workspace, p50 of each call;
- journal bytes per round: what the journal grows by per round of that run (flat: no copy of the history).

- a run on the cluster (``run20_overhead_s``): the whole control plane (bench/runs.py's stack: the Temporal dev
  server, localkube, the worker and the bridge as processes) runs one AgentRun of ``--cluster-rounds`` (20) model
  rounds, each one ``execute_command true`` in the run's tools container, then an answer, with the model key from a
  Secret and the journal on its PVC; create → ``Succeeded`` seen, minus the model's time (the scripted model's
  ``delay`` per answer: none, it answers at once). ``--cluster-rounds 0`` skips it (the figure is ``null``).

Usage: python -m bench.agent [--starts 5] [--rounds 20] [--execs 50] [--cluster-rounds 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentrunner.config import load_config
from agentrunner.executor import SCRIPT
from agentrunner.journal import Journal
from agentrunner.loop import Loop, default_hooks
from agentrunner.policy import ToolPolicy
from agentrunner.providers import Conversation, Prompt, make_provider
from agentrunner.tools.files import Roots, edit_file, file_tools, read_file, write_file
from agentrunner.tools.shell import Executor
from bench.runs import print_figures
from tests.fake_model import Call, FakeModelServer, Turn, serve_model

ROOT = Path(__file__).resolve().parent.parent


def load() -> float:
    return os.getloadavg()[0]


def p50(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cold_starts(model: FakeModelServer, provider: str, n: int, tmp: Path) -> list[float]:
    base = model.root_url if provider == "anthropic" else model.base_url
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "TASK": "hello", "MODEL_PROVIDER": provider,
           "MODEL_NAME": "bench", "MODEL_BASE_URL": base, "OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k",
           "AGENT_IPC_DIR": str(tmp / "ipc"), "WORKSPACE_DIR": str(tmp), "SKILLS_DIR": str(tmp / "none")}
    model.script = [Turn(text="hi")]
    out = []
    for _ in range(n):
        before = len(model.requests)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "agentrunner"], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False)
        if proc.returncode != 0 or len(model.requests) <= before:
            print(f"cold start ({provider}) failed: {proc.stderr[-1000:]}", file=sys.stderr)
            continue
        out.append(model.requests[before].at - t0)
    return out


def rounds_run(model: FakeModelServer, rounds: int, tmp: Path, otlp_endpoint: str = "") -> tuple[list[float], float]:
    """(our own seconds per round, journal bytes per round) of a `rounds`-round run in this process; with
    `otlp_endpoint`, its GenAI spans exported there (agentrunner/tracing.py), as a traced agent's."""
    from agentrunner import tracing

    spans = tracing.start({"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
                           "TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
                          if otlp_endpoint else {})
    model.script = [Turn(calls=[Call("list_directory", {"path": "."})]) for _ in range(rounds - 1)]
    model.script.append(Turn(text="done"))
    model.served = 0
    config = load_config({"TASK": "bench", "MODEL_PROVIDER": "openai", "MODEL_NAME": "bench",
                          "MODEL_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"})
    workspace = tmp / "rounds"
    workspace.mkdir()
    policy = ToolPolicy()
    loop = Loop(model=make_provider(config, 30), tools=file_tools(Roots(workspace, tmp / "none")), policy=policy,
                hooks=default_hooks(policy), journal=Journal(tmp / "state"),
                conversation=Conversation(Prompt("bench", "bench", [])), max_rounds=rounds + 1, run_timeout=600,
                run_timeout_text="600s", spans=spans, provider="openai", model_name="bench")
    result = asyncio.run(loop.run())
    loop.close(result)
    spans.close()
    assert result.status == "success", result.error
    journal = (tmp / "state" / "journal.jsonl").stat().st_size
    return loop.round_overhead, journal / rounds


def exec_roundtrips(n: int, tmp: Path) -> list[float]:
    exec_dir = tmp / "exec"
    proc = subprocess.Popen(["dash", "-c", SCRIPT, "agentrun-exec", str(exec_dir / "tools")],
                            env={"PATH": os.environ.get("PATH", "")}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    client = Executor(exec_dir, ("tools",), "tools", 30)

    async def run_all() -> list[float]:
        out = []
        for _ in range(n + 1):
            t0 = time.monotonic()
            outcome = await client.run("tools", "true\n", seconds=10, cwd=str(tmp))
            assert outcome.exit_code == 0
            out.append(time.monotonic() - t0)
        return out[1:]  # the first waits for the executor to come up

    try:
        return asyncio.run(run_all())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def file_ops(n: int, tmp: Path) -> list[float]:
    ws = tmp / "files"
    ws.mkdir()
    roots = Roots(ws, tmp / "none")
    out = []

    async def run_all() -> None:
        for i in range(n):
            for fn, args in ((write_file, {"path": "d/f.txt", "content": f"line {i}\nsecond\n"}),
                             (read_file, {"path": "d/f.txt"}),
                             (edit_file, {"path": "d/f.txt", "edits": [{"old_string": "second", "new_string": "2"}]})):
                t0 = time.perf_counter()
                await fn(args, roots)
                out.append(time.perf_counter() - t0)

    asyncio.run(run_all())
    return out


def cluster_run(model: FakeModelServer, rounds: int, tmp: Path) -> tuple[float, float, dict[str, float]]:
    """One run of `rounds` tool rounds and an answer on the whole stack: (create → Succeeded seen, the model's time,
    the phases: create → the model's first request, first → last request, last request → Succeeded seen)."""
    from kubernetes import client

    from bench.runs import GROUP, NS, VERSION, Stack

    model.script = [*(Turn(calls=[Call("execute_command", {"command": "true"})]) for _ in range(rounds)),
                    Turn(text="done")]
    model.served = 0
    model.requests.clear()
    stack = Stack(tmp / "stack", concurrency=2, max_pods=4, kube_qps=50)
    (tmp / "stack").mkdir()
    try:
        stack.start()
        core: Any = client.CoreV1Api(stack.api)
        custom: Any = client.CustomObjectsApi(stack.api)
        core.create_namespaced_secret(NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bench-key"},
                                           "stringData": {"OPENAI_API_KEY": "sk-bench"}})
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agents", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Agent", "metadata": {"name": "scripted"},
            "spec": {"authRefs": [{"provider": "openai", "secret": "bench-key"}],
                     "agents": {"default": {"model": "bench", "baseURL": model.base_url}}}})
        t0 = time.perf_counter()
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentRun", "metadata": {"name": "run20"},
            "spec": {"agentRef": "scripted", "task": f"{rounds} rounds", "timeout": "10m"}})
        deadline = t0 + 600
        first = last = 0.0
        while True:
            status = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", "run20").get("status") or {}
            now = time.perf_counter()
            if model.requests and not first:
                first = now  # (to the 20 ms of this loop)
            if len(model.requests) > rounds and not last:
                last = now
            if status.get("phase") in ("Succeeded", "Failed"):
                break
            if now > deadline:
                raise SystemExit(f"the cluster run did not end within 600s; logs in {stack.state}")
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        if status.get("phase") != "Succeeded":
            raise SystemExit(f"the cluster run failed: {status.get('error')}")
        last = last or time.perf_counter()
        phases = {"to_first_request": first - t0, "rounds": last - first, "to_succeeded": t0 + elapsed - last}
        return elapsed, model.delay * len(model.requests), phases
    finally:
        stack.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--starts", type=int, default=5, help="cold starts per provider")
    p.add_argument("--rounds", type=int, default=20, help="rounds of the in-process run")
    p.add_argument("--execs", type=int, default=50, help="execute_command round trips")
    p.add_argument("--cluster-rounds", type=int, default=20, help="tool rounds of the run on the cluster (0: none)")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    p.add_argument("--otlp-endpoint", default="", help="the in-process run exports its spans there (tracing on)")
    args = p.parse_args()
    figures: dict[str, float | None] = {"load_avg_1m_start": load(), "starts": args.starts, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as d, serve_model() as model:
        tmp = Path(d)
        openai = cold_starts(model, "openai", args.starts, tmp)
        anthropic = cold_starts(model, "anthropic", args.starts, tmp)
        figures["agent_cold_start_s"] = p50(openai)
        figures["agent_cold_start_anthropic_s"] = p50(anthropic)
        print(f"cold start to the first model request: openai p50 {figures['agent_cold_start_s']} s "
              f"({[round(x, 3) for x in openai]}), anthropic p50 {figures['agent_cold_start_anthropic_s']} s")
        overhead, journal_per_round = rounds_run(model, args.rounds, tmp, args.otlp_endpoint)
        figures["round_overhead_ms_p50"] = (p50(overhead) or 0) * 1000
        figures["round_overhead_ms_max"] = max(overhead) * 1000 if overhead else None
        figures["journal_bytes_per_round"] = journal_per_round
        print(f"{args.rounds} rounds: the runner's own time per round p50 {figures['round_overhead_ms_p50']:.2f} ms, "
              f"journal {journal_per_round:.0f} bytes per round")
        execs = exec_roundtrips(args.execs, tmp)
        figures["exec_roundtrip_ms_p50"] = (p50(execs) or 0) * 1000
        print(f"execute_command `true` through the executor: p50 {figures['exec_roundtrip_ms_p50']:.1f} ms")
        files = file_ops(max(args.execs, 10), tmp)
        figures["file_tool_ms_p50"] = (p50(files) or 0) * 1000
        print(f"file tools (write, read, edit): p50 {figures['file_tool_ms_p50']:.2f} ms")
        figures["run20_overhead_s"] = figures["run20_first_request_s"] = None
        figures["run20_rounds_s"] = figures["run20_finish_s"] = None
        if args.cluster_rounds:
            elapsed, model_time, phases = cluster_run(model, args.cluster_rounds, tmp)
            spent = figures["run20_overhead_s"] = elapsed - model_time
            figures["run20_first_request_s"] = phases["to_first_request"]
            figures["run20_rounds_s"] = phases["rounds"]
            figures["run20_finish_s"] = phases["to_succeeded"]
            print(f"a {args.cluster_rounds}-round run on the cluster (one execute_command per round): create → "
                  f"Succeeded {elapsed:.2f} s, the model's time {model_time:.2f} s, overhead {spent:.2f} s: "
                  f"{phases['to_first_request']:.2f} s to the model's first request (the control plane's start, the "
                  f"pod's, the agent's cold start), {phases['rounds']:.2f} s of rounds "
                  f"({phases['rounds'] / max(args.cluster_rounds, 1) * 1000:.0f} ms each), "
                  f"{phases['to_succeeded']:.2f} s from the last answer to Succeeded")
    figures["load_avg_1m_end"] = load()
    print(f"load average (1 min): {figures['load_avg_1m_start']:.2f} at the start, {figures['load_avg_1m_end']:.2f} "
          "at the end")
    if args.json:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
