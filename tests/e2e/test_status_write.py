"""A status write needs no read first, yet never lands on another object of the same name."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from activities.kube import RUN_GONE, KubeActivities
from models.agentrun import AgentRunStatus, Condition
from models.resolve import RunRef
from models.run import StatusUpdate
from tests.e2e.conftest import Stack, agent_run


async def test_a_status_write_carries_the_uid_as_a_precondition(stack: Stack, namespace: str) -> None:
    made = stack.create(namespace, "agentruns", agent_run("w", agent_ref="nobody"))  # fails at once: no such Agent
    stack.wait_phase(namespace, "w")
    acts = KubeActivities(stack.api, default_image="agent:dev")
    ours = RunRef(namespace=namespace, name="w", uid=made["metadata"]["uid"])
    cond = Condition(type="Checked", status="True", reason="ByTest", message="written without a read")
    await acts._write_status(ours, StatusUpdate(status=AgentRunStatus(error="rewritten"), conditions=[cond]))
    status = (stack.get_run(namespace, "w") or {})["status"]
    assert status["error"] == "rewritten" and status["phase"] == "Failed", "fields not named are left alone"
    assert [c["type"] for c in status["conditions"]] == ["Checked"], "the workflow's list replaces the list"

    stranger = ours.model_copy(update={"uid": "0000-not-this-object"})
    with pytest.raises(ApplicationError) as e:
        await acts._write_status(stranger, StatusUpdate(status=AgentRunStatus(error="not mine")))
    assert e.value.type == RUN_GONE and e.value.non_retryable
    assert (stack.get_run(namespace, "w") or {})["status"]["error"] == "rewritten"

    gone = ours.model_copy(update={"name": "never-made"})
    with pytest.raises(ApplicationError) as e:
        await acts._write_status(gone, StatusUpdate(status=AgentRunStatus(error="x")))
    assert e.value.type == RUN_GONE
