"""A run's free text is bounded (models/bounds.py, issue 27 hole 6): in UTF-8 bytes when it resolves (the admission
webhook and the workflow's first step), in characters by the CRDs' maxLength, and as a whole resolved run."""

from __future__ import annotations

from typing import Any

import pytest

from models import bounds
from models.agent import normalize_agent
from models.bounds import Uncarriable
from models.crds import all_crds
from models.resolve import check_agent_bounds, resolve_run
from models.skills import resolve_skills

AGENT = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {}})


def run(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r1", "namespace": "ns", "uid": "u1"},
            "spec": {"agentRef": "helper", "task": "hello", **spec}}


def refusal(obj: dict[str, Any], agent: Any = AGENT) -> Uncarriable:
    with pytest.raises(Uncarriable) as e:
        resolve_run(obj, agent, default_image="agent:1")
    return e.value


def test_a_task_is_bounded_in_utf8_bytes_naming_the_field() -> None:
    at_bound = "x" * bounds.TASK_MAX_BYTES
    assert resolve_run(run(task=at_bound), AGENT, default_image="agent:1").task == at_bound
    e = refusal(run(task=at_bound + "x"))
    assert e.field == "spec.task"
    assert str(e).startswith(f"spec.task: at most {bounds.TASK_MAX_BYTES} bytes (UTF-8), got "
                             f"{bounds.TASK_MAX_BYTES + 1}")
    # Fewer characters than the bound, more bytes: the CRD's maxLength lets it through, resolution does not.
    wide = "é" * (bounds.TASK_MAX_BYTES // 2 + 1)
    assert len(wide) < bounds.TASK_MAX_BYTES
    older_name = {"metadata": {"name": "r1", "namespace": "ns"}, "spec": {"agentRef": "helper", "input": wide}}
    assert refusal(older_name).field == "spec.task"


def test_text_that_is_not_unicode_is_refused_naming_the_field() -> None:
    e = refusal(run(task="half a pair: \udc80"))
    assert str(e) == "spec.task: is not Unicode text: a lone surrogate at character 13"


def test_the_system_prompt_is_bounded_where_it_was_written() -> None:
    long = "p" * (bounds.SYSTEM_PROMPT_MAX_BYTES + 1)
    assert refusal(run(systemPrompt=long)).field == "spec.systemPrompt"
    agent = normalize_agent({"metadata": {"name": "helper"}, "spec": {"systemPrompt": long}})
    assert refusal(run(), agent).field == "agent spec.systemPrompt"
    with pytest.raises(Uncarriable) as e:
        check_agent_bounds(agent)
    assert e.value.field == "spec.systemPrompt"


def test_env_values_and_whole_env_maps_are_bounded() -> None:
    big = "v" * (bounds.ENV_VALUE_MAX_BYTES + 1)
    e = refusal(run(env={"OK": "1", "BIG": big}))
    assert e.field == "spec.env.BIG" and "one NAME=value string" in str(e)
    many = {f"K{i:03d}": "v" * bounds.ENV_VALUE_MAX_BYTES for i in range(bounds.ENV_MAX_BYTES
                                                                       // bounds.ENV_VALUE_MAX_BYTES)}
    e = refusal(run(env=many))
    assert e.field == "spec.env" and "for all its names and values together" in str(e)
    agent = normalize_agent({"metadata": {"name": "helper"}, "spec": {"agents": {"default": {"env": {"BIG": big}}}}})
    assert refusal(run(), agent).field == "agent spec.agents.default.env.BIG"


def test_hook_commands_args_and_env_values_are_bounded() -> None:
    arg = "a" * (bounds.ARG_MAX_BYTES + 1)
    hook: dict[str, Any] = {"name": "h", "image": "busybox", "command": ["sh", "-c"], "args": ["ok", arg]}
    assert refusal(run(lifecycle={"postRun": [hook]})).field == "spec.lifecycle.postRun[0].args[1]"
    hook = {"name": "h", "image": "busybox", "args": ["a" * bounds.ARG_MAX_BYTES] * 8}
    e = refusal(run(lifecycle={"preRun": [hook]}))
    assert e.field == "spec.lifecycle.preRun[0].command" and "command and args together" in str(e)
    hook = {"name": "h", "image": "busybox", "env": [{"name": "V", "value": "v" * (bounds.ENV_VALUE_MAX_BYTES + 1)}]}
    assert refusal(run(lifecycle={"preRun": [hook]})).field == "spec.lifecycle.preRun[0].env[0].value"
    agent = normalize_agent({"metadata": {"name": "helper"}, "spec": {"agents": {"default": {"lifecycle": {
        "postRun": [{"name": "h", "image": "i", "command": [arg]}]}}}}})
    with pytest.raises(Uncarriable) as ae:
        check_agent_bounds(agent)
    assert ae.value.field == "spec.agents.default.lifecycle.postRun[0].command[0]"


def test_short_fields_are_bounded_too() -> None:
    long = "m" * (bounds.SHORT_TEXT_MAX_BYTES + 1)
    assert refusal(run(model={"baseURL": long})).field == "spec.model.baseURL"
    assert refusal(run(sessionKey=long)).field == "spec.sessionKey"
    assert refusal(run(toolPolicy={"allow": ["ok", long]})).field == "spec.toolPolicy.allow[1]"


def test_the_whole_resolved_run_is_bounded_whatever_adds_up() -> None:
    """Fields each within bounds can add up: with its SkillPacks' sidecars the run is checked as one JSON."""
    resolved = resolve_run(run(task="t" * bounds.TASK_MAX_BYTES, systemPrompt="s" * bounds.SYSTEM_PROMPT_MAX_BYTES,
                               skills=[f"pack{i}" for i in range(4)]), AGENT, default_image="agent:1")
    bounds.check_resolved_size(resolved)  # task and prompt alone fit
    env = [{"name": f"V{j}", "value": "v" * bounds.ENV_VALUE_MAX_BYTES} for j in range(7)]
    packs: dict[str, dict[str, object]] = {f"pack{i}": {"spec": {"skills": [], "sidecar": {"image": "tools", "env": env}}}
                                           for i in range(4)}
    resolved.skill_packs = resolve_skills(resolved.skills, packs, field="spec.skills")
    with pytest.raises(Uncarriable) as e:
        bounds.check_resolved_size(resolved)
    assert e.value.field == "spec" and f"at most {bounds.RESOLVED_RUN_MAX_BYTES}" in str(e.value)


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def test_the_crds_carry_the_bounds_as_max_length() -> None:
    run_spec = _schema(all_crds()["agentruns.yaml"])["properties"]
    assert run_spec["task"]["maxLength"] == run_spec["input"]["maxLength"] == bounds.TASK_MAX_BYTES
    assert run_spec["systemPrompt"]["maxLength"] == bounds.SYSTEM_PROMPT_MAX_BYTES
    assert run_spec["env"]["additionalProperties"]["maxLength"] == bounds.ENV_VALUE_MAX_BYTES
    hook = run_spec["lifecycle"]["properties"]["postRun"]["items"]["properties"]
    assert hook["command"]["items"]["maxLength"] == hook["args"]["items"]["maxLength"] == bounds.ARG_MAX_BYTES
    assert hook["env"]["items"]["properties"]["value"]["maxLength"] == bounds.ENV_VALUE_MAX_BYTES
    assert run_spec["model"]["properties"]["baseURL"]["maxLength"] == bounds.SHORT_TEXT_MAX_BYTES
    schedule = _schema(all_crds()["sympoziumschedules.yaml"])["properties"]
    assert schedule["task"]["maxLength"] == schedule["input"]["maxLength"] == bounds.TASK_MAX_BYTES
    agent = _schema(all_crds()["agents.yaml"])["properties"]
    assert agent["systemPrompt"]["maxLength"] == bounds.SYSTEM_PROMPT_MAX_BYTES


def test_the_bounds_fit_the_limits_they_exist_for() -> None:
    """Temporal's 2 MB payload with room for JSON escapes; the kernel's 128 KiB per env string."""
    assert bounds.RESOLVED_RUN_MAX_BYTES <= 2 * 1024 * 1024 // 2  # limit.blobSize.error
    assert bounds.TASK_MAX_BYTES + bounds.SYSTEM_PROMPT_MAX_BYTES + bounds.ENV_MAX_BYTES < bounds.RESOLVED_RUN_MAX_BYTES
    max_arg_strlen = 32 * 4096
    for value in (bounds.ENV_VALUE_MAX_BYTES, bounds.ENV_TEXT_MAX_BYTES, bounds.ARG_MAX_BYTES):
        assert value + bounds.SHORT_TEXT_MAX_BYTES + 2 < max_arg_strlen
