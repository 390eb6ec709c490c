"""The payload codec: AES-256-GCM with the writing key, any listed key reads, plain payloads pass through, and a
key file that cannot work is refused with a message naming the file and the line."""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes
from temporalio.exceptions import ApplicationError

from models.codec import (
    ENCODING,
    METADATA_KEY_ID,
    METADATA_SEALED,
    CodecError,
    EncryptionCodec,
    KeyFileError,
    SealMarkingCodec,
    ensure_key_file,
    load_keys,
    new_key_line,
    parse_keys,
)
from models.converter import DATA_CONVERTER
from models.gate import Verdict
from models.settings import SettingsError, TemporalSettings

SECRET = "s3cr3t-XYZ-0123456789"


def _key(byte: int) -> str:
    return base64.b64encode(bytes([byte]) * 32).decode()


def _codec(text: str) -> EncryptionCodec:
    return EncryptionCodec(parse_keys(text, source="test keys"))


def _payload(value: object) -> Payload:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0]


def _roundtrip(codec: EncryptionCodec, payloads: list[Payload]) -> tuple[list[Payload], list[Payload]]:
    async def go() -> tuple[list[Payload], list[Payload]]:
        enc = await codec.encode(payloads)
        return enc, await codec.decode(enc)
    return asyncio.run(go())


def test_a_payload_round_trips_and_its_ciphertext_holds_no_plaintext() -> None:
    codec = _codec(f"new {_key(1)}\nold {_key(2)}\n")
    original = _payload({"env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": SECRET}]})
    [enc], [dec] = _roundtrip(codec, [original])
    assert dec == original
    assert enc.metadata["encoding"] == ENCODING
    assert enc.metadata[METADATA_KEY_ID] == b"new"
    assert set(enc.metadata) == {"encoding", METADATA_KEY_ID}  # the original encoding is inside, encrypted
    assert SECRET.encode() not in enc.data and b"json/plain" not in enc.data
    # A fresh nonce each time: the same value never encrypts to the same bytes.
    [again], _ = _roundtrip(codec, [original])
    assert again.data != enc.data


def test_after_rotation_the_old_key_still_decodes_and_the_new_one_writes() -> None:
    before = _codec(f"old {_key(2)}\n")
    [written_before], _ = _roundtrip(before, [_payload("task one")])
    after = _codec(f"# rotated\nnew {_key(1)}\nold {_key(2)}\n")
    [written_after], _ = _roundtrip(after, [_payload("task two")])
    assert written_before.metadata[METADATA_KEY_ID] == b"old"
    assert written_after.metadata[METADATA_KEY_ID] == b"new"
    decoded = asyncio.run(after.decode([written_before, written_after]))
    assert [pydantic_data_converter.payload_converter.from_payload(p, str) for p in decoded] == ["task one",
                                                                                               "task two"]


def test_an_unknown_key_id_is_an_error_naming_it() -> None:
    [enc], _ = _roundtrip(_codec(f"gone {_key(3)}\n"), [_payload("x")])
    with pytest.raises(CodecError, match="payload encrypted with key 'gone', which is not among the codec keys "
                                         r"\(test keys: new\)"):
        asyncio.run(_codec(f"new {_key(1)}\n").decode([enc]))


def test_plain_payloads_pass_through_decode() -> None:
    plain = [_payload({"task": "hello"}), _payload(None), Payload(metadata={"encoding": b"binary/null"})]
    assert asyncio.run(_codec(f"k {_key(1)}\n").decode(plain)) == plain


@pytest.mark.parametrize("spoil", ["flip", "truncate", "key-id"])
def test_tampered_ciphertext_is_refused(spoil: str) -> None:
    codec = _codec(f"a {_key(1)}\nb {_key(2)}\n")
    [enc], _ = _roundtrip(codec, [_payload(SECRET)])
    bad = Payload()
    bad.CopyFrom(enc)
    if spoil == "flip":
        data = bytearray(enc.data)
        data[20] ^= 1
        bad.data = bytes(data)
        message = "fails authentication"
    elif spoil == "truncate":
        bad.data = enc.data[:20]
        message = "truncated"
    else:  # the payload claims another known key: the key ID is authenticated too
        bad.metadata[METADATA_KEY_ID] = b"b"
        message = "fails authentication"
    with pytest.raises(CodecError, match=message):
        asyncio.run(codec.decode([bad]))


