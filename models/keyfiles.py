"""Key files: lines of `<id> <base64 of 32 bytes>`, the first key writes (encrypts, or signs), every key reads (decrypts,
or verifies), so a key is rotated by adding the new one on top. The payload codec's AES keys (models/codec.py) and
the message signing keys (models/signing.py) share the format.

Why a module of its own: both the codec and the signer read key files, and the codec carries signed messages, so
with the format inside the codec the signer and the codec imported each other.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

KEY_BYTES = 32
KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


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
    # 32 bytes from the OS's CSPRNG, as AESGCM.generate_key makes them: no cryptography import here, so the models a
    # workflow imports load in Temporal's sandbox (which cannot load cryptography's native module a second time).
    return f"{kid} {base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


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
