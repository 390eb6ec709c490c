"""Who may give a gate's verdict (SPEC §4: authentic verdicts, separation of duties).

The API keeps two of the doors a verdict comes through: the admission webhook, which sees every write of the
`sympozium.ai/gate-verdict` annotation with the writer's Kubernetes identity (`api/admission.py`), and
`POST /api/v1/runs/{name}/gate-verdict`, which knows the caller by its bearer token (`api/main.py`). Both ask the
same question here — what does the run's Agent's policy say in `gatePolicy`, and who created the run — so the two
doors refuse the same people. The annotation door also asks who wrote the gate hook (`status.lifecycleAuthor`): under
approvers, a hook its run's creator wrote is that creator approving their own run. A refused verdict never reaches the workflow, so it is recorded here: a Warning
Event `VerdictRefused` on the run naming who and why, a log line, and the API's metric.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kube import Kube, KubeError
from models.agent import normalize_agent
from models.base import FieldProblem
from models.evaluate import Reader, agent_name_of, read_agent, read_policy
from models.names import (
    ANNOTATION_CREATED_BY,
    API_VERSION,
    REASON_VERDICT_REFUSED,
    lifecycle_subject,
)
from models.policy import GatePolicy, Refusal, normalize_policy

log = logging.getLogger("agentrun.api.authority")
RULE_GATE_HOOK_OR_APPROVER = "gate-hook-or-approver"
RULE_CREATORS_GATE_HOOK = "creators-gate-hook"
RULE_RUN_IDENTITY = "run-identity"
RULE_TOOL_APPROVER = "tool-approver"
# The ServiceAccounts agentrun runs pods as (the agent's, the hooks' sympozium-lifecycle-<run>, a SkillPack sidecar's
# sympozium-skill-<pack>-<run>): what runs execute never decides a tool call, theirs or another run's (SPEC §10).
RUN_ACCOUNT_PREFIX = "sympozium-"
# Recording a refusal must never hold up the answer for long (the apiserver waits on the webhook).
EVENT_TIMEOUT_SECONDS = 3.0


class Unreadable(Exception):
    """The Agent or policy could not be read (or the policy is invalid), so the run cannot be checked."""


@dataclass(frozen=True)
class GateAuthority:
    """The `gatePolicy` of a run's Agent's policy (empty when there is no policy), who created the run, and who wrote
    the lifecycle hooks it executes (`status.lifecycleAuthor`, recorded by the worker when the run started)."""

    policy: str
    gate: GatePolicy
    creator: str | None
    hook_author: str | None = None

    def refusal(self, identity: str, groups: list[str] | tuple[str, ...] = ()) -> Refusal | None:
        """Why `identity` may not decide through the API; None: it may."""
        return self.gate.refusal(identity, groups, creator=self.creator, policy=self.policy)

    def annotation_refusal(self, identity: str, groups: list[str] | tuple[str, ...], *, namespace: str,
                           run: str) -> Refusal | None:
        """Why `identity` may not write the run's verdict annotation: only the run's gate hook (its lifecycle
        ServiceAccount) or an approver of the policy may; None: it may. Under a policy with approvers, the gate hook
        decides only if someone other than the run's creator wrote it (SPEC §4): a verdict's authority comes from who
        wrote the code that gave it, and a creator's own hook would be the creator approving their own run."""
        hook = lifecycle_subject(namespace, run)
        if identity == hook:
            return self._hook_refusal(hook)
        if not self.gate.approvers:
            where = f'policy "{self.policy}"' if self.policy else "the run's Agent, which has no policy"
            return Refusal(RULE_GATE_HOOK_OR_APPROVER,
                           f'"{identity}" may not give this run\'s verdict by annotation: only its gate hook ({hook}) '
                           f"or an approver named in gatePolicy.approvers may, and {where} names none")
        return self.refusal(identity, groups)

    def tool_refusal(self, identity: str, groups: list[str] | tuple[str, ...] = ()) -> Refusal | None:
        """Why `identity` may not decide this run's tool calls (SPEC §10), by any door; None: it may (RBAC's `approve`
        is asked before, by the door). Never one of the accounts runs execute as: a hook, a sidecar or an agent
        deciding what an agent does would be the run approving itself; then the policy's gatePolicy."""
        account = identity.removeprefix("system:serviceaccount:")
        if account != identity and account.partition(":")[2].startswith(RUN_ACCOUNT_PREFIX):
            return Refusal(RULE_RUN_IDENTITY, f'"{identity}" may not decide tool calls: it is an account agentrun runs '
                                              "pods as (an agent, a lifecycle hook or a SkillPack sidecar), and what "
                                              "a run executes never approves what an agent does")
        return self.gate.refusal(identity, groups, creator=self.creator, policy=self.policy,
                                 what="this run's tool calls", its="its tool calls")

    def _hook_refusal(self, hook: str) -> Refusal | None:
        if not self.gate.approvers:
            return None
        policy = f'policy "{self.policy}"'
        if self.hook_author is None or self.creator is None:
            why = ("who wrote its hooks was not recorded when the run started (an Agent written without the "
                   "admission webhooks, or a run started before they recorded it)" if self.hook_author is None
                   else "who created the run is not recorded")
        elif self.hook_author == self.creator:
            why = f'its hooks were written by "{self.creator}", who created the run'
        else:
            return None
        return Refusal(RULE_CREATORS_GATE_HOOK,
                       f"the run's gate hook ({hook}) may not decide it under {policy}, which names approvers: {why}; "
                       "only a gate hook from the Agent, written by someone other than the run's creator, may decide "
                       "(or an approver in gatePolicy.approvers)")


