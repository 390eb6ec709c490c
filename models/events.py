"""Run events (SPEC §5): what the workflow emits, each with a stable message ID.

The workflow builds each `RunEvent` itself (its own counter `seq`, its own clock), so the message
ID `<workflow_id>/<topic>/<seq>` is the same on every retry, and JetStream's de-duplication stores
it once. activities/events.py publishes them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

SUBJECT_PREFIX = "sympozium"

Topic = Literal["agent.run.started", "agent.run.phase", "agent.run.gate.pending", "agent.run.gate.refused",
                "agent.run.completed", "agent.run.failed", "agent.run.tool.pending", "agent.run.tool.decided",
                "agent.run.tool.refused"]
# An event's data values: text and numbers, and for agent.run.tool.pending the calls ({id, tool, argumentsSha256}).
EventValue = str | int | None | list[dict[str, str]]


class RunEvent(BaseModel):
    """One event of one run, as the workflow hands it to the publish activity."""

    topic: Topic
    run_name: str
    namespace: str
    instance_name: str
    workflow_id: str
    seq: int
    timestamp: str
    data: dict[str, EventValue]

    @property
    def subject(self) -> str:
        return f"{SUBJECT_PREFIX}.{self.topic}"

    @property
    def message_id(self) -> str:
        return f"{self.workflow_id}/{self.topic}/{self.seq}"

    def envelope(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "timestamp": self.timestamp,
            "metadata": {"agentRunID": self.run_name, "instanceName": self.instance_name,
                         "namespace": self.namespace},
            "data": dict(self.data),
        }
