"""The agent pod acting, end to end on localkube with the scripted model (SPEC §9): Sympozium's k8s-ops example
counts the nodes through its sidecar's per-run clusterRBAC (and reads kubectl's Forbidden without it), no command
sees the model key, a pack's declared tool runs in its sidecar, an MCP server's tool is called with its token from a
Secret, the policy keeps a denied tool from running and a call that asks for approval waits for it (SPEC §10), and an agent whose pod is deleted between two
tool calls continues from its journal: the first command's side effect happens once, the first model response is
asked for once.

Each run covers several claims (runs are the slow part). Containers are local processes in PID namespaces of their
own (localkube's kubelet), so reading every /proc/*/environ in the tools container is what it is in a real pod."""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from kubernetes import client
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from localkube.testing import Handle
from models.approvals import ToolDecision
from tests.e2e.conftest import Stack, agent_run, condition
from tests.fake_model import Call, FakeModelServer, Turn, serve_model
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "k8s-ops.yaml"
# Every environment variable of every process the command can see: how many name a provider key, how many a PATH
# (that they were read), how many processes there are, and the container's own SKILL_PACK.
READ_ALL_ENV = """all() { env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; echo; done; }
echo "keys=$(all | grep -c '_API_KEY=')"; echo "paths=$(all | grep -c '^PATH=')"
echo "procs=$(ls -d /proc/[0-9]* | wc -l)"; echo "pack=$SKILL_PACK"
"""
COUNT_NODES = "kubectl get nodes -o name | wc -l"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with serve_model() as m:
        yield m


def _example() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d}


def _key(stack: Stack, ns: str, name: str, data: dict[str, str]) -> None:
    stack.core.create_namespaced_secret(ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                             "stringData": data})


def _cluster_grants(stack: Stack, run: str) -> list[str]:
    rbac: Any = stack.rbac
    return [r.metadata.name for r in rbac.list_cluster_role(label_selector=f"sympozium.ai/agent-run={run}").items] + \
        [b.metadata.name for b in rbac.list_cluster_role_binding(label_selector=f"sympozium.ai/agent-run={run}").items]


def test_the_k8s_ops_example_counts_the_nodes_through_its_sidecar_and_no_command_sees_the_model_key(
        stack: Stack, namespace: str, model: FakeModelServer) -> None:
    ns, key = namespace, f"sk-agentpod-{uuid.uuid4().hex}"
    docs = _example()
    pack, agent, run = docs["SkillPack"], docs["Agent"], docs["AgentRun"]
    _key(stack, ns, "openai-key", {"OPENAI_API_KEY": key})
    agent["spec"]["agents"]["default"]["baseURL"] = model.base_url  # the scripted model stands in for OpenAI
    stack.create(ns, "agents", agent)
    nodes = len(stack.core.list_node().items)

    # Without clusterRBAC the sidecar acts as its own per-run account, which may not list nodes: the model reads the
    # API server's refusal.
    denied_pack = {**pack, "spec": {**pack["spec"], "sidecar": {
        k: v for k, v in pack["spec"]["sidecar"].items() if k != "clusterRBAC"}}}
    stack.create(ns, "skillpacks", denied_pack)
    model.script = [Turn(calls=[Call("execute_command", {"command": "kubectl get nodes", "target": "k8s-ops"})]),
                    Turn(text="I may not list the nodes.")]
    stack.create(ns, "agentruns", {**run, "metadata": {"name": "refused"}})
    st = stack.wait_phase(ns, "refused", timeout=120)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "I may not list the nodes."), st
    [refusal] = model.requests[1].tool_results()
    assert "Forbidden" in refusal and f"system:serviceaccount:{ns}:sympozium-skill-k8s-ops-refused" in refusal, refusal

    # The example itself: clusterRBAC reads the nodes; the pack's own tool too; and neither the tools container nor
    # the sidecar (nor anything they can see) holds the key the agent sends to the model.
    stored: Any = stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "skillpacks", "k8s-ops")
    stack.custom.replace_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "skillpacks", "k8s-ops", {
        **pack, "metadata": {**pack["metadata"], "resourceVersion": stored["metadata"]["resourceVersion"]}})
    model.requests.clear()
    model.served = 0
    model.script = [Turn(calls=[Call("execute_command", {"command": COUNT_NODES, "target": "k8s-ops"})]),
                    Turn(calls=[Call("k8s_get_nodes", {})]),
                    Turn(calls=[Call("execute_command", {"command": READ_ALL_ENV})]),
                    Turn(calls=[Call("execute_command", {"command": READ_ALL_ENV, "target": "k8s-ops"})]),
                    Turn(text=f"There are {nodes} nodes in the cluster.")]
    stack.create(ns, "agentruns", run)
    wait_for(lambda: len(_cluster_grants(stack, "quick-check")) == 2, timeout=60,
             what="the run's ClusterRole and binding")
    st = stack.wait_phase(ns, "quick-check", timeout=120)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", f"There are {nodes} nodes in the cluster."), st
    first, *_ = model.requests
    assert first.authorization == f"Bearer {key}", "the agent holds the key and sends it to the model"
    assert {"execute_command", "k8s_get_nodes"} <= set(first.tool_names())
    counted, listed, tools_env, sidecar_env = (r.tool_results()[-1] for r in model.requests[1:5])
    assert counted.strip() == str(nodes), counted
    assert listed.strip().splitlines() == [f"node/{n.metadata.name}" for n in stack.core.list_node().items]
    for seen in (tools_env, sidecar_env):
        found = dict(re.findall(r"^(keys|paths|procs|pack)=(.*)$", seen, re.M))
        assert int(found["paths"]) >= 2 and found["keys"] == "0" and key not in seen, \
            "every environment it can see was read, and no provider key is in any of them"
        assert int(found["procs"]) < 20, "a PID namespace of its own: the container's processes only"
    assert "pack=k8s-ops" in sidecar_env and "pack=k8s-ops" not in tools_env, "each ran where it was sent"
    assert st["tokenUsage"]["inputTokens"] == 50 and st["tokenUsage"]["toolCalls"] == 4, st["tokenUsage"]
    # The run's cluster-wide grant ends with it.
    wait_for(lambda: not _cluster_grants(stack, "quick-check"), timeout=30, what="the run's cluster RBAC removed")
    # The agent's account holds nothing: no pods/exec, no nodes.
    review: Any = client.AuthorizationV1Api(stack.api).create_subject_access_review({  # type: ignore[arg-type]
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": f"system:serviceaccount:{ns}:sympozium-agent",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}"],
            "resourceAttributes": {"namespace": ns, "verb": "create", "resource": "pods", "subresource": "exec"}}})
    assert review.status.allowed is False


