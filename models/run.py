"""The vocabulary and the boundary types of AgentRunWorkflow (SPEC §3): phases, condition types and
reasons as `StrEnum`s, what the `status` query and the workflow's result say, and the input and
result of each of its steps (activities). Everything that crosses the workflow boundary is one of
these or a model they name, never a loose dict.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from .agentrun import AgentRunStatus, Condition
from .resolve import RunRef


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    POST_RUNNING = "PostRunning"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SKIPPED = "Skipped"
    DELETED = "Deleted"  # the workflow's own result only: the object was gone before the run started


class ConditionType(StrEnum):
    VALIDATED = "Validated"
    QUEUED = "Queued"
    POST_RUN_FAILED = "PostRunFailed"
    GATE_RESOLVED = "GateResolved"
    STEP_FAILED = "StepFailed"
    RESULT_CUT = "ResultCut"
    VERDICT_REFUSED = "VerdictRefused"  # the last verdict the gate refused, and who sent it
    FIELDS_IGNORED = "FieldsIgnored"  # Sympozium fields the run asks for that have no effect here (models/compat.py)
    SUB_AGENT = "SubAgent"  # a sub-agent run: which run it is a sub-agent of (the parent lists it in delegates)
    # The agent's pod was lost before it reported a result (deleted, evicted, its node gone), and the agent was
    # started again to continue from its journal: which pod, why, and how often (status.agentRestarts).
    AGENT_RESTARTED = "AgentRestarted"
    # A SkillPack's sidecar has no command: it runs the executor alone, not its image's entrypoint.
    ENTRYPOINT_NOT_RUN = "EntrypointNotRun"
    # Tool calls wait for a person's decision with no pod of the run (SPEC §10): True while they wait (which calls,
    # since when, until when), False once the round is decided.
    AWAITING_TOOL_APPROVAL = "AwaitingToolApproval"
    TOOL_DECISION_REFUSED = "ToolDecisionRefused"  # the last tool decision refused, and who sent it


class Reason(StrEnum):
    INVALID_SPEC = "InvalidSpec"
    MAX_CONCURRENT = "MaxConcurrent"
    SLOT_GRANTED = "SlotGranted"
    POST_RUN_JOB_FAILED = "PostRunJobFailed"
    RESULT_TOO_LARGE = "ResultTooLarge"
    NO_EFFECT_HERE = "NoEffectHere"
    PARENT_RUN = "ParentRun"
    POD_LOST = "PodLost"
    NO_COMMAND = "NoCommand"
    # Why a verdict was refused (VerdictRefused's reason).
    NO_GATE = "NoGate"
    NO_GATE_WAITING = "NoGateWaiting"
    OLDER_THAN_GATE = "OlderThanGate"
    ALREADY_DECIDED = "AlreadyDecided"
    RUN_FINISHED = "RunFinished"
    # AwaitingToolApproval's reasons, and why a tool decision was refused (ToolDecisionRefused's reason).
    CALLS_PENDING = "CallsPending"
    CALLS_DECIDED = "CallsDecided"
    NO_CALL_PENDING = "NoCallPending"
    UNKNOWN_CALL = "UnknownCall"
    OTHER_ARGUMENTS = "OtherArguments"
    OLDER_THAN_WAIT = "OlderThanWait"
    UNVERIFIED_WRITER = "UnverifiedWriter"
    BAD_DECISION = "BadDecision"


class FailureReason(StrEnum):
    """agent.run.failed's `reason`, in the spirit of Sympozium's classifyFailureReason."""

    TIMEOUT = "timeout"
    OOM = "oom"
    POLICY = "policy"
    TOKEN_BUDGET = "token_budget"
    LLM_ERROR = "llm_error"
    HOOK_FAILED = "hook_failed"
    INVALID_SPEC = "invalid_spec"
    POD_LOST = "pod_lost"  # the agent's pod was lost more often than it may be started again
    OTHER = "other"

    @classmethod
    def of_agent(cls, exit_code: int, error: str, *, lost: str = "") -> FailureReason:
        """Why the agent failed: its pod lost (and not started again), its exit code where that tells (124 ours, 137
        the kernel's), else its own words."""
        if lost:
            return cls.POD_LOST
        if exit_code == 124:
            return cls.TIMEOUT
        if exit_code == 137:
            return cls.OOM
        text = error.lower()
        for needles, reason in ((("429", "quota", "rate limit"), cls.TOKEN_BUDGET),
                                (("timeout", "timed out"), cls.TIMEOUT),
                                (("http", "api error", "model"), cls.LLM_ERROR)):
            if any(n in text for n in needles):
                return reason
        return cls.OTHER


class Stopped(StrEnum):
    """Why the workflow stopped a Job before it finished (JobState.reason)."""

    HOOK_TIMEOUT = "HookTimeout"
    DEADLINE = "WorkflowDeadline"
    VERDICT = "StoppedForVerdict"
    GATE_TIMEOUT = "GateTimeout"  # the gate hook still ran when gateTimeout expired


class RunState(BaseModel):
    """What the `status` query answers: the run as the workflow sees it right now."""

    phase: str = Phase.PENDING
    step: str = "starting"
    agent: str = ""
    jobs: dict[str, str] = {}
    result: str | None = None
    error: str | None = None


class RunResult(BaseModel):
    phase: str
    result: str | None = None
    error: str | None = None


class StatusUpdate(BaseModel):
    """One status write that needs no read first: the fields to set, and the run's whole condition list
    (the workflow is the only writer of an AgentRun's conditions and knows every one it wrote)."""

    status: AgentRunStatus = Field(default_factory=AgentRunStatus)
    conditions: list[Condition] | None = None  # None: leave the conditions as they are


def workflow_id(ref: RunRef) -> str:
    """Derived from the run, so a run is never executed twice and a recreated name is a new run."""
    return f"agentrun/{ref.namespace}/{ref.name}/{ref.uid}"
