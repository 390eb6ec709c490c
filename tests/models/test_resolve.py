from typing import Any

import pytest

from models.agent import normalize_agent
from models.base import FieldProblem
from models.policy import normalize_policy
from models.resolve import resolve_run

AGENT = normalize_agent({
    "metadata": {"name": "helper", "namespace": "ns"},
    "spec": {
        "agents": {"default": {
            "model": "gpt-4o", "runTimeout": "15m", "env": {"FROM_AGENT": "1"},
            "lifecycle": {"postRun": [{"name": "report", "image": "busybox:1.36"}], "gateDefault": "allow"},
        }},
        "authRefs": [{"provider": "openai", "secret": "key"}],
        "systemPrompt": "agent prompt",
    },
})


def run(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r1", "namespace": "ns", "uid": "0123456789abcdef", **meta},
            "spec": {"agentRef": "helper", "task": "hello", **spec}}


def test_run_inherits_the_agents_defaults_when_it_sets_none() -> None:
    r = resolve_run(run({}), AGENT, default_image="agent:latest")
    assert r.task == "hello" and r.agent == "helper"
    assert r.timeout_seconds == 900 and r.env == {"FROM_AGENT": "1"}
    assert r.system_prompt == "agent prompt" and r.model.model == "gpt-4o" and r.model.provider == "openai"
    assert [h.name for h in r.post_run] == ["report"] and r.gate_default == "allow"
    assert r.agent_id == "primary" and r.session_key.startswith("session-")
    assert r.image == "agent:latest" and r.gate_timeout_seconds == 600 and r.workspace_size == "1Gi"
    assert r.post_run[0].timeout_seconds == 300


def test_run_fields_override_the_agents() -> None:
    r = resolve_run(run({
        "timeout": "30s", "env": {"B": "2", "A": "1"}, "systemPrompt": "mine",
        "model": {"name": "small", "baseURL": "http://local"}, "lifecycle": {"gateTimeout": "24h"},
        "instanceRef": "ignored-because-agentRef-wins",
    }), AGENT, default_image="x")
    assert r.timeout_seconds == 30 and list(r.env) == ["A", "B"]
    assert r.system_prompt == "mine" and r.model.model == "small" and r.model.base_url == "http://local"
    assert r.model.provider == "openai"
    assert r.post_run == [] and r.gate_timeout_seconds == 86400 and r.gate_default == "block"


def test_aliases_instance_ref_and_input_are_accepted() -> None:
    obj = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "spec": {"instanceRef": "helper", "input": "hi"}}
    r = resolve_run(obj, AGENT, default_image="x")
    assert r.agent == "helper" and r.task == "hi"


def test_the_resolved_spec_does_not_change_when_the_agent_object_changes_afterwards() -> None:
    agent = AGENT.model_copy(deep=True)
    r = resolve_run(run({}), agent, default_image="x")
    agent.env["FROM_AGENT"] = "changed"
    assert r.env == {"FROM_AGENT": "1"}


