"""The response gate's verdicts and outcomes (SPEC §4).

A verdict reaches the workflow by any of three paths — the `sympozium.ai/gate-verdict`
annotation (the bridge turns it into a signal), the HTTP API (a Temporal Update), or a
Temporal Update/Signal sent directly — and the first one wins. A `retry` verdict (with
`lifecycle.retry`) sends the attempt back: the agent runs again with the task `retry_task` frames.
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from pydantic import BaseModel, ValidationError

from .signing import SignedDecision

VERDICT_ANNOTATION = "sympozium.ai/gate-verdict"
# Who wrote the verdict annotation, stamped by the admission webhook (which refuses it from anyone else).
VERDICT_BY_ANNOTATION = "sympozium.ai/gate-verdict-by"
BLOCKED_TEXT = "Response blocked: gate hook did not return a verdict"
REJECTED_TEXT = "Response blocked by policy"

Action = Literal["approve", "reject", "rewrite", "retry"]
# "retried": an attempt the gate sent back (the attempts history; the run goes on); "retries-exhausted": the
# last attempt allowed (maxAttempts, or maxChainTokens used) was sent back too.
Label = Literal["approved", "rejected", "rewritten", "timeout", "error", "allowed-by-default", "retried",
                "retries-exhausted"]
# What a retry verdict means for this attempt: no lifecycle.retry (a reject), another attempt, or none left.
RetryChance = Literal["off", "again", "exhausted"]

# A retried attempt's task carries the original task, the rejected output and the feedback, each cut to this.
RETRY_PART_MAX_BYTES = 8 * 1024
# The attempts history on the status stays small: the last few records, each reason cut.
ATTEMPTS_KEPT = 10
ATTEMPT_REASON_MAX_BYTES = 1024


class Verdict(SignedDecision):
    """A gate's verdict. Our API and bridge sign theirs (models/signing.py): one that claims them as its source
    without a good signature for this run is recorded as sent straight to Temporal (`marked`)."""

    SIGNED_AS: ClassVar[str] = "gate-verdict"

    action: Action
    response: str = ""
    reason: str = ""


class GateView(BaseModel):
    """The gate as the API shows it: state is "pending", "none", or the verdict label."""

    state: str
    gate_verdict: str | None = None
    requested_at: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    # Where the verdict came from (a Verdict's source: api, annotation, temporal), or what decided without one
    # (timeout: none came within gateTimeout; gate-hook: the gate hook failed without one).
    source: str | None = None
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


def marked(verdict: Verdict, *, signatures: bool = False) -> Verdict:
    """A verdict sent straight to Temporal (its UI or CLI, not our API or bridge) names whoever it claims to be;
    it is recorded as such: `temporal:<claim>`, `temporal:unknown` without one.

    So is one that claims to come from our API or bridge (`source` api or annotation) but does not prove it, and the
    identity it names is a claim; its `source` stays as sent (the gate's rules for annotation verdicts read it). The
    proof is our processes' signature (`signatures`: runs since the workflow's SIGNED_VERDICTS_PATCH; `signed`, which
    the workflow has checked against itself, False) wherever the worker has signing keys. Without them, and for runs
    started before, it is the payload's encryption (`sealed` False: it arrived plain while the installation has a
    codec key), which anyone with an API token could forge through the codec server's /codec/encode."""
    if signatures and verdict.signed is not None:
        forged = verdict.signed is False and verdict.source != "temporal"
    else:
        forged = verdict.sealed is False and verdict.source != "temporal"
    if (verdict.source != "temporal" and not forged) or verdict.decided_by.startswith("temporal:"):
        return verdict
    claim = verdict.decided_by if verdict.decided_by not in ("", "temporal") else "unknown"
    return verdict.model_copy(update={"decided_by": f"temporal:{claim}"})


def cut_utf8(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, never splitting a character."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


def _part(text: str) -> str:
    cut = cut_utf8(text, RETRY_PART_MAX_BYTES)
    return cut if cut == text else f"{cut}\n[... cut to its first {RETRY_PART_MAX_BYTES} bytes]"


def retry_task(*, task: str, rejected: str, feedback: str, attempt: int) -> str:
    """The task of attempt `attempt` (2 or later): the original task, the output the reviewer sent back and the
    reviewer's feedback, each bounded, in a plain-text frame an agent reads without guessing."""
    return (f"{_part(task)}\n\n"
            f"--- Your previous answer (attempt {attempt - 1}) was sent back by the reviewer. ---\n"
            f"{_part(rejected) or '(no answer)'}\n\n"
            f"--- The reviewer's feedback ---\n"
            f"{_part(feedback) or '(none given)'}\n\n"
            f"--- Answer the task again (attempt {attempt}), taking the feedback into account. ---")


def exhausted_text(attempts: int, why: str) -> str:
    """The final result of a run whose every attempt was sent back (never the feedback: it is no answer)."""
    return f"Response blocked: all {attempts} attempts were rejected by the gate ({why})"


def resolve(verdict: Verdict | None, *, agent_result: str, gate_default: str, hook_failed: bool,
            retry: RetryChance = "off", attempts: int = 1, exhausted_why: str = "") -> tuple[Label, str]:
    """The gate's label and the final result, exactly as SPEC §4's table says. `retry` says what a retry
    verdict means for this attempt; `attempts` and `exhausted_why` word the result when none are left."""
    if verdict is not None:
        if verdict.action == "approve":
            return "approved", agent_result
        if verdict.action == "reject":
            return "rejected", verdict.response or REJECTED_TEXT
        if verdict.action == "retry":
            if retry == "again":
                return "retried", ""
            if retry == "exhausted":
                return "retries-exhausted", exhausted_text(attempts, exhausted_why)
            return "rejected", REJECTED_TEXT  # without lifecycle.retry: a reject, and the feedback is no answer
        return "rewritten", verdict.response
    if gate_default == "allow":
        return "allowed-by-default", agent_result
    return ("error" if hook_failed else "timeout"), BLOCKED_TEXT
