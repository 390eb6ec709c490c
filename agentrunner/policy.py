"""Which tools a run may use: the run's ``toolPolicy`` and its SympoziumPolicy's tool rules, one evaluation.

The control plane normalises a SympoziumPolicy (both shapes, the docs templates, ``allowedTools``,
``requireApproval``) into ``models.policy.PolicyRules`` and passes the tool part of it as ``AGENT_TOOL_POLICY``::

    {"name": "strict", "template": "Restrictive", "defaultAction": "allow" | "deny" | "ask",
     "allow": [...], "deny": [...], "ask": [...]}

(``PolicyRules.allowed_tools``, ``denied_tools``, ``approval_tools`` and ``default_tool_action``). The evaluation
is the control plane's (models/resolve.py ``check_policy`` and ``approval_tools``) in the same order: the run's
``toolPolicy.deny``, then its ``toolPolicy.allow`` list (when non-empty, an allow-list), then the policy's deny
rules, ask rules, allow rules, and its default action. Deny wins everywhere.

A denied tool is not offered to the model; if it is called anyway it answers "denied by policy <name>" and nothing
runs. ``ask`` needs a person's approval per call (SPEC §10): the loop parks the call until one comes
(agentrunner/approvals.py), and where it cannot wait the call is refused, never silently allowed. The check runs as
the first ``before`` hook of the ``act`` phase (agentrunner/hooks.py), and lets through a call a person approved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agentrunner.config import ConfigError, comma_list

Action = Literal["allow", "deny", "ask"]
ACTIONS = ("allow", "deny", "ask")


class PolicyDenied(Exception):
    """A tool call the policy denies; ``str(exc)`` is what the model reads."""


class NeedsApproval(PolicyDenied):
    """A tool call the policy lets through only with a person's approval (toolGating ``ask``).

    Where the agent can wait for a decision (SPEC §10: a journal, and a control plane that starts it again), the loop
    parks the call instead (agentrunner/approvals.py); elsewhere this message is the model's answer.
    """

    def __init__(self, tool: str, policy: str) -> None:
        super().__init__(f"{tool} needs approval under {policy} (toolGating action: ask)")
        self.tool = tool
        self.policy = policy


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


@dataclass(frozen=True)
class ToolPolicy:
    name: str = ""
    template: str = ""
    default_action: Action = "allow"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    run_allow: tuple[str, ...] = ()
    run_deny: tuple[str, ...] = ()

    @property
    def named(self) -> str:
        if not self.name:
            return "the run's toolPolicy"
        return f"policy {self.name}" + (f" (template {self.template})" if self.template else "")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ToolPolicy:
        run_allow = comma_list(env.get("TOOL_POLICY_ALLOW") or "")
        run_deny = comma_list(env.get("TOOL_POLICY_DENY") or "")
        text = (env.get("AGENT_TOOL_POLICY") or "").strip()
        if not text:
            return cls(run_allow=run_allow, run_deny=run_deny)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"AGENT_TOOL_POLICY is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError("AGENT_TOOL_POLICY must be a JSON object")
        default = data.get("defaultAction") or "allow"
        if default not in ACTIONS:
            raise ConfigError(f"AGENT_TOOL_POLICY.defaultAction {default!r} must be allow, deny or ask")
        lists = {}
        for key in ("allow", "deny", "ask"):
            value = data.get(key) or []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"AGENT_TOOL_POLICY.{key} must be a list of tool names")
            lists[key] = tuple(value)
        action: Action = "deny" if default == "deny" else "ask" if default == "ask" else "allow"
        return cls(str(data.get("name") or ""), str(data.get("template") or ""), action, lists["allow"],
                   lists["deny"], lists["ask"], run_allow, run_deny)

    def decide(self, tool: str) -> Decision:
        if tool in self.run_deny:
            return Decision("deny", f"denied by the run's toolPolicy.deny ({tool})")
        if self.run_allow and tool not in self.run_allow:
            return Decision("deny", f"denied by the run's toolPolicy.allow (it does not list {tool})")
        if tool in self.deny:
            return Decision("deny", f"denied by {self.named}, rule toolGating ({tool}: deny)")
        if tool in self.ask:
            return Decision("ask", f"{tool}: ask under {self.named}")
        if tool in self.allow:
            return Decision("allow", f"allowed by {self.named}")
        if self.default_action == "deny":
            return Decision("deny", f"denied by {self.named}, rule toolGating defaultAction: deny")
        if self.default_action == "ask":
            return Decision("ask", f"{tool}: ask under {self.named} (defaultAction)")
        return Decision("allow", "allowed by default")

    def offered(self, tool: str) -> bool:
        return self.decide(tool).action != "deny"

    def check(self, tool: str) -> None:
        """Raise what the model must read if `tool` may not run now."""
        decision = self.decide(tool)
        if decision.action == "deny":
            raise PolicyDenied(decision.reason)
        if decision.action == "ask":
            raise NeedsApproval(tool, self.named)