@dataclass
class MCP:
    url: str
    authorizations: list[str] = field(default_factory=list)


@pytest.fixture
def mcp_server() -> Iterator[MCP]:
    """An MCP server (the `mcp` package, streamable HTTP) on 127.0.0.1 that records the Authorization it is sent."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("ops")

    @server.tool()
    def on_call() -> str:
        """Who is on call."""
        return "alice is on call"

    app = server.streamable_http_app()
    seen = MCP("")

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.authorizations.append(dict(scope.get("headers") or []).get(b"authorization", b"").decode())
        await app(scope, receive, send)

    uv = uvicorn.Server(uvicorn.Config(recording, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, timeout=30, what="the MCP server")
    seen.url = f"http://127.0.0.1:{uv.servers[0].sockets[0].getsockname()[1]}/mcp"
    try:
        yield seen
    finally:
        uv.should_exit = True
        thread.join(timeout=10)


def test_an_mcp_tool_is_called_with_its_token_a_denied_tool_never_runs_and_an_asked_call_waits_for_its_rejection(
        stack: Stack, namespace: str, model: FakeModelServer, mcp_server: MCP) -> None:
    ns, token = namespace, f"mcp-{uuid.uuid4().hex}"
    _key(stack, ns, "anthropic-key", {"ANTHROPIC_API_KEY": "sk-ant-test"})
    _key(stack, ns, "mcp-token", {"token": token})
    stack.create(ns, "sympoziumpolicies", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "careful"},
        "spec": {"toolGating": {"defaultAction": "allow", "rules": [{"tool": "write_file", "action": "deny"},
                                                                    {"tool": "execute_command", "action": "ask"}]}}})
    stack.create(ns, "agents", {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "ops"},
                                "spec": {"authRefs": [{"provider": "anthropic", "secret": "anthropic-key"}],
                                         "policyRef": "careful",
                                         "agents": {"default": {"model": "claude-test", "baseURL": model.root_url,
                                                                "env": {"LLM_STREAM": "true"}}},
                                         "mcpServers": [{"name": "pager", "url": mcp_server.url, "toolsPrefix": "pager",
                                                         "authSecret": "mcp-token", "timeout": 20}]}})
    model.script = [Turn(calls=[Call("pager_on_call", {})]),
                    Turn(calls=[Call("write_file", {"path": "denied.txt", "content": "x"})]),
                    Turn(calls=[Call("execute_command", {"command": "touch /workspace/asked.txt"})]),
                    Turn(calls=[Call("list_directory", {"path": "."})]),
                    Turn(text="alice is on call", cached_tokens=4)]
    stack.create(ns, "agentruns", agent_run("careful", task="Who is on call?", agent_ref="ops"))
    # ask: the agent parks until someone decides (SPEC §10); a rejection straight to Temporal answers the model.
    calls = wait_for(lambda: (((stack.get_run(ns, "careful") or {}).get("status") or {}).get("toolApproval") or {})
                     .get("calls"), timeout=120, what="the asked call to wait for approval")
    wid = (stack.get_run(ns, "careful") or {})["status"]["workflowId"]
    asyncio.run(_reject(stack, wid, ToolDecision(call_id=calls[0]["id"], action="reject", decided_by="tester",
                                                 arguments_sha256=calls[0]["argumentsSha256"], reason="no")))
    st = stack.wait_phase(ns, "careful", timeout=120)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "alice is on call"), st
    assert all(r.path.endswith("/messages") and r.stream for r in model.requests), "Anthropic's wire, streaming"
    offered = model.requests[0].tool_names()
    assert "pager_on_call" in offered and "write_file" not in offered, "a denied tool is not offered"
    on_call, denied, asked, listing = (r.tool_results()[-1] for r in model.requests[1:5])
    assert on_call == "alice is on call"
    assert mcp_server.authorizations and set(mcp_server.authorizations) == {f"Bearer {token}"}
    assert "denied by policy careful" in denied, denied
    assert asked == "rejected by temporal:tester: no", asked
    assert "denied.txt" not in listing and "asked.txt" not in listing, "neither ran"
    assert st["tokenUsage"]["cachedInputTokens"] == 4, st["tokenUsage"]


async def _reject(stack: Stack, workflow_id: str, decision: ToolDecision) -> None:
    temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    await temporal.get_workflow_handle(workflow_id).execute_update(AgentRunWorkflow.decide_tool_call, decision)


def _workspace(localkube: Handle, stack: Stack, ns: str, run: str) -> Path | None:
    """Where localkube keeps the run's /workspace (its PVC's directory), once the claim exists."""
    claims = [c for c in stack.core.list_namespaced_persistent_volume_claim(ns).items
              if c.metadata.name == f"{run}-workspace"]
    return localkube.state_dir / "volumes" / f"pvc-{claims[0].metadata.uid}" / "workspace" if claims else None


def test_an_agent_whose_pod_is_deleted_between_two_tool_calls_continues_from_its_journal(
        stack: Stack, namespace: str, model: FakeModelServer, localkube: Handle) -> None:
    ns = namespace
    _key(stack, ns, "openai-key", {"OPENAI_API_KEY": "sk-journal"})
    stack.create(ns, "agents", {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "j"},
                                "spec": {"authRefs": [{"provider": "openai", "secret": "openai-key"}],
                                         "agents": {"default": {"model": "gpt-test", "baseURL": model.base_url}}}})
    count = "n=$(cat /workspace/counter 2>/dev/null || echo 0); echo $((n + 1)) > /workspace/counter; cat /workspace/counter"
    model.script = [Turn(calls=[Call("execute_command", {"command": count})]),
                    Turn(calls=[Call("execute_command", {"command": "touch /workspace/second; sleep 60"})]),
                    Turn(calls=[Call("read_file", {"path": "counter"})]),
                    Turn(text="counted")]
    stack.create(ns, "agentruns", agent_run("durable", task="Count once.", agent_ref="j"))
    workspace = wait_for(lambda: _workspace(localkube, stack, ns, "durable"), timeout=60, what="the workspace")
    wait_for(lambda: (workspace / "second").exists(), timeout=120, what="the second command to run")
    [pod] = stack.core.list_namespaced_pod(ns, label_selector="job-name=durable").items
    stack.core.delete_namespaced_pod(pod.metadata.name, ns)

    st = stack.wait_phase(ns, "durable", timeout=180)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "counted"), st
    assert (st["agentRestarts"], st["jobName"]) == (1, "durable-restart1")
    restarted = condition(stack.get_run(ns, "durable") or {}, "AgentRestarted")
    assert restarted is not None and restarted["reason"] == "PodLost"
    # Which of the two depends on whether the worker looked before the pod was removed (its name is then known).
    assert re.match(rf"the agent's pod (of Job durable is gone \(deleted\)|{pod.metadata.name} of Job durable was "
                    r"deleted) before it reported a result; started again in Job durable-restart1 \(restart 1 of 2\)",
                    restarted["message"]), restarted
    firsts = [r for r in model.requests if not r.tool_results()]
    assert len(firsts) == 1, "the first model response was asked for once"
    assert len(model.requests) == 4, "turns 1 and 2 came from the journal: only turns 3 and 4 were asked for again"
    interrupted, counter = model.requests[2].tool_results()[-1], model.requests[3].tool_results()[-1]
    assert "interrupted" in interrupted, "the command that had started is not run again"
    assert counter.strip() == "1", "the first command's side effect happened once"
