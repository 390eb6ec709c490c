"""Which fields name a Secret (models/secretrefs.py), the key a run borrows from its Agent, and the author stamp
(models/authorship.py): pure rules, checked without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from models import authorship
from models.agent import normalize_agent
from models.authorship import Author, TrustedComponents
from models.resolve import resolve_run
from models.secretrefs import SECRET_FIELDS, SecretRef, key_redirects, secret_refs


def env(secret: str) -> dict[str, Any]:
    return {"name": "T", "valueFrom": {"secretKeyRef": {"name": secret, "key": "k"}}}


def test_every_secret_a_run_names_is_found_with_its_field() -> None:
    run = {"spec": {
        "lifecycle": {"preRun": [{"name": "p", "env": [{"name": "A", "value": "1"}, env("pre")]}],
                      "postRun": [{"name": "q", "env": [env("post")]}]},
        "model": {"authSecretRef": "key", "providerHeadersSecretRef": "headers"},
        "imagePullSecrets": [{"name": "pull"}],
        "volumes": [{"name": "v", "secret": {"secretName": "vol"}},
                    {"name": "w", "projected": {"sources": [{"configMap": {"name": "cm"}}, {"secret": {"name": "proj"}}]}}],
    }}
    assert secret_refs("AgentRun", run) == [
        SecretRef("spec.lifecycle.preRun[0].env[1].valueFrom.secretKeyRef.name", "pre"),
        SecretRef("spec.lifecycle.postRun[0].env[0].valueFrom.secretKeyRef.name", "post"),
        SecretRef("spec.model.authSecretRef", "key"),
        SecretRef("spec.model.providerHeadersSecretRef", "headers"),
        SecretRef("spec.imagePullSecrets[0].name", "pull"),
        SecretRef("spec.volumes[0].secret.secretName", "vol"),
        SecretRef("spec.volumes[1].projected.sources[1].secret.name", "proj"),
    ]


def test_an_agents_and_a_packs_secrets_include_those_whose_consumers_come_later() -> None:
    agent = {"spec": {"authRefs": [{"provider": "openai", "secret": "key"}, {"provider": "x", "secret": ""}],
                      "mcpServers": [{"name": "m", "authSecret": "mcp"}],
                      "observability": {"headersSecretRef": "otel"},
                      "channels": [{"type": "slack", "configRef": {"secret": "slack"}}],
                      "agents": {"default": {"lifecycle": {"postRun": [{"name": "h", "env": [env("hook")]}]}}}}}
    assert [(r.field, r.name) for r in secret_refs("Agent", agent)] == [
        ("spec.agents.default.lifecycle.postRun[0].env[0].valueFrom.secretKeyRef.name", "hook"),
        ("spec.authRefs[0].secret", "key"),  # the empty one names no Secret (keyless providers)
        ("spec.mcpServers[0].authSecret", "mcp"),
        ("spec.observability.headersSecretRef", "otel"),
        ("spec.channels[0].configRef.secret", "slack")]
    ensemble = {"spec": {"channelConfigs": {"slack": "s1"},
                         "agentConfigs": [{"name": "a", "channelConfigs": {"discord": "d1"},
                                           "mcpServers": [{"authSecret": "m1"}]}]}}
    assert [(r.field, r.name) for r in secret_refs("Ensemble", ensemble)] == [
        ("spec.channelConfigs.slack", "s1"), ("spec.agentConfigs[0].channelConfigs.discord", "d1"),
        ("spec.agentConfigs[0].mcpServers[0].authSecret", "m1")]
    assert [r.field for r in secret_refs("SkillPack", {"spec": {"sidecar": {"env": [env("e")], "secretRef": "s"}}})] \
        == ["spec.sidecar.env[0].valueFrom.secretKeyRef.name", "spec.sidecar.secretRef"]


def test_malformed_shapes_name_nothing_rather_than_fail() -> None:
    assert secret_refs("AgentRun", {"spec": {"lifecycle": "x", "model": ["y"], "volumes": {"a": 1}}}) == []
    assert secret_refs("Model", {"spec": {}}) == []
    assert set(SECRET_FIELDS) == {"AgentRun", "Agent", "SympoziumInstance", "SkillPack", "Ensemble", "PersonaPack"}


AGENT = normalize_agent({"metadata": {"name": "keyed"}, "spec": {
    "agents": {"default": {"model": "gpt-4o", "env": {"HTTPS_PROXY": "http://proxy.corp:3128"}}},
    "authRefs": [{"provider": "openai", "secret": "team-key"}]}})


def redirects(**spec: Any) -> list[str]:
    obj = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "spec": {"agentRef": "keyed", "task": "t", **spec}}
    return key_redirects(obj["spec"], AGENT, resolve_run(obj, AGENT, default_image="agent:1"), default_image="agent:1")


def test_a_run_that_borrows_its_agents_key_may_not_change_where_it_goes() -> None:
    assert redirects() == []
    assert redirects(model={"model": "gpt-4o-mini"}, env={"HTTPS_PROXY": "http://proxy.corp:3128", "V": "1"}) == []
    assert redirects(model={"baseURL": "https://api.openai.com/v1"}) == []  # the same endpoint, spelled out
    assert redirects(model={"baseURL": "http://127.0.0.1:9"}) == ["spec.model.baseURL"]
    assert redirects(model={"provider": "anthropic"}) == ["spec.model.provider"]
    assert redirects(image="mine:1") == ["spec.image"]
    # The run's env replaces the Agent's: dropping the Agent's proxy changes the way too, as do interpreter hooks.
    assert redirects(env={"V": "1"}) == ["spec.env.HTTPS_PROXY"]
    assert redirects(env={"HTTPS_PROXY": "http://proxy.corp:3128", "PYTHONPATH": "/workspace",
                          "OPENAI_BASE_URL": "http://x"}) == ["spec.env.OPENAI_BASE_URL", "spec.env.PYTHONPATH"]
    # A run naming its own key is checked for that key instead (secret_refs).
    assert redirects(model={"authSecretRef": "mine", "baseURL": "http://127.0.0.1:9"}) == []


def test_the_author_stamp_reads_as_written_and_fails_safe() -> None:
    author = Author("alice@example.com", ("system:authenticated", "team-a"))
    notes = author.annotations("agents")
    assert notes == {"agentrun.dev/author": "alice@example.com",
                     "agentrun.dev/author-groups": '["system:authenticated","team-a"]'}
    assert authorship.read("agents", {"metadata": {"annotations": notes}}) == author
    assert author.annotations("agentruns") == {"agentrun.dev/created-by": "alice@example.com",
                                               "agentrun.dev/created-by-groups": '["system:authenticated","team-a"]'}
    # Groups that are not a JSON list of names count as none: a review with fewer groups can only allow less.
    for groups in ("team-a", '{"a": 1}', "[1]"):
        read = authorship.read("agents", {"metadata": {"annotations": {"agentrun.dev/author": "a",
                                                                       "agentrun.dev/author-groups": groups}}})
        assert read == Author("a", ())
    assert authorship.read("agents", {"metadata": {}}) is None


@pytest.mark.parametrize(("plural", "before", "after", "granted"), [
    ("agents", {"agents": {"default": {"model": "a"}}, "systemPrompt": "x"},
     {"agents": {"default": {"model": "b"}}, "systemPrompt": "y"}, False),
    ("agents", {"agents": {"default": {"baseURL": "a"}}}, {"agents": {"default": {"baseURL": "b"}}}, True),
    ("agents", {"authRefs": []}, {"authRefs": [{"secret": "k"}]}, True),
    ("skillpacks", {"skills": [1], "sidecar": {"image": "a"}}, {"skills": [2], "sidecar": {"image": "a"}}, False),
    ("skillpacks", {"sidecar": {"image": "a"}}, {"sidecar": {"image": "b"}}, True),
    ("sympoziumschedules", {"task": "a", "suspend": False}, {"task": "a", "suspend": True}, False),
    ("sympoziumschedules", {"task": "a"}, {"task": "b"}, True),
    ("ensembles", {"enabled": False, "agentConfigs": []}, {"enabled": True, "agentConfigs": []}, False),
])
def test_what_changes_what_an_object_grants(plural: str, before: dict[str, Any], after: dict[str, Any],
                                            granted: bool) -> None:
    assert (authorship.grants(plural, {"spec": before}) != authorship.grants(plural, {"spec": after})) is granted


def test_each_component_carries_authors_only_onto_the_kinds_it_writes() -> None:
    trusted = TrustedComponents(api=["api"], worker=["worker"], bridge=["bridge"])
    assert [p for p in authorship.AUTHORED if trusted.may_carry("api", p)] == ["agentruns", "sympoziumschedules"]
    assert [p for p in authorship.AUTHORED if trusted.may_carry("worker", p)] == ["agentruns"]
    assert [p for p in authorship.AUTHORED if trusted.may_carry("bridge", p)] == ["agents", "sympoziumschedules"]
    assert not any(trusted.may_carry("alice", p) for p in authorship.AUTHORED)
