"""The reference agent container program: ``python -m agentrunner``.

It reads the environment the workflow sets on the ``agent`` container (SPEC §3.5, §9; the contract is
``agentrunner/config.py``), runs the tool loop against a model (``providers/``: OpenAI, Azure OpenAI, Anthropic,
OpenAI-compatible servers, Bedrock as an extra, or the offline ``echo``), with Sympozium's built-in tools
(``tools/``), SkillPack sidecar and MCP tools, the tool policy (``policy.py``), phase hooks (``hooks.py``) and a
crash-safe journal (``journal.py``), and reports through the result contract of SPEC §3.6 — one
``__SYMPOZIUM_RESULT__{json}__SYMPOZIUM_END__`` line on stdout plus ``/ipc/output/result.json``. Commands run in
another container through the executor (``executor.py``), never here. It does not import the control plane's
packages; model libraries are imported only by runs that use them.

Modules: ``config`` (the env contract), ``duration``, ``context`` (files under /workspace/context), ``skills``,
``loop`` (the phases), ``hooks``, ``policy``, ``journal``, ``executor``, ``tools``, ``providers``, ``result``,
``runner`` (one bounded run, start to exit).
"""

from __future__ import annotations

__all__ = ["RESULT_END", "RESULT_START"]

from agentrunner.result import RESULT_END, RESULT_START
