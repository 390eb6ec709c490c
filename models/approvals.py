"""Per-tool-call approval (SPEC §10): the calls a parked agent waits on, the decisions on them, and the records the
run's status keeps.

A decision reaches the workflow by the same three doors as a gate verdict (SPEC §4): `POST
/api/v1/runs/{name}/tool-approvals` (a Temporal Update, signed by the API), the `sympozium.ai/tool-verdict`
annotation (the admission webhook stamps its writer in `sympozium.ai/tool-verdict-by`; the bridge turns it into a
signal, signed), or a Temporal Update sent straight to the workflow (recorded as `temporal:<claim>`). Every decision
names the call and the SHA-256 of the canonical JSON (RFC 8785) of its arguments: `agentrunner.approvals.canonical`,
the one implementation the agent, the API, the CLI and the console share, so a decision is for exactly the
arguments the approver saw.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError

from agentrunner.approvals import (
    ARGUMENTS_MAX_BYTES,
    REASON_MAX_BYTES,
    TIMEOUT_SOURCE,
    TOOL_APPROVAL,
    canonical,
    canonical_arguments,
    sha256_hex,
)

from .base import K8sModel
from .signing import SignedDecision

TOOL_VERDICT_ANNOTATION = "sympozium.ai/tool-verdict"
# Who wrote the tool-verdict annotation, stamped by the admission webhook (which refuses it from anyone else).
TOOL_VERDICT_BY_ANNOTATION = "sympozium.ai/tool-verdict-by"
ToolAction = Literal["approve", "reject", "edit"]
TOOL_ACTIONS: tuple[str, ...] = ("approve", "reject", "edit")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
CALL_ID_MAX = 256
# The decisions `status.toolApprovals` keeps (the oldest go first); each carries at most one call's edited arguments.
DECISIONS_KEPT = 100

__all__ = ["ARGUMENTS_MAX_BYTES", "TIMEOUT_SOURCE", "TOOL_APPROVAL", "canonical", "canonical_arguments",
           "sha256_hex"]


class PendingCall(K8sModel):
    """A tool call waiting for a person: its id, tool, arguments as canonical JSON (the text that is hashed), and
    their SHA-256."""

    id: str
    tool: str
    arguments: str
    arguments_sha256: str


class AgentWait(K8sModel):
    """Why an agent's container ended without an answer (its marker's `wait`): what it waits for, in which round
    of its journal, on which calls."""

    kind: str
    round: int
    calls: list[PendingCall] = Field(default_factory=list)


class ToolApprovalStatus(K8sModel):
    """`status.toolApproval`: the round of calls that waits (state `pending`), or the last one (`decided`)."""

    state: str = "pending"
    requested_at: str | None = None
    # When the wait ends without decisions (the policy's toolApproval.timeout), and what happens then.
    expires_at: str | None = None
    on_timeout: str | None = None
    attempt: int | None = None  # a retried run's attempt the calls are of
    round: int | None = None  # of the agent's journal
    calls: list[PendingCall] = Field(default_factory=list)


class ToolDecisionRecord(K8sModel):
    """One decision, as `status.toolApprovals[]` keeps it."""

    call_id: str
    tool: str = ""
    action: str
    arguments_sha256: str = ""
    arguments: str | None = None  # the edited arguments (canonical JSON), for an edit
    decided_by: str = ""
    source: str = ""  # api, annotation, temporal, timeout
    reason: str | None = None
    decided_at: str | None = None
    attempt: int | None = None


class ToolDecision(SignedDecision):
    """A decision on one waiting call. Our API and bridge sign theirs (models/signing.py): one that claims them as
    its source without a good signature for this run is recorded as sent straight to Temporal (`marked`)."""

    SIGNED_AS: ClassVar[str] = "tool-decision"

    call_id: str
    action: ToolAction
    arguments_sha256: str
    arguments: str | None = None  # edit: the new arguments, canonical JSON of an object
    reason: str = ""


class ToolApprovalView(BaseModel):
    """What a decision got: the call as decided, and the calls of the round still waiting."""

    call_id: str
    action: str
    decided_by: str
    source: str
    arguments_sha256: str
    waiting: list[str] = Field(default_factory=list)
    resumed: bool = False  # every call of the round is decided: the agent is started again


def decision_problem(*, call_id: Any, action: Any, arguments_sha256: Any, arguments: Any,
                     reason: Any) -> str | None:
    """Why a body is no decision (the API's 400), naming the field; None: it is one. `arguments` for an edit is a
    JSON object (or its text); the caller canonicalises it with `edited_arguments`."""
    if not isinstance(call_id, str) or not call_id or len(call_id) > CALL_ID_MAX:
        return f"callId must be the id of the waiting call (a string of 1 to {CALL_ID_MAX} characters)"
    if action not in TOOL_ACTIONS:
        return 'action must be "approve", "reject" or "edit"'
    if not isinstance(arguments_sha256, str) or not SHA256.match(arguments_sha256):
        return ("argumentsSha256 must be the SHA-256 (64 lower-case hex digits) of the waiting call's arguments as "
                "canonical JSON: what status.toolApproval.calls[].argumentsSha256 says")
    if reason is not None and not isinstance(reason, str):
        return "reason must be a string"
    if isinstance(reason, str) and len(reason.encode("utf-8")) > REASON_MAX_BYTES:
        return f"reason must be at most {REASON_MAX_BYTES} bytes"
    if action == "edit":
        if arguments is None:
            return "arguments (the edited arguments, a JSON object) is required for edit"
        try:
            edited_arguments(arguments)
        except ValueError as e:
            return f"arguments: {e}"
    elif arguments is not None:
        return f"arguments is only for edit, not {action}"
    return None


def edited_arguments(arguments: Any) -> str:
    """Edited arguments (a JSON object, or its text) as canonical JSON, bounded; ValueError says why not."""
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(value, dict):
        raise ValueError(f"must be a JSON object, got {type(value).__name__}")
    text = canonical(value)
    if len(text.encode("utf-8")) > ARGUMENTS_MAX_BYTES:
        raise ValueError(f"at most {ARGUMENTS_MAX_BYTES} bytes of canonical JSON")
    return text


def parse_tool_annotation(text: str | None) -> ToolDecision | None:
    """The tool-verdict annotation's JSON as a decision; anything that is no decision is None."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    args = data.get("arguments")
    if decision_problem(call_id=data.get("callId"), action=data.get("action"),
                        arguments_sha256=data.get("argumentsSha256"), arguments=args,
                        reason=data.get("reason", "")) is not None:
        return None
    try:
        return ToolDecision(call_id=data["callId"], action=data["action"], arguments_sha256=data["argumentsSha256"],
                            arguments=edited_arguments(args) if args is not None else None,
                            reason=str(data.get("reason") or ""), source="annotation")
    except (ValidationError, ValueError):
        return None


def marked(decision: ToolDecision) -> ToolDecision:
    """A decision that does not prove it came from our API or bridge names whoever it claims to be, as
    `temporal:<claim>` (models/gate.py `marked` says the same of verdicts): the proof is our processes' signature
    (`signed`, checked by the workflow against itself) where the worker has signing keys, else the payload's seal."""
    forged = (decision.signed is False if decision.signed is not None else decision.sealed is False) \
        and decision.source != "temporal"
    if (decision.source != "temporal" and not forged) or decision.decided_by.startswith("temporal:"):
        return decision
    claim = decision.decided_by if decision.decided_by not in ("", "temporal") else "unknown"
    return decision.model_copy(update={"decided_by": f"temporal:{claim}"})


def resume_env(kind: str, round_: int, decisions: list[ToolDecisionRecord]) -> str:
    """`AGENT_RESUME` for the agent started again after a round of decisions (agentrunner/approvals.py)."""
    out = []
    for d in decisions:
        item: dict[str, Any] = {"callId": d.call_id, "action": d.action, "argumentsSha256": d.arguments_sha256,
                                "decidedBy": d.decided_by, "source": d.source}
        if d.arguments is not None:
            item["arguments"] = d.arguments
        if d.reason:
            item["reason"] = d.reason
        out.append(item)
    return json.dumps({"kind": kind, "round": round_, "decisions": out}, separators=(",", ":"), ensure_ascii=False)
