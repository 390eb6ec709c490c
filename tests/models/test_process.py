"""models/process.py: entry points exit with their own code, output flushed, without finalization."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = f"from models.process import run_main\n{body}\n"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("body", "rc", "stdout", "stderr"), [
    ("run_main(lambda: 3)", 3, "", ""),
    ("run_main(lambda: None)", 0, "", ""),
    # piped stdout is block-buffered: what a main printed must still arrive
    ("def m():\n    print('written', end='')\n    return 0\nrun_main(m)", 0, "written", ""),
    ("def m():\n    raise SystemExit('agentrun: a clear stop')\nrun_main(m)", 1, "", "agentrun: a clear stop\n"),
    ("def m():\n    raise SystemExit(4)\nrun_main(m)", 4, "", ""),
    ("def m():\n    raise KeyboardInterrupt\nrun_main(m)", 130, "", ""),
])
def test_exit_code_and_output(body: str, rc: int, stdout: str, stderr: str) -> None:
    out = _run(body)
    assert (out.returncode, out.stdout, out.stderr) == (rc, stdout, stderr)


def test_an_unexpected_error_prints_its_traceback_and_exits_1() -> None:
    out = _run("def m():\n    raise LookupError('no such thing')\nrun_main(m)")
    assert out.returncode == 1
    assert "Traceback" in out.stderr and "LookupError: no such thing" in out.stderr


def test_logging_is_flushed_before_leaving() -> None:
    out = _run("import logging, sys\nlogging.basicConfig(stream=sys.stdout, format='%(message)s')\n"
               "def m():\n    logging.getLogger('x').warning('logged')\n    return 2\nrun_main(m)")
    assert (out.returncode, out.stdout) == (2, "logged\n")