@pytest.mark.parametrize(("text", "message"), [
    ("", "no keys"),
    ("# only a comment\n", "no keys"),
    (f"k1 {_key(1)} extra\n", "line 1: expected '<key id> <base64 key>', got 3 field"),
    (f"k1 {_key(1)}\nk1 {_key(2)}\n", "line 2: key id 'k1' appears twice"),
    ("k1 not-base64!\n", "line 1: the key of 'k1' is not base64"),
    (f"k1 {base64.b64encode(b'short').decode()}\n", "line 1: the key of 'k1' is 5 bytes; AES-256 needs 32"),
    (f"bad/id {_key(1)}\n", "line 1: key id 'bad/id' must be"),
])
def test_a_bad_key_file_is_refused_naming_the_line(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(KeyFileError, match="AGENTRUN_TEMPORAL__CODEC_KEYS_FILE=" + str(path)) as e:
        load_keys(path)
    assert message in str(e.value)


def test_settings_refuse_a_missing_key_file_and_build_an_encrypting_converter(tmp_path: Path) -> None:
    missing = TemporalSettings(codec_keys_file=str(tmp_path / "nope"))
    with pytest.raises(SettingsError, match=f"AGENTRUN_TEMPORAL__CODEC_KEYS_FILE={tmp_path / 'nope'}: cannot read"):
        missing.data_converter()
    assert TemporalSettings().data_converter() is DATA_CONVERTER  # plain payloads (models/converter.py)
    keys = ensure_key_file(tmp_path / "state" / "codec-keys")
    converter = TemporalSettings(codec_keys_file=str(keys)).data_converter()
    assert isinstance(converter.payload_codec, EncryptionCodec)
    # Failure messages and stack traces go through the codec too (they can quote a hook's output).
    assert isinstance(converter.failure_converter, DefaultFailureConverterWithEncodedAttributes)
    [enc] = asyncio.run(converter.encode([{"value": SECRET}]))
    assert enc.metadata["encoding"] == ENCODING and SECRET.encode() not in enc.data
    assert asyncio.run(converter.decode([enc], [dict])) == [{"value": SECRET}]


def test_a_generated_key_file_is_private_and_kept(tmp_path: Path) -> None:
    path = ensure_key_file(tmp_path / "codec-keys")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    first = path.read_text()
    keys = load_keys(path)
    assert len(keys.keys) == 1 and len(keys.keys[keys.writing]) == 32
    assert ensure_key_file(path).read_text() == first
    assert parse_keys(new_key_line("k2")).writing == "k2"


@pytest.mark.parametrize("process", ["worker", "bridge", "api"])
def test_each_process_refuses_a_bad_key_file_naming_the_line(process: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"k1 {_key(1)}\nk2 {base64.b64encode(b'short').decode()}\n")
    tokens = tmp_path / "tokens"
    tokens.write_text("t-0123456789 someone\n")
    env = {**os.environ, "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE": str(keys), "AGENTRUN_TOKEN_FILE": str(tokens),
           "AGENTRUN_TEMPORAL__ADDRESS": "127.0.0.1:1", "AGENTRUN_KUBE__KUBECONFIG": str(tmp_path / "none")}
    done = subprocess.run([sys.executable, "-m", process], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"agentrun {process}: AGENTRUN_TEMPORAL__CODEC_KEYS_FILE={keys}, line 2: the key of 'k2' is 5 bytes; "
        "AES-256 needs 32 (generate one with `agentrun codec new-key`)")
    assert "Traceback" not in done.stderr


def test_a_failure_message_is_encrypted_too(tmp_path: Path) -> None:
    converter = TemporalSettings(codec_keys_file=str(ensure_key_file(tmp_path / "keys"))).data_converter()
    failure = Failure()
    error = ApplicationError(f"hook printed {SECRET}", {"env": SECRET}, type="HookFailed", non_retryable=True)
    asyncio.run(converter.encode_failure(error, failure))
    assert failure.message == "Encoded failure" and SECRET.encode() not in failure.SerializeToString()
    back = asyncio.run(converter.decode_failure(failure))
    assert isinstance(back, ApplicationError) and back.message == f"hook printed {SECRET}"
    assert back.type == "HookFailed" and list(back.details) == [{"env": SECRET}]


def test_the_processes_codec_marks_what_arrived_encrypted_and_a_plain_payload_cannot_bring_the_mark() -> None:
    keys = parse_keys(f"k {_key(1)}\n", source="test keys")
    sealed = asyncio.run(EncryptionCodec(keys).encode([_payload("from our API")]))[0]
    forged = _payload("from anyone")
    forged.metadata[METADATA_SEALED] = b"1"
    got = asyncio.run(SealMarkingCodec(keys).decode([sealed, forged, _payload("plain")]))
    assert [p.metadata.get(METADATA_SEALED) for p in got] == [b"1", None, None]
    assert [pydantic_data_converter.payload_converter.from_payload(p, str) for p in got] == [
        "from our API", "from anyone", "plain"]
    assert asyncio.run(EncryptionCodec(keys).decode([sealed]))[0].metadata.get(METADATA_SEALED) is None, \
        "the codec server shows payloads as they were"


def test_a_verdict_learns_whether_it_arrived_sealed(tmp_path: Path) -> None:
    converter = TemporalSettings(codec_keys_file=str(ensure_key_file(tmp_path / "keys"))).data_converter()
    verdict = Verdict(action="approve", decided_by="alice", source="api")
    ours = asyncio.run(converter.encode([verdict]))
    plain = pydantic_data_converter.payload_converter.to_payloads([verdict])
    plain[0].metadata[METADATA_SEALED] = b"1"  # a mark sent along is no seal
    assert [v.sealed for v in asyncio.run(converter.decode(ours + plain, [Verdict, Verdict]))] == [True, False]
    assert asyncio.run(converter.decode(ours, [Verdict]))[0] == verdict.model_copy(update={"sealed": True})
    assert asyncio.run(converter.decode(asyncio.run(converter.encode(["text"])), [str])) == ["text"]
    assert pydantic_data_converter.payload_converter.from_payloads(plain, [Verdict])[0].sealed is None, \
        "without a key nothing can tell"