@pytest.mark.parametrize(("spec", "field", "text"), [
    ({"task": None}, "spec.task", "required"),
    ({"task": "  "}, "spec.task", "required"),
    ({"task": {"mode": "tool"}}, "spec.task", "must be a string"),
    ({"timeout": "5 minutes"}, "spec.timeout", "invalid duration"),
    ({"lifecycle": {"gateTimeout": "soon"}}, "spec.lifecycle.gateTimeout", "invalid duration"),
    ({"lifecycle": {"postRun": [{"name": "a", "image": "i", "gate": True}, {"name": "b", "image": "i", "gate": True}]}},
     "spec.lifecycle.postRun", "at most one postRun hook may set gate: true, found 2"),
    ({"lifecycle": {"preRun": [{"name": "a", "image": "i", "gate": True}]}},
     "spec.lifecycle.preRun[0].gate", 'only valid on postRun hooks, not preRun (hook "a")'),
    ({"lifecycle": {"preRun": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]}},
     "spec.lifecycle.preRun[1].name", "duplicate hook name"),
    ({"lifecycle": {"preRun": [{"name": "Not_A_Label", "image": "i"}]}},
     "spec.lifecycle.preRun[0].name", "DNS label"),
    ({"lifecycle": {"postRun": [{"name": "a", "image": "i", "timeout": "forever"}]}},
     "spec.lifecycle.postRun[0].timeout", "invalid duration"),
    ({"env": {"LD_PRELOAD": "/evil.so"}}, "spec.env.LD_PRELOAD", "not allowed"),
    ({"env": {"1BAD": "x"}}, "spec.env.1BAD", "C identifier"),
    ({"cleanup": "sometimes"}, "spec.cleanup", "'delete' or 'keep'"),
    ({"mode": "server"}, "spec.mode", 'mode "server" is not offered here'),
    ({"agentSandbox": {"enabled": True, "warmPoolRef": "pool"}}, "spec.agentSandbox.warmPoolRef", "warm pool"),
    ({"lifecycle": {"preRun": [{"name": "a"}]}}, "spec.lifecycle.preRun[0].image", "Field required"),
])
def test_invalid_runs_fail_with_a_message_naming_the_field(spec: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(FieldProblem) as e:
        resolve_run(run(spec), AGENT, default_image="x")
    assert e.value.field == field
    assert text in str(e.value)


def test_policy_rules_refuse_what_they_name() -> None:
    policy = normalize_policy({"metadata": {"name": "strict"}, "spec": {
        "toolGating": {"rules": [{"tool": "shell", "action": "deny"}]},
        "imagePolicy": {"allowedRegistries": ["ghcr.io/org/"]},
        "lifecyclePolicy": {"deniedResources": ["secrets"]},
        "deniedEnv": ["DEBUG"],
    }})
    cases: list[tuple[dict[str, Any], str]] = [
        ({"toolPolicy": {"allow": ["shell"]}}, "spec.toolPolicy.allow[0]"),
        ({"lifecycle": {"preRun": [{"name": "a", "image": "busybox:1.36"}]}}, "spec.lifecycle.preRun[0].image"),
        ({"lifecycle": {"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}},
         "spec.lifecycle.rbac[0].resources"),
        ({"env": {"DEBUG": "1"}}, "spec.env.DEBUG"),
    ]
    for spec, field in cases:
        with pytest.raises(FieldProblem) as e:
            resolve_run(run(spec), AGENT.model_copy(update={"lifecycle": None}), default_image="x", policy=policy)
        assert e.value.field == field, spec
    ok = resolve_run(run({"lifecycle": {"preRun": [{"name": "a", "image": "ghcr.io/org/hook:1"}]}}), AGENT,
                     default_image="x", policy=policy)
    assert ok.pre_run[0].image == "ghcr.io/org/hook:1"


def test_a_run_name_longer_than_a_label_value_fails_naming_the_field() -> None:
    assert resolve_run(run({}, name="r" * 63), AGENT, default_image="a").ref.name == "r" * 63
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({}, name="r" * 64), AGENT, default_image="a")
    assert e.value.field == "metadata.name"
    assert "at most 63 characters for an AgentRun (64 given)" in str(e.value)


GATE = {"name": "review", "image": "busybox:1.36", "gate": True}


def test_lifecycle_retry_is_resolved_with_its_defaults_and_backoff() -> None:
    r = resolve_run(run({"lifecycle": {"postRun": [GATE], "retry": {"backoff": "1m30s", "maxChainTokens": 5000}}}),
                    AGENT, default_image="x")
    assert r.retry is not None
    assert (r.retry.max_attempts, r.retry.backoff_seconds, r.retry.max_chain_tokens) == (3, 90, 5000)
    assert resolve_run(run({"lifecycle": {"postRun": [GATE]}}), AGENT, default_image="x").retry is None


@pytest.mark.parametrize(("retry", "post_run", "field", "text"), [
    ({}, [{"name": "a", "image": "i"}], "spec.lifecycle.retry", "needs a postRun hook with gate: true"),
    ({"maxAttempts": 0}, [GATE], "spec.lifecycle.retry.maxAttempts", "at least 1, got 0"),
    ({"on": ["gate", "agent-error"]}, [GATE], "spec.lifecycle.retry.on[1]", "unknown value 'agent-error'"),
    ({"backoff": "a while"}, [GATE], "spec.lifecycle.retry.backoff", "invalid duration"),
    ({"backoff": "-5s"}, [GATE], "spec.lifecycle.retry.backoff", "must not be negative"),
    ({"maxChainTokens": 0}, [GATE], "spec.lifecycle.retry.maxChainTokens", "at least 1"),
    ({"maxAttempts": "many"}, [GATE], "spec.lifecycle.retry.maxAttempts", "integer"),
])
def test_a_bad_lifecycle_retry_fails_the_run_naming_the_field(retry: dict[str, Any], post_run: list[dict[str, Any]],
                                                              field: str, text: str) -> None:
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({"lifecycle": {"postRun": post_run, "retry": retry}}), AGENT, default_image="x")
    assert e.value.field == field
    assert text in str(e.value)


def _agent_of(provider: str, **defaults: Any) -> Any:
    return normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                            "spec": {"agents": {"default": {"model": "m", **defaults}},
                                     "authRefs": [{"provider": provider, "secret": "key"}]}})


