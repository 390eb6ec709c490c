"""When the bridge rewrites a stamped object: after an edit of its pack, or of the object behind the pack's back,
and never for what others may add (labels of their own, finalizers, status)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from bridge.personas import out_of_date
from models.personas import ANNOTATION_STORED, expand, read_pack, stamped_hash

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium" / "personapack.yaml"


def _stamp(model: str = "echo-1") -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    obj["metadata"].update(namespace="ns", uid="u1")
    obj["spec"]["enabled"] = True
    obj["spec"]["personas"][0]["model"] = model
    return expand(read_pack("PersonaPack", obj)).agents[0]


def test_an_object_as_written_is_up_to_date_whatever_others_add() -> None:
    want = _stamp()
    have = copy.deepcopy(want)
    have["metadata"].update(uid="a1", resourceVersion="7", finalizers=["x"])
    have["metadata"]["labels"]["team"] = "blue"
    have["status"] = {"phase": "Ready"}
    assert not out_of_date(have, want)


def test_an_edit_of_the_pack_or_of_the_object_makes_itout_of_date() -> None:
    have = _stamp()
    assert out_of_date(have, _stamp(model="echo-2"))
    edited = copy.deepcopy(have)
    edited["spec"]["agents"]["default"]["model"] = "by-hand"
    assert out_of_date(edited, have)
    relabelled = copy.deepcopy(have)
    relabelled["metadata"]["labels"]["sympozium.ai/persona"] = "someone-else"
    assert out_of_date(relabelled, have)


def test_what_the_cluster_pruned_is_not_taken_for_an_edit_once_noted() -> None:
    want = _stamp()
    pruned = copy.deepcopy(want)
    del pruned["spec"]["memory"]  # a field the Agent's schema does not keep
    assert out_of_date(pruned, want)
    pruned["metadata"]["annotations"][ANNOTATION_STORED] = stamped_hash(pruned, list(want["metadata"]["labels"]))
    assert not out_of_date(pruned, want)
