"""The response gate's verdicts and outcomes (SPEC §4).

A verdict reaches the workflow by any of three paths — the `sympozium.ai/gate-verdict`
annotation (the bridge turns it into a signal), the HTTP API (a Temporal Update), or a
Temporal Update/Signal sent directly — and the first one wins.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ValidationError

VERDICT_ANNOTATION = "sympozium.ai/gate-verdict"
# Who wrote the verdict annotation, stamped by the admission webhook (which refuses it from anyone else).
VERDICT_BY_ANNOTATION = "sympozium.ai/gate-verdict-by"
BLOCKED_TEXT = "Response blocked: gate hook did not return a verdict"
REJECTED_TEXT = "Response blocked by policy"

Action = Literal["approve", "reject", "rewrite"]
Label = Literal["approved", "rejected", "rewritten", "timeout", "error", "allowed-by-default"]


class Verdict(BaseModel):
    action: Action
    response: str = ""
    reason: str = ""
    # Who decided: the API caller's identity, the gate hook's ServiceAccount, or "temporal".
    decided_by: str = "temporal"
    source: Literal["api", "annotation", "temporal"] = "temporal"
    # An annotation verdict: the run's resourceVersion in which the bridge saw it (older than the gate: refused).
    resource_version: str | None = None


class GateView(BaseModel):
    """The gate as the API shows it: state is "pending", "none", or the verdict label."""

    state: str
    gate_verdict: str | None = None
    requested_at: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    result: str | None = None


def parse_annotation(text: str | None) -> Verdict | None:
    """The annotation's JSON as a verdict; anything malformed or with an unknown action is no verdict."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return Verdict(action=data.get("action"), response=str(data.get("response") or ""),
                       reason=str(data.get("reason") or ""), source="annotation")
    except ValidationError:
        return None


def resolve(verdict: Verdict | None, *, agent_result: str, gate_default: str, hook_failed: bool) -> tuple[Label, str]:
    """The gate's label and the final result, exactly as SPEC §4's table says."""
    if verdict is not None:
        if verdict.action == "approve":
            return "approved", agent_result
        if verdict.action == "reject":
            return "rejected", verdict.response or REJECTED_TEXT
        return "rewritten", verdict.response
    if gate_default == "allow":
        return "allowed-by-default", agent_result
    return ("error" if hook_failed else "timeout"), BLOCKED_TEXT
