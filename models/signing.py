"""Signatures on what our API and bridge tell a workflow: gate verdicts now, tool decisions (SPEC §10) later (SPEC §4:
authenticity never rests on payload encryption).

A workflow takes a verdict that claims to come from our API (the token's identity) or our bridge (the annotation's
stamped writer) at its word only if it carries a signature the codec server cannot make. Until now the proof was
encryption: only our processes held the codec key. But `/codec/encode` encrypts anything for any API token (the
Temporal UI needs it to encode what its users type), so it was an oracle: encrypt a verdict naming any approver, send
it to Temporal, and it was recorded as that approver's. Now the API and the bridge sign each message with an HMAC key
of its own (a key file like the codec's: `<id> <base64 32 bytes>` lines, the first signs, all verify, so a key is
rotated as the codec's are), which the codec routes never use; the worker verifies where it decodes payloads, outside
workflow code, and hands the workflow a boolean (`Signed.signed`), as `sealed` before it.

A signature binds the message's every field, the kind of message, the workflow it is for and a random nonce: it
cannot be moved to another run, another kind of message or another text, and the workflow refuses a nonce it has
seen (a copy of a signed message, read back from a history through the codec, sent again).

Keep a verifying key for as long as histories hold messages it signed: a replay without it would record them as sent
straight to Temporal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from .keyfiles import CodecKeys, load_keys

CONTEXT = b"agentrun-signed-message-v1"
SIGNING_KEYS_VARIABLE = "AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE"


class Signature(BaseModel):
    key_id: str
    # The workflow the message is for, and a random nonce: a signature is good once, for that workflow.
    target: str
    nonce: str
    mac: str


class Signed(BaseModel):
    """A message a workflow takes only with our processes' signature. Subclasses name their kind (`SIGNED_AS`), so a
    signature on one kind is none on another."""

    SIGNED_AS: ClassVar[str] = ""

    signature: Signature | None = None
    # Set by the worker's payload converter, never sent: whether the signature is good under one of the verifying
    # keys; None where the worker has no keys (nothing can tell).
    signed: bool | None = Field(default=None, exclude=True)

    def signed_content(self) -> bytes:
        """Every field but the signature, canonically."""
        fields = self.model_dump(mode="json", exclude={"signature"})
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Signer:
    """Signs with the first key, verifies with any."""

    def __init__(self, keys: CodecKeys) -> None:
        self.keys = keys

    def _mac(self, key: bytes, message: Signed, *, target: str, nonce: str) -> str:
        data = b"\0".join([CONTEXT, message.SIGNED_AS.encode(), target.encode(), nonce.encode(),
                           message.signed_content()])
        return base64.urlsafe_b64encode(hmac.new(key, data, hashlib.sha256).digest()).decode().rstrip("=")

    def sign(self, message: Signed, *, target: str) -> None:
        """Signs `message` (in place) for the workflow `target`."""
        if not message.SIGNED_AS:
            raise TypeError(f"{type(message).__name__} names no kind (SIGNED_AS) to sign as")
        message.signature = None  # the content never includes one
        kid = self.keys.writing
        nonce = secrets.token_urlsafe(16)
        mac = self._mac(self.keys.keys[kid], message, target=target, nonce=nonce)
        message.signature = Signature(key_id=kid, target=target, nonce=nonce, mac=mac)

    def verify(self, message: Signed) -> bool:
        """The signature is good under the key it names (for the target it names: the workflow checks that)."""
        sig = message.signature
        key = self.keys.keys.get(sig.key_id) if sig is not None else None
        if sig is None or key is None or not message.SIGNED_AS:
            return False
        expected = self._mac(key, message, target=sig.target, nonce=sig.nonce)
        return hmac.compare_digest(expected.encode(), sig.mac.encode())


def load_signer(path: str) -> Signer:
    """The signer of a key file; a file it cannot use is a KeyFileError (models/keyfiles.py) naming it and the line."""
    return Signer(load_keys(path, variable=SIGNING_KEYS_VARIABLE, what="HMAC-SHA256"))


def authenticated(message: Signed, *, workflow_id: str, seen: set[str]) -> bool | None:
    """Inside the workflow (deterministic): whether `message` is our processes' for this very workflow and never seen
    before; None when the worker has no verifying keys. Remembers the nonce of a good one in `seen`."""
    if message.signed is None:
        return None
    sig = message.signature
    if not message.signed or sig is None or sig.target != workflow_id or sig.nonce in seen:
        return False
    seen.add(sig.nonce)
    return True


__all__ = ["Signature", "Signed", "Signer", "authenticated", "load_signer"]


class SignedDecision(Signed):
    """What people decide for a waiting run, a gate's verdict (models/gate.py) or a tool call's decision
    (models/approvals.py): who decided and by which path, as the workflow records it."""

    # Who decided: the API caller's identity, the gate hook's ServiceAccount, the annotation's stamped writer; for a
    # decision sent straight to Temporal, what the sender claimed (recorded as "temporal:<claim>", see `marked`).
    decided_by: str = ""
    source: Literal["api", "annotation", "temporal"] = "temporal"
    # An annotation's decision: the run's resourceVersion in which the bridge saw it (older than the wait: refused).
    resource_version: str | None = None
    # Set by the worker's payload converter, never sent: whether the decision arrived encrypted with the
    # installation's codec key (sent by our API or bridge), or plain (anyone with Temporal access) while a key is
    # set; None where no key is set (nothing can tell). See models/codec.py `SealMarkingCodec`.
    sealed: bool | None = Field(default=None, exclude=True)
