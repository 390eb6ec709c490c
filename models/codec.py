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

import base64
import binascii
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from .approvals import ToolDecision
from .converter import PayloadConverter
from .gate import Verdict
from .signing import Signed, Signer

ENCODING = b"binary/encrypted"
METADATA_ENCODING = "encoding"
METADATA_KEY_ID = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12
# On a decoded payload, inside our processes only: it arrived encrypted with one of the codec keys.
METADATA_SEALED = "agentrun-sealed"
KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class CodecError(ValueError):
    """A payload that cannot be decrypted (unknown key ID, tampered or truncated data); the message says which."""


class KeyFileError(ValueError):
    """A key file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class CodecKeys:
    """The keys by ID; `writing` is the one new payloads are encrypted with."""

    writing: str
    keys: dict[str, bytes] = field(repr=False)
    source: str = ""

    def __post_init__(self) -> None:
        if self.writing not in self.keys:
            raise KeyFileError(f"{self.source or 'codec keys'}: the writing key {self.writing!r} is not among the keys")


def parse_keys(text: str, *, source: str = "codec keys", what: str = "AES-256") -> CodecKeys:
    """`<id> <base64 key>` lines (blank lines and `#` comments ignored); the first key writes (or signs: the verdict
    signing keys of models/signing.py have the same format, `what` names their use)."""
    keys: dict[str, bytes] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise KeyFileError(f"{source}, line {n}: expected '<key id> <base64 key>', got {len(parts)} field(s)")
        kid, b64 = parts
        if not KEY_ID.match(kid):
            raise KeyFileError(f"{source}, line {n}: key id {kid!r} must be 1-63 letters, digits, '.', '_' or '-'")
        if kid in keys:
            raise KeyFileError(f"{source}, line {n}: key id {kid!r} appears twice")
        try:
            key = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise KeyFileError(f"{source}, line {n}: the key of {kid!r} is not base64 ({e})") from e
        if len(key) != KEY_BYTES:
            raise KeyFileError(f"{source}, line {n}: the key of {kid!r} is {len(key)} bytes; {what} needs "
                               f"{KEY_BYTES} (generate one with `agentrun codec new-key`)")
        keys[kid] = key
    if not keys:
        raise KeyFileError(f"{source}: no keys (lines of '<key id> <base64 key>'; the first one writes)")
    return CodecKeys(writing=next(iter(keys)), keys=keys, source=source)


def load_keys(path: str | Path, *, variable: str = "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE",
              what: str = "AES-256") -> CodecKeys:
    source = f"{variable}={path}"
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise KeyFileError(f"{source}: cannot read it ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise KeyFileError(f"{source}: not a text file ({e})") from e
    return parse_keys(text, source=source, what=what)


def new_key_line(key_id: str = "") -> str:
    """A fresh `<id> <base64 key>` line; the ID defaults to the date and a random suffix."""
    kid = key_id or f"k{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(3)}"
    if not KEY_ID.match(kid):
        raise KeyFileError(f"key id {kid!r} must be 1-63 letters, digits, '.', '_' or '-'")
    return f"{kid} {base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()}"


CODEC_KEYS_HEADER = "# codec keys: '<id> <base64 key>' per line; the first one encrypts, all of them decrypt"
SIGNING_KEYS_HEADER = "# verdict signing keys: '<id> <base64 key>' per line; the first one signs, all of them verify"


def ensure_key_file(path: Path, *, header: str = CODEC_KEYS_HEADER) -> Path:
    """A key file with one fresh key at `path` unless one is there (readable by its owner only)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(header + "\n")
            f.write(new_key_line() + "\n")
    return path


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
