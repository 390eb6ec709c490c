"""MCP servers' tools: an MCP server started here with the `mcp` package (streamable HTTP on 127.0.0.1), the agent
as a subprocess connecting to it, the scripted model calling its tool."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.agentrunner.helpers import Dirs, run_agent
from tests.fake_model import Call, FakeModelServer, Turn, closed_port_url, serve_model
from tests.waiting import wait_for


@dataclass
class MCP:
    url: str
    authorizations: list[str] = field(default_factory=list)


@pytest.fixture
def mcp_server() -> Iterator[MCP]:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("cluster")

    @server.tool()
    def get_nodes() -> str:
        """How many nodes the cluster has."""
        return "3 nodes: a, b, c"

    @server.tool()
    def delete_pod(name: str) -> str:
        """Delete a pod."""
        return f"deleted {name}"

    app = server.streamable_http_app()
    seen = MCP("")

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            seen.authorizations.append(headers.get(b"authorization", b"").decode())
        await app(scope, receive, send)

    uv = uvicorn.Server(uvicorn.Config(recording, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, timeout=30, what="the MCP server")
    port = uv.servers[0].sockets[0].getsockname()[1]
    seen.url = f"http://127.0.0.1:{port}/mcp"
    try:
        yield seen
    finally:
        uv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with serve_model() as m:
        yield m


def _servers(url: str, **extra: Any) -> str:
    return json.dumps([{"name": "k8s", "url": url, "toolsPrefix": "k8s", "timeout": 10, **extra}])


def test_an_mcp_servers_tool_is_offered_with_its_prefix_and_called(tmp_path: Path, mcp_server: MCP,
                                                                    model: FakeModelServer) -> None:
    dirs = Dirs(tmp_path).make()
    model.script = [Turn(calls=[Call("k8s_get_nodes", {})]), Turn(text="the cluster has 3 nodes")]
    run = run_agent(dirs, "How many nodes are in the cluster?", MODEL_PROVIDER="openai", MODEL_NAME="m",
                    MODEL_BASE_URL=model.base_url, OPENAI_API_KEY="sk-x", MCP_AUTH_K8S="mcp-token",
                    AGENT_MCP_SERVERS=_servers(mcp_server.url, toolsDeny=["delete_pod"]))

    assert run.result["status"] == "success", run.stderr[-3000:]
    assert run.result["response"] == "the cluster has 3 nodes"
    names = model.requests[0].tool_names()
    assert "k8s_get_nodes" in names and "k8s_delete_pod" not in names
    assert model.requests[1].tool_results() == ["3 nodes: a, b, c"]
    assert mcp_server.authorizations and set(mcp_server.authorizations) == {"Bearer mcp-token"}


def test_tools_allow_keeps_only_the_tools_it_names(tmp_path: Path, mcp_server: MCP, model: FakeModelServer) -> None:
    model.script = [Turn(text="ok")]
    run_agent(Dirs(tmp_path).make(), "x", MODEL_PROVIDER="openai", MODEL_NAME="m", MODEL_BASE_URL=model.base_url,
              AGENT_MCP_SERVERS=_servers(mcp_server.url, toolsAllow=["delete_pod"]))
    mcp_tools = [n for n in model.requests[0].tool_names() if n.startswith("k8s_")]
    assert mcp_tools == ["k8s_delete_pod"]


def test_an_mcp_server_that_is_down_is_logged_and_its_tools_are_absent(tmp_path: Path,
                                                                       model: FakeModelServer) -> None:
    model.script = [Turn(text="answered without it")]
    url = closed_port_url("/mcp")
    run = run_agent(Dirs(tmp_path).make(), "x", MODEL_PROVIDER="openai", MODEL_NAME="m",
                    MODEL_BASE_URL=model.base_url, AGENT_MCP_SERVERS=_servers(url))
    assert run.result["status"] == "success" and run.result["response"] == "answered without it"
    assert f"MCP server k8s at {url} is not available" in run.stderr
    assert not [n for n in model.requests[0].tool_names() if n.startswith("k8s_")]


def test_a_malformed_mcp_config_is_an_error_naming_the_variable(tmp_path: Path) -> None:
    run = run_agent(Dirs(tmp_path).make(), "x", AGENT_MCP_SERVERS="[{\"url\": 1}]")
    assert run.result["status"] == "error"
    assert run.result["error"] == "invalid environment: AGENT_MCP_SERVERS[0] needs a name and a url"