def creator_of(run: dict[str, Any]) -> str | None:
    notes = (run.get("metadata") or {}).get("annotations") or {}
    who = notes.get(ANNOTATION_CREATED_BY)
    return who if isinstance(who, str) and who else None


async def gate_authority(read: Reader, run: dict[str, Any]) -> GateAuthority:
    """The run's gate authority. No Agent, or an Agent without a policy: no gatePolicy (the run cannot have
    started a gate anyway); a policy that cannot be read or parsed: `Unreadable` (fail closed)."""
    hook_author = (run.get("status") or {}).get("lifecycleAuthor")
    none = GateAuthority("", GatePolicy(), creator_of(run), hook_author if isinstance(hook_author, str) else None)
    name = agent_name_of(run)
    agent = await read_agent(read, name) if name else None
    if agent is None:
        return none
    try:
        ref = normalize_agent(agent).policy_ref
    except FieldProblem:
        return none
    if not ref:
        return none
    policy = await read_policy(read, ref)
    if policy is None:
        return none
    try:
        rules = normalize_policy(policy)
    except FieldProblem as e:
        raise Unreadable(f'SympoziumPolicy "{ref}" is invalid: {e}') from None
    return GateAuthority(rules.name or ref, rules.gate, none.creator, none.hook_author)


REPORTING_INSTANCE = f"{socket.gethostname()}-{os.getpid()}"


async def record_refusal(kube: Kube, *, namespace: str, run: dict[str, Any], who: str, refusal: Refusal,
                         via: str, what: str = "verdict") -> None:
    """A Warning Event `VerdictRefused` on the run naming who and why (`what`: a verdict, or a tool decision), and a
    log line. Failing to write the Event is logged, never raised: the refusal itself stands."""
    meta = run.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    message = f"{what} from {who} refused ({via}): {refusal.message}"
    log.warning("AgentRun %s/%s: %s", namespace, name, message)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    involved = {"apiVersion": API_VERSION, "kind": "AgentRun", "namespace": namespace, "name": name}
    if meta.get("uid"):
        involved["uid"] = str(meta["uid"])
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"generateName": f"{name or 'agentrun'}.", "namespace": namespace},
             "involvedObject": involved, "reason": REASON_VERDICT_REFUSED, "message": message[:1024],
             "type": "Warning", "source": {"component": "agentrun-api"}, "reportingComponent": "agentrun-api",
             "reportingInstance": REPORTING_INSTANCE, "firstTimestamp": now, "lastTimestamp": now, "count": 1}
    try:
        async with asyncio.timeout(EVENT_TIMEOUT_SECONDS):
            await kube.call(kube.core.create_namespaced_event, namespace, event,
                            action=f"record a VerdictRefused Event on AgentRun {namespace}/{name}")
    except (KubeError, TimeoutError) as e:
        log.warning("could not record the refused verdict on AgentRun %s/%s as an Event: %s", namespace, name, e)
