"""models/compat.py: which Sympozium fields count as set-but-ineffective, and which backends are refused."""

from __future__ import annotations

from typing import Any

import pytest

from models.base import PolicyViolation
from models.compat import check_agent_backend, check_run_backend, ignored_fields


def _obj(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def test_fields_are_ignored_only_when_set_to_something_that_would_act() -> None:
    run = _obj("r", {"dryRun": False, "canaryMode": False, "useContext": True, "volumes": [], "model": {}})
    agent = _obj("a", {"memory": {"enabled": False}, "observability": {"otlpEndpoint": "x"},  # off by default
                       "webEndpoint": {"enabled": False}, "channels": []})
    policy = _obj("p", {"featureGates": {"sub-agents": True}, "networkPolicy": None})
    assert ignored_fields(run, agent, policy) == []


def test_each_ignored_field_is_named_with_its_owner() -> None:
    run = _obj("r", {"canaryMode": True, "useContext": False, "imagePullSecrets": [{"name": "reg"}],
                     "model": {"providerHeadersSecretRef": "h"}})
    agent = _obj("a", {"memory": {}, "observability": {"enabled": True}, "webEndpoint": {"enabled": True},
                       "volumeMounts": [{"name": "v", "mountPath": "/v"}]})
    policy = _obj("p", {"featureGates": {"browser-automation": False}, "networkPolicy": {"denyAll": True},
                        "modelPolicy": {"allowedModels": ["m"]}})
    # imagePullSecrets is carried to the run's pods (models/resolve.py), so it is not among them.
    assert [w.split(": has no effect here")[0] for w in ignored_fields(run, agent, policy)] == [
        "spec.canaryMode", "spec.useContext", "spec.model.providerHeadersSecretRef",
        'Agent "a" spec.memory', 'Agent "a" spec.observability', 'Agent "a" spec.webEndpoint',
        'Agent "a" spec.volumeMounts',
        'SympoziumPolicy "p" spec.featureGates', 'SympoziumPolicy "p" spec.networkPolicy',
        'SympoziumPolicy "p" spec.modelPolicy']


@pytest.mark.parametrize(("spec", "field"), [
    ({"mode": "server"}, "spec.mode"),
    ({"agentSandbox": {"enabled": True, "warmPoolRef": "pool"}}, "spec.agentSandbox.warmPoolRef"),
])
def test_a_run_asking_for_a_backend_not_offered_is_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyViolation) as e:
        check_run_backend(_obj("r", spec))
    assert e.value.field == field and "not offered here" in e.value.message
    check_run_backend(_obj("r", {"mode": "task", "agentSandbox": {"enabled": True}}))  # the Job backend passes


def test_an_agent_asking_for_a_warm_pool_is_refused() -> None:
    with pytest.raises(PolicyViolation) as e:
        check_agent_backend(_obj("a", {"agents": {"default": {"agentSandbox": {"warmPool": {"size": 2}}}}}))
    assert e.value.field == "spec.agents.default.agentSandbox.warmPool"
    check_agent_backend(_obj("a", {"agents": {"default": {"agentSandbox": {"enabled": True}}}}))
