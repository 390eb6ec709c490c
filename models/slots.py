"""maxConcurrent: runs of one Agent share a fixed number of slots (SympoziumPolicy `subagentPolicy`).

A run over the limit waits for a slot, durably and in creation order, instead of failing. The
slots of one Agent are held by one `AgentSlotsWorkflow` (workflows/agent_slots.py); these are the
typed messages between it and the runs. The names of its workflow type, update and signals are
constants here, so the activity that starts it and the run workflow that it signals need not
import each other.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .base import FieldProblem
from .policy import PolicyRules

SLOTS_WORKFLOW = "AgentSlotsWorkflow"
ACQUIRE_UPDATE = "acquire"
RELEASE_SIGNAL = "release"
# The signal a run workflow receives with its place in the queue, or its slot.
SLOT_SIGNAL = "slot"
INVALID_SLOT_REQUEST = "InvalidSlotRequest"


def slots_workflow_id(namespace: str, agent: str) -> str:
    """One semaphore per Agent: every run of the Agent, whoever created it, meets the same queue."""
    return f"agentslots/{namespace}/{agent}"


class SlotLimit(BaseModel):
    """The Agent's limit as its policy said when the run was resolved, and the run's place in line."""

    limit: int
    policy: str = ""
    created_at: str = ""  # the run object's creationTimestamp


def slot_limit(policy: PolicyRules | None, *, created_at: str = "") -> SlotLimit | None:
    """The limit a run must respect, if its Agent's policy sets one; raises FieldProblem if it is nonsense.

    Zero means "not set", as it does for the Go zero value in Sympozium's own types."""
    if policy is None or not policy.max_concurrent:
        return None
    if policy.max_concurrent < 0:
        raise FieldProblem(f'SympoziumPolicy "{policy.name}" spec.subagentPolicy.maxConcurrent',
                           f"must be a positive number of concurrent runs, got {policy.max_concurrent}")
    return SlotLimit(limit=policy.max_concurrent, policy=policy.name, created_at=created_at)


class SlotRequest(BaseModel):
    """A run asks for a slot (the `acquire` update); asking again is harmless and tells the same thing."""

    namespace: str
    agent: str
    workflow_id: str
    run_name: str
    # The run object's creationTimestamp: waiters are served in creation order, arrival order within a second.
    created_at: str = ""
    limit: int
    policy: str = ""
    # How often the slots workflow looks for holders that ended without giving their slot back.
    check_seconds: int = 60


class SlotNotice(BaseModel):
    """The answer to a request, and the `slot` signal a waiting run receives later.

    `seq` orders notices: a run keeps only the newest, and a granted slot is never taken back."""

    seq: int
    granted: bool
    position: int = 0  # 1 = next in line; 0 once granted
    limit: int
    in_use: int = 0


class SlotRelease(BaseModel):
    """A run gives its slot back (or leaves the queue): sent once, from its cleanup."""

    workflow_id: str


class SlotEntry(BaseModel):
    workflow_id: str
    run_name: str
    created_at: str = ""
    arrival: int = 0


class SlotsState(BaseModel):
    """Everything the slots workflow knows; carried across continue-as-new."""

    namespace: str
    agent: str
    limit: int = 1
    policy: str = ""
    check_seconds: int = 60
    holders: list[SlotEntry] = Field(default_factory=list)
    queue: list[SlotEntry] = Field(default_factory=list)
    arrivals: int = 0
    seq: int = 0
    # The last position each waiter was told, so only changes are sent.
    told: dict[str, int] = Field(default_factory=dict)
    # Notices not yet delivered (by target workflow ID); a newer one replaces an older one.
    outbox: dict[str, SlotNotice] = Field(default_factory=dict)
    # History events after which the workflow continues as new; tests lower it.
    max_history_events: int = 2000
    # How long it lingers with nobody holding or waiting before it ends; None: workflows/policies.py.
    idle_seconds: int | None = None


class SlotCheck(BaseModel):
    workflow_ids: list[str]


class SlotCheckResult(BaseModel):
    """Which of the checked workflows are no longer running (or never existed)."""

    closed: list[str] = Field(default_factory=list)
