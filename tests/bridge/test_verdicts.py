"""Which MutatingWebhookConfigurations make the bridge trust a verdict's `gate-verdict-by` stamp, per namespace."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.verdicts import covers, selects_namespace

RULE = {"apiGroups": ["sympozium.ai"], "apiVersions": ["v1alpha1"], "resources": ["agentruns"],
        "operations": ["CREATE", "UPDATE"]}


def webhook(**fields: Any) -> dict[str, Any]:
    return {"name": "verdicts.agentrun.dev", "rules": [RULE],
            "clientConfig": {"service": {"name": "agentrun-api", "namespace": "x", "path": "/admission/agentruns/mutate"}},
            **fields}


@pytest.mark.parametrize(("selector", "team_a"), [
    (None, True), ({}, True),
    ({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}, True),
    ({"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}, False),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "c"]}]}, True),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["team-a"]}]}, False),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}, True),
    # A label the bridge does not read could exclude the namespace: it does not count as covered.
    ({"matchLabels": {"team": "a"}}, False),
    ({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, False),
])
def test_a_namespace_is_covered_only_when_its_name_alone_decides(selector: dict[str, Any] | None,
                                                                 team_a: bool) -> None:
    assert selects_namespace(selector, "team-a") is team_a
    assert covers(webhook(namespaceSelector=selector), "team-a") is team_a


def test_only_a_webhook_calling_the_mutating_path_on_agentrun_updates_counts() -> None:
    assert covers(webhook(clientConfig={"url": "https://api.example.com/admission/agentruns/mutate"}), "a")
    assert not covers(webhook(clientConfig={"service": {"name": "s", "namespace": "x", "path": "/admission/agentruns"}}),
                      "a")
    assert not covers(webhook(rules=[{**RULE, "operations": ["CREATE"]}]), "a")
    assert not covers(webhook(rules=[{**RULE, "resources": ["agentruns/status"]}]), "a")
    assert covers(webhook(rules=[{**RULE, "apiGroups": ["*"], "resources": ["*"], "operations": ["*"]}]), "a")
    assert not covers(webhook(objectSelector={"matchLabels": {"x": "y"}}), "a")
