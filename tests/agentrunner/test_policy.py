"""The runner's tool policy decides exactly as the control plane does (models/resolve.py `check_policy` and
`approval_tools` over models/policy.py's normalised rules), for the templates and the docs-shape fields."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner.policy import NeedsApproval, PolicyDenied, ToolPolicy
from models.agentrun import ToolPolicy as ToolPolicyModel
from models.base import FieldProblem
from models.policy import normalize_policy
from models.resolve import ResolvedRun, approval_tools, check_policy

TOOLS = ["execute_command", "read_file", "write_file", "edit_file", "list_directory", "fetch_url",
         "send_channel_message", "k8s_get_pods"]
SPECS: list[dict[str, Any]] = [
    {"template": "Permissive"}, {"template": "Default"}, {"template": "Restrictive"},
    {"toolGating": {"defaultAction": "deny", "rules": [{"tool": "read_file", "action": "allow"},
                                                       {"tool": "write_file", "action": "ask"}]}},
    {"toolGating": {"defaultAction": "ask", "rules": [{"tool": "fetch_url", "action": "deny"}]}},
    {"allowedTools": ["read_file", "execute_command"], "requireApproval": ["execute_command"]},
    {"template": "Default", "allowedTools": ["read_file"]},
]


def control_plane(spec: dict[str, Any], tool: str) -> str:
    """What the control plane makes of a run that allows `tool` under the policy: refused, ask or allow."""
    rules = normalize_policy({"metadata": {"name": "p"}, "spec": spec})
    # Only the fields check_policy reads: a run whose toolPolicy allows `tool`.
    fields: dict[str, Any] = {"tool_policy": ToolPolicyModel(allow=[tool]), "sandbox": None, "agent_sandbox": None,
                              "runtime_class_name": "", "parent": None, "pre_run": [], "post_run": [], "rbac": []}
    run = ResolvedRun.model_construct(**fields)
    try:
        check_policy(run, rules)
    except FieldProblem as e:  # the tool rules are checked first; a later refusal (a sandbox) is not about tools
        if e.field.startswith("spec.toolPolicy"):
            return "deny"
    return "ask" if approval_tools(run, rules) else "allow"


@pytest.mark.parametrize("spec", SPECS, ids=[str(s) for s in SPECS])
def test_each_tool_is_decided_as_the_control_plane_decides_it(spec: dict[str, Any]) -> None:
    env = {"AGENT_TOOL_POLICY": normalize_policy({"metadata": {"name": "p"}, "spec": spec}).agent_tool_policy()}
    policy = ToolPolicy.from_env(env)
    for tool in TOOLS:
        assert policy.decide(tool).action == control_plane(spec, tool), (spec, tool)


def test_deny_wins_and_ask_never_silently_allows() -> None:
    policy = ToolPolicy(name="p", allow=("write_file",), deny=("write_file",), ask=("execute_command",),
                        run_allow=("write_file", "execute_command", "read_file"), run_deny=("read_file",))
    with pytest.raises(PolicyDenied, match="denied by policy p"):
        policy.check("write_file")
    with pytest.raises(PolicyDenied, match=r"toolPolicy\.deny"):
        policy.check("read_file")
    with pytest.raises(PolicyDenied, match=r"toolPolicy\.allow"):
        policy.check("fetch_url")
    with pytest.raises(NeedsApproval, match=r"^execute_command needs approval under policy p \(toolGating action: ask\)$"):
        policy.check("execute_command")
    assert not policy.offered("write_file") and policy.offered("execute_command")
