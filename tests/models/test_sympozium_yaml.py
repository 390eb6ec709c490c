"""Sympozium-shaped YAML applies unchanged with `kubectl apply --validate=strict`, and nothing of it is pruned.

Every document of every `tests/fixtures/sympozium/*.yaml` (our own documents in upstream's shape; a new kind's
fixtures are picked up as soon as its CRD exists) is applied with the real kubectl to localkube with our CRDs
installed, then read back: the stored spec must hold everything that was applied, unchanged. Only the defaults the
schema fills in (enum defaults) may be added.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cli.up import install_crds
from localkube.testing import Handle
from models.crds import all_crds
from models.names import GROUP, VERSION
from tests.conftest import Kubectl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium"
PLURALS = {crd["spec"]["names"]["kind"]: crd["spec"]["names"]["plural"] for crd in all_crds().values()}


def _filled(text: str) -> str:
    """A fixture that a test fills in (`${RUN_NAME}`, ...) with each placeholder as a name: `run-name`."""
    return re.sub(r"\$\{([A-Z_][A-Z0-9_]*)\}", lambda m: m.group(1).lower().replace("_", "-"), text)


def _documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(_filled(path.read_text())) if d):
            out.append((f"{path.name}#{i}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


DOCUMENTS = _documents()


def missing_or_changed(applied: Any, stored: Any, path: str = "spec") -> list[str]:
    """Paths of `applied` that `stored` lacks or holds differently (what pruning or coercion would cause)."""
    if isinstance(applied, dict):
        if not isinstance(stored, dict):
            return [f"{path}: stored as {stored!r}"]
        return [p for k, v in applied.items()
                for p in (missing_or_changed(v, stored[k], f"{path}.{k}") if k in stored else [f"{path}.{k}: pruned"])]
    if isinstance(applied, list):
        if not isinstance(stored, list) or len(stored) != len(applied):
            return [f"{path}: stored as {stored!r}"]
        return [p for i, (a, s) in enumerate(zip(applied, stored, strict=True))
                for p in missing_or_changed(a, s, f"{path}[{i}]")]
    return [] if applied == stored else [f"{path}: applied {applied!r}, stored {stored!r}"]


def test_the_fixtures_cover_the_four_kinds_of_this_part() -> None:
    kinds = {doc["kind"] for _id, doc in DOCUMENTS}
    assert {"Agent", "SympoziumInstance", "AgentRun", "SympoziumSchedule", "SympoziumPolicy"} <= kinds


def test_missing_or_changed_finds_pruned_and_altered_fields() -> None:
    assert missing_or_changed({"a": {"b": 1, "c": [1, {"d": 2}]}}, {"a": {"b": 1, "c": [1, {"d": 2}]}, "e": 0}) == []
    assert missing_or_changed({"a": {"b": 1}}, {"a": {}}) == ["spec.a.b: pruned"]
    assert missing_or_changed({"c": [{"d": 2}]}, {"c": [{"d": "2"}]}) == ["spec.c[0].d: applied 2, stored '2'"]


@pytest.fixture(scope="module")
def crds_installed(localkube: Handle) -> None:
    install_crds(localkube.kubeconfig)


@pytest.mark.parametrize("doc", [d for _id, d in DOCUMENTS], ids=[i for i, _d in DOCUMENTS])
def test_strict_apply_stores_every_field(crds_installed: None, kubectl: Kubectl, kube: client.ApiClient,
                                         namespace: str, doc: dict[str, Any]) -> None:
    kind, name = doc["kind"], doc["metadata"]["name"]
    assert kind in PLURALS, f"no CRD of ours serves kind {kind}"
    out = kubectl("apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    assert out.returncode == 0, out.stderr
    assert "unknown field" not in out.stderr, out.stderr
    stored: dict[str, Any] = client.CustomObjectsApi(kube).get_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, PLURALS[kind], name)
    assert missing_or_changed(doc["spec"], stored["spec"]) == []


def test_strict_apply_still_refuses_a_field_no_schema_has(crds_installed: None, kubectl: Kubectl,
                                                          namespace: str) -> None:
    # What makes the round trips above meaningful: strict validation is on, and an unknown field fails it.
    doc = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Agent", "metadata": {"name": "typo"},
           "spec": {"agents": {"default": {"model": "m"}}, "channelz": []}}
    out = kubectl("apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    assert out.returncode != 0
    assert 'unknown field "spec.channelz"' in out.stderr, out.stderr
