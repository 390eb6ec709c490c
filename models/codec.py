"""The payload codec: every payload agentrun hands Temporal is encrypted (AES-256-GCM), so workflow histories hold
no task, result, hook env or gate feedback in plaintext for whoever can read Temporal (usually a wider audience
than who can read the AgentRun).

An encrypted payload carries `encoding: binary/encrypted` and the ID of the key that wrote it in its metadata, and
as data a fresh 12-byte nonce followed by the AES-GCM ciphertext of the original payload (temporalio's Payload
protobuf, metadata included), authenticated together with the key ID. Keys come from a file (on Kubernetes a
mounted Secret): lines of `<id> <base64 of 32 bytes>`; the first line's key writes, every listed key reads, so a
key is rotated by adding the new one on top and removing the old one only once no history holds its payloads.

Payloads without the encrypted encoding pass through `decode` unchanged: histories recorded before the codec (or
written by a process without keys) still replay and read.

Being able to encrypt once told our processes from anyone else who can write to Temporal: the processes decode with
`SealMarkingCodec`, which marks each payload that arrived encrypted, and `SealAwarePayloadConverter` tells a gate
verdict whether it was (`Verdict.sealed`). But the codec server encrypts for any API token, so that proof is
forgeable; what proves a verdict our API's or bridge's now is their signature (models/signing.py), which the same
converter verifies where the worker has signing keys (`Signed.signed`). The seal still decides for runs started
before signatures and where no signing key is set (models/gate.py `marked`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from .approvals import ToolDecision
from .converter import PayloadConverter
from .gate import Verdict
from .keyfiles import (  # the key files: where the codec's callers have always found them
    CODEC_KEYS_HEADER as CODEC_KEYS_HEADER,
)
from .keyfiles import (
    KEY_BYTES as KEY_BYTES,
)
from .keyfiles import (
    KEY_ID as KEY_ID,
)
from .keyfiles import (
    SIGNING_KEYS_HEADER as SIGNING_KEYS_HEADER,
)
from .keyfiles import (
    CodecKeys as CodecKeys,
)
from .keyfiles import (
    KeyFileError as KeyFileError,
)
from .keyfiles import (
    ensure_key_file as ensure_key_file,
)
from .keyfiles import (
    load_keys as load_keys,
)
from .keyfiles import (
    new_key_line as new_key_line,
)
from .keyfiles import (
    parse_keys as parse_keys,
)
from .signing import Signed, Signer

ENCODING = b"binary/encrypted"
METADATA_ENCODING = "encoding"
METADATA_KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
# On a decoded payload, inside our processes only: it arrived encrypted with one of the codec keys.
METADATA_SEALED = "agentrun-sealed"


class CodecError(ValueError):
    """A payload that cannot be decrypted (unknown key ID, tampered or truncated data); the message says which."""


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM with the writing key; decrypts with any listed key; passes unencrypted payloads through."""

    def __init__(self, keys: CodecKeys) -> None:
        self.keys = keys
        self._ciphers = {kid: AESGCM(key) for kid, key in keys.keys.items()}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        kid = self.keys.writing
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[kid].encrypt(nonce, payload.SerializeToString(), kid.encode())
        return Payload(metadata={METADATA_ENCODING: ENCODING, METADATA_KEY_ID: kid.encode()}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get(METADATA_ENCODING) != ENCODING:
            return payload
        kid = payload.metadata.get(METADATA_KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise CodecError(f"payload encrypted with key {kid!r}, which is not among the codec keys "
                             f"({self.keys.source}: {', '.join(self.keys.keys)}); keep a key in the file while "
                             "histories hold payloads it wrote")
        if len(payload.data) < NONCE_BYTES + 16:
            raise CodecError(f"payload encrypted with key {kid!r} is truncated ({len(payload.data)} bytes)")
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], kid.encode())
        except InvalidTag as e:
            raise CodecError(f"payload encrypted with key {kid!r} fails authentication: it was altered, or the key "
                             f"with that ID is not the one that wrote it") from e
        out = Payload()
        out.ParseFromString(plain)
        return out


class SealMarkingCodec(EncryptionCodec):
    """The processes' codec: as `EncryptionCodec`, and each payload it decrypts is marked `agentrun-sealed` (a mark
    that a plain payload cannot bring along: it is removed from those). The codec server does not mark."""

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get(METADATA_ENCODING) != ENCODING:
            if METADATA_SEALED not in payload.metadata:
                return payload
            out = Payload()
            out.CopyFrom(payload)
            del out.metadata[METADATA_SEALED]
            return out
        out = super().decrypt(payload)
        out.metadata[METADATA_SEALED] = b"1"
        return out


class SealAwarePayloadConverter(PayloadConverter):
    """Pydantic payloads; a gate verdict learns whether it arrived sealed (used with `SealMarkingCodec`), and a signed
    message whether our processes' signature on it is good (with a verifier: `aware_converter`)."""

    marks_seals: ClassVar[bool] = True
    verifier: ClassVar[Signer | None] = None

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[object]:
        values = super().from_payloads(payloads, type_hints)
        for payload, value in zip(payloads, values, strict=True):
            if isinstance(value, Verdict | ToolDecision) and self.marks_seals:
                value.sealed = payload.metadata.get(METADATA_SEALED) == b"1"
            if isinstance(value, Signed) and self.verifier is not None:
                value.signed = self.verifier.verify(value)
        return values


def aware_converter(*, seals: bool, verifier: Signer | None) -> type[SealAwarePayloadConverter]:
    """The converter class for a process's settings (the SDK makes its converters from a class): marking seals
    (with the codec), verifying signatures (with signing keys)."""
    return type("AwarePayloadConverter", (SealAwarePayloadConverter,), {"marks_seals": seals, "verifier": verifier})
