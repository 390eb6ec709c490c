"""A SkillPack sidecar's declared ``tools[]`` (SkillPack ``spec.sidecar.tools``), offered to the model as tools of
their own and run in that sidecar through the executor (agentrunner/executor.py).

The control plane passes them as ``AGENT_SIDECAR_TOOLS`` (JSON) or, as Sympozium's runner reads them, in the file
``SIDECAR_TOOLS_MANIFEST_PATH``; both hold Sympozium's manifest::

    {"tools": [{"name": "k8s_get", "description": "...", "target": "<pack>", "exec": ["kubectl", "get"],
                "subcommand": "", "inputMode": "args" | "stdin", "positionalArgs": ["resource"],
                "parameters": {<JSON schema>}}]}

A call becomes an argv (``exec`` + ``subcommand`` + ``--`` + the positional arguments' values), never a shell
line, so no argument value can inject shell syntax; in ``stdin`` mode the other arguments go to the command's
stdin as one JSON object. ``exec`` and ``target`` come from the admission-checked SkillPack, never from the model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrunner.config import ConfigError
from agentrunner.tools import Tool, ToolError
from agentrunner.tools.shell import MAX_TIMEOUT_SECONDS, Executor, argv_script, format_outcome, normalize

log = logging.getLogger(__name__)


def manifest_from_env(env: Mapping[str, str]) -> list[dict[str, Any]]:
    text = (env.get("AGENT_SIDECAR_TOOLS") or "").strip()
    source = "AGENT_SIDECAR_TOOLS"
    if not text and (env.get("SIDECAR_TOOLS_MANIFEST_PATH") or "").strip():
        source = "SIDECAR_TOOLS_MANIFEST_PATH"
        try:
            text = Path(env["SIDECAR_TOOLS_MANIFEST_PATH"]).read_text()
        except OSError as exc:
            log.warning("sidecar tools: %s %s cannot be read (%s): no sidecar tools this run", source,
                        env["SIDECAR_TOOLS_MANIFEST_PATH"], exc.strerror)
            return []
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source} is not JSON: {exc}") from None
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ConfigError(f"{source} must be {{\"tools\": [ ... ]}}")
    for i, t in enumerate(tools):
        if not isinstance(t.get("name"), str) or not isinstance(t.get("exec"), list) or not t["exec"] \
                or not all(isinstance(a, str) for a in t["exec"]) or not isinstance(t.get("target"), str):
            raise ConfigError(f"{source} tools[{i}] needs a name, a target and a non-empty exec list")
    return tools


def _positional(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value)


def build_argv(entry: dict[str, Any], args: dict[str, Any]) -> tuple[list[str], str | None]:
    argv = list(entry["exec"])
    if entry.get("subcommand"):
        argv.append(entry["subcommand"])
    rest = dict(args)
    positional = entry.get("positionalArgs") or []
    if positional:
        argv.append("--")
    for key in positional:
        if key in rest:
            argv.append(_positional(rest.pop(key)))
    stdin = json.dumps(rest) if entry.get("inputMode") == "stdin" else None
    return argv, stdin


def sidecar_tools(entries: list[dict[str, Any]], executor: Executor, taken: set[str]) -> list[Tool]:
    tools = []
    for entry in entries:
        name = entry["name"]
        if name in taken:
            log.warning("sidecar tools: %s is skipped: the name is taken by another tool", name)
            continue
        target = normalize(entry["target"])
        if target not in executor.targets:
            log.warning("sidecar tools: %s is skipped: its target %r is not among EXEC_TARGETS", name, target)
            continue
        taken.add(name)

        async def run(args: dict[str, Any], entry: dict[str, Any] = entry, target: str = target) -> str:
            argv, stdin = build_argv(entry, args)
            outcome = await executor.run(target, argv_script(argv), seconds=MAX_TIMEOUT_SECONDS, stdin=stdin)
            return format_outcome(outcome, MAX_TIMEOUT_SECONDS)

        params = entry.get("parameters") or {"type": "object", "properties": {}}
        tools.append(Tool(name, str(entry.get("description") or name), params, run, kind="sidecar",
                          extra={"target": target}))
    return tools


__all__ = ["ToolError", "build_argv", "manifest_from_env", "sidecar_tools"]
