"""Signed verdicts (models/signing.py; issue 27, hole 5): our API and bridge sign, the worker's converter verifies as it
decodes, the workflow takes a signature once and only for itself; encryption proves nothing any more. The oracle
through the live codec server: tests/e2e/test_codec.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from models.codec import SIGNING_KEYS_HEADER, EncryptionCodec, ensure_key_file, new_key_line, parse_keys
from models.gate import Verdict, marked
from models.settings import SettingsError, TemporalSettings
from models.signing import Signed, Signer, authenticated, load_signer

WID = "agentrun/team-a/r/uid-1"


def _keys(tmp_path: Path, *lines: str, name: str = "signing-keys") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _verdict(**kw: object) -> Verdict:
    return Verdict.model_validate({"action": "approve", "decided_by": "alice", "source": "api", **kw})


def test_a_signature_covers_every_field_the_kind_and_the_key(tmp_path: Path) -> None:
    signer = load_signer(str(_keys(tmp_path, new_key_line("s1"))))
    v = _verdict(reason="ok")
    signer.sign(v, target=WID)
    assert v.signature is not None and v.signature.key_id == "s1" and v.signature.target == WID
    assert signer.verify(v)
    for change in ({"decided_by": "bob"}, {"action": "reject"}, {"reason": "other"}, {"source": "annotation"},
                   {"resource_version": "7"}):
        assert not signer.verify(v.model_copy(update=change)), change
    other_target = v.model_copy(update={"signature": v.signature.model_copy(update={"target": "agentrun/x/y/z"})})
    assert not signer.verify(other_target)
    assert not signer.verify(_verdict())  # no signature
    stranger = load_signer(str(_keys(tmp_path, new_key_line("s1"), name="other")))
    assert not stranger.verify(v), "the same key ID with another key"
    twice = _verdict(reason="ok")
    signer.sign(twice, target=WID)
    assert twice.signature is not None and twice.signature.nonce != v.signature.nonce


def test_keys_rotate_as_the_codecs_do_and_a_bad_file_names_itself(tmp_path: Path) -> None:
    old_line, new_line = new_key_line("old"), new_key_line("new")
    old = load_signer(str(_keys(tmp_path, old_line, name="old")))
    v = _verdict()
    old.sign(v, target=WID)
    rotated = load_signer(str(_keys(tmp_path, new_line, old_line, name="rotated")))
    assert rotated.verify(v), "a key still listed verifies what it signed"
    fresh = _verdict()
    rotated.sign(fresh, target=WID)
    assert fresh.signature is not None and fresh.signature.key_id == "new"
    made = ensure_key_file(tmp_path / "made", header=SIGNING_KEYS_HEADER)
    assert made.read_text().startswith("# verdict signing keys") and (made.stat().st_mode & 0o777) == 0o600
    bad = _keys(tmp_path, "k1 c2hvcnQ=", name="bad")
    with pytest.raises(SettingsError, match=r"AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE=.*bad, line 1: .* HMAC-SHA256 needs 32"):
        TemporalSettings(signing_keys_file=str(bad)).signer()


def test_the_workers_converter_tells_a_signed_verdict_from_one_that_is_only_encrypted(tmp_path: Path) -> None:
    """The codec server encrypts anything for any token: a verdict it encrypted arrives sealed, and unsigned."""
    codec_keys = ensure_key_file(tmp_path / "codec-keys")
    signing_keys = ensure_key_file(tmp_path / "signing-keys", header=SIGNING_KEYS_HEADER)
    converter = TemporalSettings(codec_keys_file=str(codec_keys), signing_keys_file=str(signing_keys)).data_converter()
    signer = TemporalSettings(signing_keys_file=str(signing_keys)).signer()
    assert signer is not None
    ours = _verdict()
    signer.sign(ours, target=WID)
    oracle = EncryptionCodec(TemporalSettings(codec_keys_file=str(codec_keys)).codec().keys)  # type: ignore[union-attr]
    forged = asyncio.run(oracle.encode(
        TemporalSettings().data_converter().payload_converter.to_payloads([_verdict()])))
    decoded = asyncio.run(converter.decode(asyncio.run(converter.encode([ours])) + forged, [Verdict, Verdict]))
    assert [(v.sealed, v.signed) for v in decoded] == [(True, True), (True, False)]
    # Signing keys without a codec: signatures are verified, and no seal is claimed.
    plain = TemporalSettings(signing_keys_file=str(signing_keys)).data_converter()
    (again,) = asyncio.run(plain.decode(asyncio.run(plain.encode([ours])), [Verdict]))
    assert (again.sealed, again.signed) == (None, True)
    (none,) = asyncio.run(TemporalSettings().data_converter().decode(asyncio.run(plain.encode([ours])), [Verdict]))
    assert none.signed is None, "without keys nothing can tell"


def test_the_workflow_takes_a_signature_once_and_for_itself_only() -> None:
    seen: set[str] = set()
    v = _verdict(signature={"key_id": "s1", "target": WID, "nonce": "n1", "mac": "m"})
    assert authenticated(v.model_copy(update={"signed": None}), workflow_id=WID, seen=seen) is None
    assert authenticated(v.model_copy(update={"signed": False}), workflow_id=WID, seen=seen) is False
    assert authenticated(v.model_copy(update={"signed": True}), workflow_id="agentrun/other", seen=seen) is False
    assert seen == set()
    assert authenticated(v.model_copy(update={"signed": True}), workflow_id=WID, seen=seen) is True
    assert authenticated(v.model_copy(update={"signed": True}), workflow_id=WID, seen=seen) is False, "a replay"


@pytest.mark.parametrize(("signed", "sealed", "recorded"), [
    (True, False, "alice"),  # signed, whatever the seal
    (False, True, "temporal:alice"),  # encrypted through the codec server, not signed: the oracle
    (None, True, "alice"),  # no signing keys: the seal, as before
    (None, False, "temporal:alice"),
])
def test_with_signatures_a_verdict_claiming_our_api_needs_one(signed: bool | None, sealed: bool, recorded: str) -> None:
    v = _verdict().model_copy(update={"signed": signed, "sealed": sealed})
    assert marked(v, signatures=True).decided_by == recorded
    assert marked(v.model_copy(update={"source": "temporal"}), signatures=True).decided_by == "temporal:alice"
    # Runs started before signatures keep the seal's rule.
    assert marked(v).decided_by == ("alice" if sealed else "temporal:alice")


def test_only_a_kind_of_message_can_be_signed() -> None:
    with pytest.raises(TypeError, match="names no kind"):
        Signer(parse_keys(new_key_line("k"))).sign(Signed(), target=WID)
