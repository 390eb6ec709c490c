"""The reference agent container program: ``python -m agentrunner``.

It exists so the control plane has a real, small agent to run in the agent Job: it reads
the environment the workflow sets on the ``agent`` container (SPEC §3.5), asks a model
(an OpenAI-compatible endpoint, or the offline ``echo`` provider for demos and tests) and
reports through the result contract of SPEC §3.6 — one
``__SYMPOZIUM_RESULT__{json}__SYMPOZIUM_END__`` line on stdout plus
``/ipc/output/result.json``. It depends only on the standard library and httpx so the
image stays small; it deliberately does not import the control plane's packages.

Modules: ``config`` (the env contract), ``duration`` (Go durations for RUN_TIMEOUT),
``context`` (files under /workspace/context), ``providers`` (echo and OpenAI-compatible),
``result`` (the marker line and result.json), ``runner`` (one bounded run, start to exit).
"""

from __future__ import annotations

__all__ = ["RESULT_END", "RESULT_START"]

from agentrunner.result import RESULT_END, RESULT_START
