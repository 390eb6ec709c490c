"""The chart's payload codec: every pod reads the codec keys from a mounted Secret — the user's, or one the chart
makes with a random key at install (kept on upgrade and uninstall) — and the API allows the configured Temporal
UI origins; a wildcard origin is refused by the schema."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest

from models.codec import parse_keys
from tests.deploy.test_chart import CHART, TLS_ALL, component_env, of, pod_specs, rendered


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    c = helm.Chart.load(str(CHART))
    yield c
    c.close()


def _codec_files(docs: list[dict[str, Any]], key: str = "keys") -> dict[str, tuple[str | None, str | None]]:
    """Per pod: the codec keys file it is told to read, and the Secret mounted where that file is."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for name, spec in pod_specs(docs):
        c = spec["containers"][0]
        path = next((e["value"] for e in c["env"] if e["name"] == "AGENTRUN_TEMPORAL__CODEC_KEYS_FILE"), None)
        secret = None
        for m in c["volumeMounts"]:
            if path is not None and path.startswith(m["mountPath"] + "/"):
                volume = next(v for v in spec["volumes"] if v["name"] == m["name"])
                items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
                assert items == {key: key} and path.rsplit("/", 1)[1] == key, (name, items)
                secret = volume["secret"]["secretName"]
        out[name] = (path, secret)
    return out


def test_every_pod_reads_the_generated_codec_keys_kept_across_upgrades(chart: helm.Chart) -> None:
    docs = rendered(chart, TLS_ALL)  # the setup Job too
    files = _codec_files(docs)
    assert {"agentrun-worker", "agentrun-bridge", "agentrun-api", "agentrun-temporal-setup"} <= set(files)
    assert set(files.values()) == {("/etc/agentrun/codec/keys", "agentrun-codec-keys")}
    secret = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-codec-keys")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    keys = parse_keys(base64.b64decode(secret["data"]["keys"]).decode())
    assert len(keys.keys) == 1 and len(keys.keys[keys.writing]) == 32
    # A fresh key at each install render (a real upgrade reuses the stored one through `lookup`).
    again = next(s for s in of(rendered(chart, {}), "Secret") if s["metadata"]["name"] == "agentrun-codec-keys")
    assert again["data"]["keys"] != secret["data"]["keys"]


def test_a_named_secret_is_mounted_instead_and_the_ui_origins_reach_the_api(chart: helm.Chart) -> None:
    docs = rendered(chart, {"codec": {"existingSecret": "team-codec", "key": "codec.keys",
                                      "corsOrigins": ["https://temporal.example.com"]}})
    assert set(_codec_files(docs, "codec.keys").values()) == {("/etc/agentrun/codec/codec.keys", "team-codec")}
    assert not [s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-codec-keys"]
    origins = component_env(docs, "api")["AGENTRUN_CODEC_CORS_ORIGINS"]["value"]
    assert json.loads(origins) == ["https://temporal.example.com"]


def test_without_the_codec_nothing_of_it_is_rendered(chart: helm.Chart) -> None:
    docs = rendered(chart, {"codec": {"enabled": False}})
    assert set(_codec_files(docs).values()) == {(None, None)}
    assert not [s for s in of(docs, "Secret") if "codec" in s["metadata"]["name"]]


@pytest.mark.parametrize("origin", ["*", "https://temporal.example.com/ui", "temporal.example.com"])
def test_an_origin_that_is_not_one_is_refused(chart: helm.Chart, origin: str) -> None:
    with pytest.raises(helm.HelmError, match="/codec/corsOrigins/0"):
        rendered(chart, {"codec": {"corsOrigins": [origin]}})
