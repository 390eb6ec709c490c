"""`bench.runs --json`, `bench.gate --json`, `bench.replay --json`, `bench.agent --json` and `bench.approvals --json` end with one JSON object whose keys
bench/README.md documents.

At a tiny load: this checks the scripts and their contract, not the figures (the benches assert nothing)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = {  # the keys issue 10 compares run to run
    "runs": {"runs_per_s", "floor_runs_per_s", "ceiling_wf_per_s", "k8s_requests_per_run", "activities_per_run",
             "parked_requests_per_min_per_run"},
    "gate": {"verdict_p50_s", "verdict_p99_s", "approve_all_runs_per_s", "park_runs_per_s", "parked",
             "worker_rss_mb_parked"},
}
TINY = {
    "runs": ["--runs", "2", "--parked", "1", "--park-seconds", "2", "--concurrency", "2"],
    "gate": ["--runs", "2", "--parked", "2", "--park-seconds", "2", "--concurrency", "2", "--park-window", "2",
             "--approve-concurrency", "2"],
}


def _documented(script: str) -> set[str]:
    text = (ROOT / "bench" / "README.md").read_text()
    section = text.split(f"### `bench.{script}`", 1)[1].split("###", 1)[0]
    return {k for row in section.splitlines() if row.startswith("| `")
            for k in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])}


@pytest.mark.parametrize("script", ["runs", "gate"])
def test_the_last_line_is_the_documented_figures(script: str) -> None:
    out = subprocess.run([sys.executable, "-m", f"bench.{script}", *TINY[script], "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) > 5, out.stdout  # the human-readable figures stay
    figures = json.loads(lines[-1])
    assert REQUIRED[script] <= set(figures), REQUIRED[script] - set(figures)
    assert set(figures) == _documented(script)
    assert all(v is None or isinstance(v, int | float) for v in figures.values()), figures
    assert figures["runs_per_s" if script == "runs" else "approve_all_runs_per_s"] > 0


def test_the_replay_bench_ends_with_its_documented_figures_and_names_a_missing_history() -> None:
    out = subprocess.run([sys.executable, "-m", "bench.replay", "--replays", "2", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 5, out.stdout  # the history, a line per runner, the figures
    figures = json.loads(lines[-1])
    assert set(figures) == _documented("replay")
    assert all(figures[f"{runner}_cpu_ms_per_replay"] > 0 for runner in ("default", "passthrough", "worker"))
    bad = subprocess.run([sys.executable, "-m", "bench.replay", "--history", "nope"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no recorded history 'nope'; known: " in bad.stderr, bad.stderr
    assert "v3-gate-approved-then-hooks" in bad.stderr


def test_the_agent_bench_ends_with_its_documented_figures() -> None:
    out = subprocess.run([sys.executable, "-m", "bench.agent", "--starts", "1", "--rounds", "3", "--execs", "5",
                          "--cluster-rounds", "2", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(figures) == _documented("agent")
    assert all(figures[k] > 0 for k in ("agent_cold_start_s", "agent_cold_start_anthropic_s", "round_overhead_ms_p50",
                                        "journal_bytes_per_round", "exec_roundtrip_ms_p50", "file_tool_ms_p50"))
    assert figures["run20_overhead_s"] > 0, "a run of 2 rounds on the stack"


def test_the_approvals_bench_ends_with_its_documented_figures() -> None:
    out = subprocess.run([sys.executable, "-m", "bench.approvals", "--runs", "2", "--concurrency", "2", "--parked", "2",
                          "--park-window", "2", "--park-seconds", "2", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(figures) == _documented("approvals")
    assert figures["tool_resume_runs_ok"] == 2 and figures["tool_resume_s_p50"] > 0, figures  # the command ran
    assert figures["history_bytes_per_approval"] > 0 and figures["tool_parked"] == 2, figures
    assert figures["tool_parked_pods"] == 0, figures  # listed while they wait
