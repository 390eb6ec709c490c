"""Asking before acting (SPEC §10), the agent's side: what a call waiting for approval is, how its arguments are
bound to a decision, and how the decisions reach a container started again.

**The binding.** A decision names the call and the SHA-256 of its arguments' canonical JSON, so an approval is for
exactly the arguments the approver saw. Canonical JSON is RFC 8785 (the JSON Canonicalization Scheme, JCS): object
members sorted by the UTF-16 code units of their names, no whitespace, strings with only the escapes JSON requires
(``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as ``\\u00xx``; everything else as UTF-8), numbers as
ECMAScript prints an IEEE 754 double (``1e+21``, ``0.000001``, ``-0`` as ``0``; integers beyond 2^53 as the double
they round to), and NaN or Infinity refused. `canonical` is the one implementation: the control plane imports it
from here (models/approvals.py), so the status, the API, the CLI and the agent hash the same bytes, and any JCS
library in any language gets the same digest. ``status.toolApproval.calls[].arguments`` is that canonical text, so
``sha256(arguments) == argumentsSha256`` can be checked by anyone.

**Parking.** The control plane says which waits it can resume (``AGENT_WAITS``, a comma list; ``tool-approval``
for now, sub-agents next): only then does the loop park a call instead of refusing it, and only with a journal
(``AGENT_STATE_DIR``). A parked round ends the container with status ``waiting`` and the pending calls in the
result marker (``wait``); the workflow waits with no pod, then starts the agent again with ``AGENT_RESUME``:

    {"kind": "tool-approval", "round": 3, "decisions": [
       {"callId": "c1", "action": "approve" | "reject" | "edit", "argumentsSha256": "<hex>",
        "arguments": "<canonical JSON of the edited arguments>", "reason": "...", "decidedBy": "...",
        "source": "api" | "annotation" | "temporal" | "timeout"}]}

It is set on the agent container by the worker, in the Job's spec: the tools container and the hooks (which can
write ``/workspace``) cannot change it, nor the journal (a directory only the agent container mounts), and it is
bounded (`ARGUMENTS_MAX_BYTES` per call, `PENDING_MAX` calls a round) so it always fits an environment variable.
The resumed agent records each decision in its journal before it acts on it, and checks that its hash is the one
of the call it journaled as pending: a decision for other arguments is no decision.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from agentrunner.config import ConfigError, comma_list

TOOL_APPROVAL = "tool-approval"
WAIT_KINDS = (TOOL_APPROVAL,)
# A call's arguments larger than this are not put to a person (nobody reviews 8 KiB of arguments, and every pending
# call's arguments travel in the status, the marker and, edited, in AGENT_RESUME: PENDING_MAX of them stay well
# under the 128 KiB a single environment variable may hold).
ARGUMENTS_MAX_BYTES = 8 * 1024
PENDING_MAX = 8  # calls of one round that may wait for approval together
REASON_MAX_BYTES = 1024
Action = Literal["approve", "reject", "edit"]
ACTIONS: tuple[Action, ...] = ("approve", "reject", "edit")
# Sources of a decision: the control plane's doors (SPEC §4), and the policy's toolApproval.onTimeout.
TIMEOUT_SOURCE = "timeout"


class NotCanonical(ValueError):
    """A value RFC 8785 cannot represent (NaN, Infinity, a lone surrogate, a non-JSON type)."""


# -- canonical JSON (RFC 8785) ----------------------------------------------------------------------------------

def _number(value: int | float) -> str:
    """ECMAScript's Number::toString of the double `value` is (RFC 8785 §3.2.2.3)."""
    try:
        x = float(value)
    except OverflowError:
        raise NotCanonical(f"{value} is beyond an IEEE 754 double") from None
    if math.isnan(x) or math.isinf(x):
        raise NotCanonical(f"{value!r} is not a JSON number")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    digits, exponent = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    s = "".join(str(d) for d in digits)  # the shortest digits that round-trip (repr's)
    k = len(s)
    n = k + int(exponent)  # the decimal point's position: value = 0.s * 10**n
    if k <= n <= 21:
        return sign + s + "0" * (n - k)
    if 0 < n <= 21:
        return sign + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + s
    e = n - 1
    mantissa = s if k == 1 else s[0] + "." + s[1:]
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _string(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise NotCanonical("a string holds a lone surrogate (not Unicode text)") from None
    return json.dumps(value, ensure_ascii=False)  # Python's escapes are exactly RFC 8785's


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        names = sorted(value, key=lambda k: str(k).encode("utf-16-be"))  # by UTF-16 code units
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise NotCanonical(f"an object member's name must be a string, not {type(name).__name__}")
            if i:
                out.append(",")
            out.append(_string(name))
            out.append(":")
            _write(value[name], out)
        out.append("}")
    else:
        raise NotCanonical(f"{type(value).__name__} is not a JSON value")


def canonical(value: Any) -> str:
    """The RFC 8785 canonical JSON text of a JSON value (as `json.loads` gives it)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _no_constant(name: str) -> Any:
    raise NotCanonical(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """JSON as a strict parser reads it (no NaN or Infinity)."""
    return json.loads(text, parse_constant=_no_constant)


def canonical_arguments(text: str) -> str:
    """A call's arguments (JSON text, as the model wrote them; empty is `{}`) as canonical JSON of an object; raises
    ValueError (NotCanonical included) saying why they are none."""
    value = parse_json(text or "{}")
    if not isinstance(value, dict):
        raise NotCanonical(f"the arguments must be a JSON object, got {type(value).__name__}")
    return canonical(value)


def sha256_hex(canonical_text: str) -> str:
    return hashlib.sha256(canonical_text.encode("utf-8")).hexdigest()


# -- the wait and the decisions -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PendingCall:
    """A call of the round that waits for a person: as the model asked for it, its arguments canonical."""

    id: str
    tool: str
    arguments: str  # canonical JSON
    sha256: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "tool": self.tool, "arguments": self.arguments, "argumentsSha256": self.sha256}


@dataclass
class Wait:
    """Why the container ends without an answer: what it waits for (`kind`), in which round, for which calls."""

    kind: str
    round: int
    calls: list[PendingCall] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round, "calls": [c.to_dict() for c in self.calls]}


@dataclass(frozen=True)
class Decision:
    call_id: str
    action: Action
    sha256: str
    arguments: str = ""  # canonical JSON of the edited arguments (edit)
    reason: str = ""
    decided_by: str = ""
    source: str = ""

    def to_record(self, round_: int) -> dict[str, Any]:
        return {"k": "decision", "round": round_, "id": self.call_id, "action": self.action, "sha256": self.sha256,
                "arguments": self.arguments, "reason": self.reason, "by": self.decided_by, "source": self.source}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Decision:
        action = record.get("action")
        return cls(str(record.get("id") or ""), action if action in ACTIONS else "reject",
                   str(record.get("sha256") or ""), str(record.get("arguments") or ""),
                   str(record.get("reason") or ""), str(record.get("by") or ""), str(record.get("source") or ""))

    def answer(self) -> str:
        """What the model reads for a call that did not run."""
        if self.source == TIMEOUT_SOURCE:
            return f"not run: {self.reason or 'the approval timed out'}"
        return f"rejected by {self.decided_by or 'an approver'}: {self.reason or 'no reason given'}"


@dataclass(frozen=True)
class Resume:
    kind: str
    round: int
    decisions: tuple[Decision, ...] = ()


def waits_from_env(env: Mapping[str, str]) -> frozenset[str]:
    """The waits the control plane resumes (``AGENT_WAITS``); unknown kinds are refused, naming the variable."""
    kinds = comma_list(env.get("AGENT_WAITS") or "")
    unknown = [k for k in kinds if k not in WAIT_KINDS]
    if unknown:
        raise ConfigError(f"AGENT_WAITS names {', '.join(unknown)}: the agent can wait for {', '.join(WAIT_KINDS)}")
    return frozenset(kinds)


def _text(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"AGENT_RESUME {where}.{key} must be a string")
    return value


def resume_from_env(env: Mapping[str, str]) -> Resume | None:
    """``AGENT_RESUME``, checked; None when unset. A malformed one is a ConfigError naming the field."""
    text = (env.get("AGENT_RESUME") or "").strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"AGENT_RESUME is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("AGENT_RESUME must be a JSON object")
    kind = data.get("kind")
    if kind not in WAIT_KINDS:
        raise ConfigError(f"AGENT_RESUME.kind {kind!r} must be one of {', '.join(WAIT_KINDS)}")
    round_ = data.get("round")
    if not isinstance(round_, int) or round_ < 1:
        raise ConfigError("AGENT_RESUME.round must be a positive integer")
    raw = data.get("decisions") or []
    if not isinstance(raw, list):
        raise ConfigError("AGENT_RESUME.decisions must be a list")
    decisions = []
    for i, d in enumerate(raw):
        where = f"decisions[{i}]"
        if not isinstance(d, dict):
            raise ConfigError(f"AGENT_RESUME.{where} must be an object")
        action = d.get("action")
        if action not in ACTIONS:
            raise ConfigError(f"AGENT_RESUME.{where}.action {action!r} must be one of {', '.join(ACTIONS)}")
        decision = Decision(_text(d, "callId", where), action, _text(d, "argumentsSha256", where),
                            _text(d, "arguments", where), _text(d, "reason", where), _text(d, "decidedBy", where),
                            _text(d, "source", where))
        if not decision.call_id:
            raise ConfigError(f"AGENT_RESUME.{where}.callId is empty")
        if action == "edit":
            try:
                canonical_text = canonical_arguments(decision.arguments)
            except ValueError as exc:
                raise ConfigError(f"AGENT_RESUME.{where}.arguments: {exc}") from None
            if canonical_text != decision.arguments:
                raise ConfigError(f"AGENT_RESUME.{where}.arguments is not canonical JSON (RFC 8785)")
        decisions.append(decision)
    return Resume(kind, round_, tuple(decisions))
