"""The chart's verdict signing keys (issue 27, hole 5): a Secret of their own, the user's or one made at install with a
random key (kept on upgrade and uninstall), mounted in the worker (verifies), the bridge and the API (sign), and no
other pod; the codec's Secret stays apart."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python as helm

from models.signing import load_signer
from tests.deploy.test_chart import TLS_ALL, chart, of, pod_specs, rendered

__all__ = ["chart"]
SIGNERS = {"agentrun-worker", "agentrun-bridge", "agentrun-api"}


def _signing_files(docs: list[dict[str, Any]]) -> dict[str, tuple[str | None, str | None]]:
    out: dict[str, tuple[str | None, str | None]] = {}
    for name, spec in pod_specs(docs):
        c = spec["containers"][0]
        path = next((e["value"] for e in c["env"] if e["name"] == "AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE"), None)
        secret = None
        for m in c["volumeMounts"]:
            if path is not None and path.startswith(m["mountPath"] + "/"):
                secret = next(v for v in spec["volumes"] if v["name"] == m["name"])["secret"]["secretName"]
        out[name] = (path, secret)
    return out


def test_the_worker_bridge_and_api_read_a_generated_signing_key_of_its_own(chart: helm.Chart, tmp_path: Path) -> None:
    docs = rendered(chart, TLS_ALL)  # with the setup Job, which gets none
    files = _signing_files(docs)
    assert {n: f for n, f in files.items() if f != (None, None)} == dict.fromkeys(
        SIGNERS, ("/etc/agentrun/signing/keys", "agentrun-signing-keys"))
    secret = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-signing-keys")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (tmp_path / "keys").write_bytes(base64.b64decode(secret["data"]["keys"]))
    signer = load_signer(str(tmp_path / "keys"))
    assert len(signer.keys.keys) == 1 and len(signer.keys.keys[signer.keys.writing]) == 32
    codec = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-codec-keys")
    assert codec["data"]["keys"] != secret["data"]["keys"]


def test_a_named_secret_is_mounted_instead_or_none_when_turned_off(chart: helm.Chart) -> None:
    docs = rendered(chart, {"signing": {"existingSecret": "team-signing"}})
    assert {n: f for n, f in _signing_files(docs).items() if f != (None, None)} == dict.fromkeys(
        SIGNERS, ("/etc/agentrun/signing/keys", "team-signing"))
    assert not [s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-signing-keys"]
    off = rendered(chart, {"signing": {"enabled": False}})
    assert set(_signing_files(off).values()) == {(None, None)}
