"""Tools of MCP servers (the Agent's ``mcpServers[]``), over streamable HTTP with the ``mcp`` package.

The control plane passes the servers as ``AGENT_MCP_SERVERS``, a JSON list of the Agent's entries::

    [{"name": "k8s", "url": "http://mcp.tools.svc:8080/mcp", "toolsPrefix": "k8s", "timeout": 30,
      "headers": {"X-Team": "sre"}, "toolsAllow": ["get_pods"], "toolsDeny": ["delete_pod"],
      "authEnv": "MCP_AUTH_K8S"}]

and maps each server's ``authSecret``/``authKey`` Secret value by ``secretKeyRef`` into the env variable
``authEnv`` names (default ``MCP_AUTH_<NAME>``, the name upper-cased with ``-``/``.`` as ``_``), sent as
``Authorization: Bearer <value>``. A tool ``t`` is offered as ``<toolsPrefix>_t``; ``toolsAllow`` (when set) keeps
only the tools it names, ``toolsDeny`` removes tools. A server that cannot be reached is a warning in the log and
its tools are simply not offered: the run goes on without them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from agentrunner.config import ConfigError
from agentrunner.tools import Tool, ToolError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30


@dataclass
class MCPServer:
    name: str
    url: str
    prefix: str
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    headers: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    auth_env: str = ""


def auth_env_of(name: str) -> str:
    return "MCP_AUTH_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def servers_from_env(env: Mapping[str, str]) -> list[MCPServer]:
    text = (env.get("AGENT_MCP_SERVERS") or "").strip()
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"AGENT_MCP_SERVERS is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError("AGENT_MCP_SERVERS must be a JSON list of servers")
    out = []
    for i, s in enumerate(data):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not isinstance(s.get("url"), str):
            raise ConfigError(f"AGENT_MCP_SERVERS[{i}] needs a name and a url")
        prefix = s.get("toolsPrefix") or s["name"]
        headers = s.get("headers") or {}
        if not isinstance(headers, dict):
            raise ConfigError(f"AGENT_MCP_SERVERS[{i}].headers must be an object")
        out.append(MCPServer(s["name"], s["url"], str(prefix), float(s.get("timeout") or DEFAULT_TIMEOUT_SECONDS),
                             {str(k): str(v) for k, v in headers.items()}, tuple(s.get("toolsAllow") or ()),
                             tuple(s.get("toolsDeny") or ()), str(s.get("authEnv") or auth_env_of(s["name"]))))
    return out


def _result_text(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else json.dumps(block.model_dump(mode="json", by_alias=True)))
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content))
    text = "\n".join(parts) or "(no content)"
    if getattr(result, "is_error", False):
        raise ToolError(text)
    return text


async def connect(servers: list[MCPServer], env: Mapping[str, str], stack: AsyncExitStack,
                  taken: set[str]) -> list[Tool]:
    """Connect each server (bounded by its timeout) and return its tools; a failed server is logged and skipped."""
    tools: list[Tool] = []
    for server in servers:
        try:
            # In this task, not another (asyncio.wait_for would make one): the MCP client's task group must be
            # entered and left in the same task.
            async with asyncio.timeout(server.timeout):
                found = await _connect_one(server, env, stack)
        except Exception as exc:  # any failure of one server leaves the run without its tools, nothing more
            log.warning("MCP server %s at %s is not available (%s: %s): its tools are not offered", server.name,
                        server.url, type(exc).__name__, exc)
            continue
        for tool in found:
            if tool.name in taken:
                log.warning("MCP server %s: tool %s is skipped: the name is taken", server.name, tool.name)
                continue
            taken.add(tool.name)
            tools.append(tool)
        log.info("MCP server %s: %d tool(s): %s", server.name, len(found), ", ".join(t.name for t in found))
    return tools


async def _connect_one(server: MCPServer, env: Mapping[str, str], stack: AsyncExitStack) -> list[Tool]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = dict(server.headers)
    token = (env.get(server.auth_env) or "").strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(headers=headers, timeout=server.timeout)
    inner = AsyncExitStack()
    await inner.__aenter__()
    try:
        await inner.enter_async_context(http)
        client = await inner.enter_async_context(
            Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=server.timeout))
        listed = await client.list_tools()
    except BaseException:
        await inner.aclose()
        raise
    stack.push_async_callback(inner.aclose)
    tools = []
    for t in listed.tools:
        if server.allow and t.name not in server.allow:
            continue
        if t.name in server.deny:
            continue

        async def run(args: dict[str, Any], name: str = t.name) -> str:
            try:
                async with asyncio.timeout(server.timeout):
                    result = await client.call_tool(name, args)
            except TimeoutError:
                raise ToolError(f"MCP server {server.name} did not answer within {server.timeout:g}s") from None
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(f"MCP server {server.name}: {type(exc).__name__}: {exc}") from None
            return _result_text(result)

        schema = t.input_schema if isinstance(t.input_schema, dict) else {"type": "object", "properties": {}}
        tools.append(Tool(f"{server.prefix}_{t.name}", (t.description or "MCP tool") + f" [MCP: {server.name}]",
                          schema, run, kind="mcp", extra={"server": server.name}))
    return tools