@pytest.mark.parametrize(("provider", "base_url"), [
    ("openai-compatible", "http://127.0.0.1:1234/v1"), ("custom", "http://x/v1"), ("vllm", "http://x/v1"),
    ("lm-studio", ""), ("ollama", ""), ("llama-server", ""), ("openai", ""), ("OpenAI", ""),
    ("azure-openai", "https://res.openai.azure.com"), ("groq", "https://api.groq.com/openai/v1"),
    ("anthropic", ""), ("echo", ""),
])
def test_providers_the_reference_agent_serves_are_accepted(provider: str, base_url: str) -> None:
    r = resolve_run(run({"model": {"provider": provider, "baseURL": base_url}}), AGENT, default_image="x")
    assert r.model.provider == provider


@pytest.mark.parametrize(("provider", "base_url", "text"), [
    ("bedrock", "", "provider 'bedrock' (AWS Bedrock (SigV4-signed requests)) is not supported by the agentrun "
                    "agent yet"),
    ("vllm", "", "provider 'vllm' needs a baseURL"),
    ("openai-compatible", "", "provider 'openai-compatible' needs a baseURL"),
    ("my provider", "http://x/v1", "is not a provider name"),
])
def test_a_provider_the_agent_cannot_serve_fails_the_run_at_start_naming_the_field(
        provider: str, base_url: str, text: str) -> None:
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({"model": {"provider": provider, "baseURL": base_url}}), AGENT, default_image="x")
    assert e.value.field == "spec.model.provider"
    assert text in e.value.message
    # From the Agent, the Agent's field is named.
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({}), _agent_of(provider, baseURL=base_url), default_image="x")
    assert e.value.field == "agent spec.authRefs[0].provider"


def test_another_agent_image_may_serve_any_provider() -> None:
    r = resolve_run(run({"image": "my/agent:1", "model": {"provider": "bedrock"}}), AGENT, default_image="x")
    assert r.model.provider == "bedrock" and r.image == "my/agent:1"


@pytest.mark.parametrize(("obs", "field", "text"), [
    ({"otlpEndpoint": "collector:4318"}, 'spec.observability.otlpEndpoint', "http:// or https://"),
    ({"otlpEndpoint": "http://c:4318", "samplingRatio": "lots"}, "spec.observability.samplingRatio", "not a number"),
    ({"otlpEndpoint": "http://c:4318", "samplingRatio": "1.5"}, "spec.observability.samplingRatio", "between 0 and 1"),
])
def test_an_agents_observability_is_checked_naming_the_field(obs: dict[str, Any], field: str, text: str) -> None:
    agent = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {
        "authRefs": [{"provider": "openai", "secret": "key"}], "agents": {"default": {"model": "gpt"}},
        "observability": {"enabled": True, **obs}}})
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({}), agent, default_image="x")
    assert e.value.field.endswith(field) and text in str(e.value)
    # grpc takes host:port; a disabled block is not looked at.
    ok = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {
        "authRefs": [{"provider": "openai", "secret": "key"}], "agents": {"default": {"model": "gpt"}},
        "observability": {"enabled": True, "otlpEndpoint": "collector:4317", "otlpProtocol": "grpc"}}})
    assert resolve_run(run({}), ok, default_image="x").observability is not None
