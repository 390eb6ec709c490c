"""The names of a run's artefacts: deterministic, within Kubernetes' limits, and reversible where read back."""

from __future__ import annotations

import pytest

from models.names import Component, agent_job_of, hook_container, hook_of, job_name, lifecycle_subject


@pytest.mark.parametrize(("component", "container"), [("prerun", "pre-fetch-data"), ("post-run", "post-fetch-data")])
def test_a_hook_container_names_its_hook_and_back(component: Component, container: str) -> None:
    assert hook_container(component, "fetch-data") == container
    assert hook_of(container) == "fetch-data"


def test_containers_that_run_no_hook_keep_their_names() -> None:
    assert hook_of("setup") == "setup" and hook_of("agent") == "agent" and hook_of("ipc-bridge") == "ipc-bridge"


def test_job_names_of_a_long_run_stay_distinct_and_within_63() -> None:
    run = "a" * 63
    names = {c: job_name(run, c) for c in ("prerun", "agent-run", "post-run")}
    assert len(set(names.values())) == 3
    assert all(len(n) <= 63 for n in names.values())
    assert names["prerun"].endswith("-prerun") and names["post-run"].endswith("-postrun")
    assert job_name("short", "agent-run") == "short" and job_name("short", "prerun") == "short-prerun"


def test_the_lifecycle_account_is_named_as_kubernetes_names_its_user() -> None:
    assert lifecycle_subject("ns", "r") == "system:serviceaccount:ns:sympozium-lifecycle-r"


def test_an_agent_started_again_runs_in_jobs_of_its_own_per_attempt_and_restart() -> None:
    assert job_name("r", "agent-run", 1, 1) == "r-restart1"
    assert job_name("r", "agent-run", 2, 2) == "r-try2-restart2"
    long = {job_name("b" * 63, "agent-run", a, r) for a in (1, 2) for r in (0, 1, 2)}
    assert len(long) == 6 and all(len(n) <= 63 for n in long)


def test_the_agents_log_is_the_restarted_jobs_for_the_last_attempt_and_the_first_jobs_before() -> None:
    run = {"metadata": {"name": "r"}, "status": {"attempt": 2, "jobName": "r-try2-restart1", "agentRestarts": 1}}
    assert agent_job_of(run, 2) == "r-try2-restart1"
    assert agent_job_of(run, 1) == "r"
    assert agent_job_of({"metadata": {"name": "r"}, "status": {"jobName": "r"}}, 1) == "r"
    assert agent_job_of({"metadata": {"name": "r"}}, 1) == "r", "a run that has not started yet"
