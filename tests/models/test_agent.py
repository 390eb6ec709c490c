import pytest

from models.agent import normalize_agent
from models.base import FieldProblem

CURRENT = {
    "apiVersion": "sympozium.ai/v1alpha1",
    "kind": "Agent",
    "metadata": {"name": "helper", "namespace": "team"},
    "spec": {
        "agents": {"default": {
            "model": "gpt-4o", "baseURL": "http://llm:8080/v1", "thinking": "low", "runTimeout": "15m",
            "env": {"TEAM": "a"}, "nodeSelector": {"gpu": "yes"},
            "lifecycle": {"preRun": [{"name": "fetch", "image": "busybox:1.36", "command": ["true"]}]},
            "subagents": {"maxDepth": 4},
        }},
        "authRefs": [{"provider": "openai", "secret": "openai-key"}],
        "skills": [{"skillPackRef": "k8s-ops"}],
        "policyRef": "strict",
        "systemPrompt": "be brief",
    },
}

LEGACY = {
    "apiVersion": "sympozium.ai/v1alpha1",
    "kind": "SympoziumInstance",
    "metadata": {"name": "old", "namespace": "team"},
    "spec": {
        "provider": {"name": "anthropic", "model": "claude", "apiKeySecret": "anthropic-key", "baseURL": "https://x"},
        "systemPrompt": "legacy prompt",
        "skills": ["k8s-ops", {"skillPackRef": "web"}],
        "policy": "relaxed",
    },
}


def test_current_shape_is_normalised_into_the_profile() -> None:
    p = normalize_agent(CURRENT)
    assert (p.name, p.namespace) == ("helper", "team")
    assert p.model.provider == "openai" and p.model.model == "gpt-4o" and p.model.base_url == "http://llm:8080/v1"
    assert p.model.auth_secret_ref == "openai-key" and p.model.thinking == "low"
    assert p.model.node_selector == {"gpu": "yes"}
    assert p.run_timeout == "15m" and p.env == {"TEAM": "a"}
    assert p.lifecycle is not None and p.lifecycle.pre_run[0].name == "fetch"
    assert p.subagents.max_depth == 4 and p.subagents.max_concurrent == 5
    assert [s.skill_pack_ref for s in p.skills] == ["k8s-ops"]
    assert p.policy_ref == "strict" and p.system_prompt == "be brief"


def test_legacy_instance_shape_is_normalised_into_the_same_profile() -> None:
    p = normalize_agent(LEGACY)
    assert p.model.provider == "anthropic" and p.model.model == "claude"
    assert p.model.auth_secret_ref == "anthropic-key" and p.model.base_url == "https://x"
    assert [s.skill_pack_ref for s in p.skills] == ["k8s-ops", "web"]
    assert p.policy_ref == "relaxed" and p.system_prompt == "legacy prompt"


def test_malformed_agent_names_the_field() -> None:
    bad = {"metadata": {"name": "x"}, "spec": {"agents": {"default": {"env": {"A": ["not", "a", "string"]}}}}}
    with pytest.raises(FieldProblem) as e:
        normalize_agent(bad)
    assert e.value.field == "spec.agents.default.env.A"
