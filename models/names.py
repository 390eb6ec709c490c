"""The names of everything agentrun reads or makes in a cluster, in one place.

The API group and plurals it watches, the labels, annotations and finalizers it sets, and the
deterministic names of a run's artefacts (Jobs, hook containers, RBAC, workspace), so the worker
that makes them, the bridge that watches them, and the API and CLI that show them agree.
"""

from __future__ import annotations

import hashlib
from typing import Literal

GROUP = "sympozium.ai"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

AGENTRUNS = "agentruns"
AGENTS = "agents"
POLICIES = "sympoziumpolicies"
SCHEDULES = "sympoziumschedules"

LABEL_RUN = "sympozium.ai/agent-run"
# On a run's objects (not its pods): the uid of the AgentRun that made them, so one request can remove
# exactly that run's Jobs (a later run of the same name has another uid).
LABEL_RUN_UID = "agentrun.dev/run-uid"
# On a run's cluster-scoped objects (a SkillPack sidecar's per-run ClusterRole and binding): the run's namespace.
LABEL_RUN_NAMESPACE = "agentrun.dev/run-namespace"
LABEL_INSTANCE = "sympozium.ai/instance"
LABEL_PARENT_RUN = "sympozium.ai/parent-run"  # a sub-agent run's parent run, as Sympozium labels it
LABEL_COMPONENT = "sympozium.ai/component"
LABEL_SCHEDULE = "sympozium.ai/schedule"
LABEL_TYPE = "sympozium.ai/type"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
MANAGED_BY = "agentrun"

ANNOTATION_WORKFLOW = "agentrun.dev/workflow-id"
# Who created the run: stamped by the mutating admission webhook (the requesting user), or carried by the control
# plane component that creates it for someone (the API its caller, the worker a schedule's author; models/authorship.py,
# which also holds its groups' annotation). No one may change it later.
ANNOTATION_CREATED_BY = "agentrun.dev/created-by"
ANNOTATION_TICK = "agentrun.dev/tick-workflow"
ANNOTATION_TICK_TIME = "agentrun.dev/tick-time"
# On a gate's Job: the run's resourceVersion when its gate started (annotation verdicts older than that are refused).
ANNOTATION_GATE_FROM = "agentrun.dev/gate-from-version"
# The W3C traceparent of the trace a run belongs to (Sympozium's annotation): the API writes it when it creates a run,
# and the bridge continues that trace when it starts the run's workflow (models/tracecontext.py).
ANNOTATION_TRACEPARENT = "otel.dev/traceparent"

# decidedBy of an annotation verdict whose writer no admission webhook vouched for (SPEC §4).
UNVERIFIED = "unverified"
# The Event reason of a verdict refused before it reached the workflow (at admission, or by the API's gatePolicy
# check); the workflow records the ones it refuses in the run's VerdictRefused condition.
REASON_VERDICT_REFUSED = "VerdictRefused"
# The admission webhooks' paths on the API's webhook listener, and the name of the MutatingWebhookConfiguration
# whose presence tells the bridge that `gate-verdict-by` is stamped by the webhook (chart: <release>-agentruns).
ADMISSION_VALIDATE_PATH = "/admission/agentruns"
ADMISSION_MUTATE_PATH = "/admission/agentruns/mutate"
WEBHOOK_CONFIGURATION = "agentrun-agentruns"
# The validating webhook for Agents (and SympoziumInstances): their lifecycle defaults grant their runs' hooks RBAC,
# so whoever sets them must hold it (api/escalation.py); registered as a configuration of its own, `<name>-agents`.
ADMISSION_AGENTS_PATH = "/admission/agents"
# The validating webhook for the kinds agentrun stores but acts on only in part (SkillPacks, PersonaPacks, Ensembles,
# Models): it refuses nothing and only warns (kubectl prints `Warning: ...`) of the fields without effect here; a
# second webhook of the `<name>-agents` configuration, always failurePolicy Ignore.
ADMISSION_DEFINITIONS_PATH = "/admission/definitions"
DEFINITION_KINDS = {"skillpacks": "SkillPack", "personapacks": "PersonaPack", "ensembles": "Ensemble",
                    "models": "Model"}
# Who wrote what is handed to runs (api/grants.py, models/authorship.py): the mutating webhook that stamps the author
# of Agents, SkillPacks, schedules and packs, and the validating ones that check a SkillPack's or pack's grants and
# Secrets, and what a schedule's runs will inherit, against that author (Agents: ADMISSION_AGENTS_PATH).
ADMISSION_AUTHORS_MUTATE_PATH = "/admission/authors/mutate"
ADMISSION_PACKS_PATH = "/admission/packs"
ADMISSION_SCHEDULES_PATH = "/admission/schedules"

# The run's finalizer: the worker removes it once the run's objects are cleaned up.
RUN_FINALIZER = "agentrun.dev/cleanup"
# A schedule's finalizer: the bridge removes it once the Temporal Schedule is deleted.
SCHEDULE_FINALIZER = "agentrun.dev/schedule"

AGENT_SERVICE_ACCOUNT = "sympozium-agent"
MAX_LABEL_VALUE = 63  # also a Job's name limit: it becomes the pods' job-name label

# A run's Jobs: preRun hooks, the agent, postRun hooks (with a gate: the gate hook alone), and with a gate
# the other postRun hooks once the gate is resolved ("post-gate", labelled post-run like Sympozium's).
Component = Literal["prerun", "agent-run", "post-run", "post-gate"]
_JOB_SUFFIX: dict[str, str] = {"prerun": "-prerun", "agent-run": "", "post-run": "-postrun",
                               "post-gate": "-postgate"}
_CONTAINER_PREFIX: dict[str, str] = {"prerun": "pre", "post-run": "post", "post-gate": "post"}
_COMPONENT_LABEL: dict[str, str] = {"post-gate": "post-run"}


def lifecycle_name(run: str) -> str:
    """The ServiceAccount, Role and RoleBinding of a run's lifecycle hooks."""
    return f"sympozium-lifecycle-{run}"


def lifecycle_subject(namespace: str, run: str) -> str:
    """The user name Kubernetes gives the lifecycle ServiceAccount (who a gate hook's verdict comes from)."""
    return f"system:serviceaccount:{namespace}:{lifecycle_name(run)}"


def workspace_name(run: str) -> str:
    return f"{run}-workspace"


def input_name(run: str) -> str:
    """The Secret holding a run's task or system prompt too long for an env var (Sympozium's `<run>-input`
    ConfigMap, as a Secret: a task may be as confidential as the run's result, and the worker may create Secrets but
    never read them). Prefixed like the lifecycle account, so the worker may replace one of that name as its own."""
    return f"sympozium-input-{run}"


def component_label(component: str) -> str:
    """The `sympozium.ai/component` label of a Job of `component` (`prerun`, `agent-run` or `post-run`)."""
    return _COMPONENT_LABEL.get(component, component)


def job_name(run: str, component: Component, attempt: int = 1, restart: int = 0, resumed: int = 0) -> str:
    """`<run>`, `<run>-prerun`, `<run>-postrun`, `<run>-postgate`; from a retried run's second attempt on,
    its agent and gate Jobs are `<run>-try<N>` and `<run>-try<N>-postrun`; an agent started again after its pod
    was lost runs in `<run>-restart<R>` (`<run>-try<N>-restart<R>`), one started again after a wait (SPEC §10) in
    `<run>-resume<W>` (`<run>-try<N>-resume<W>-restart<R>` after both). A name too long for a Job is shortened
    with a hash.

    Cutting alone would give a 63-character run's three Jobs the same name, and the agent
    step would then adopt the preRun Job as its own.
    """
    suffix = (f"-try{attempt}" if attempt > 1 else "") + (f"-resume{resumed}" if resumed else "") \
        + (f"-restart{restart}" if restart else "") + _JOB_SUFFIX[component]
    name = run + suffix
    if len(name) <= MAX_LABEL_VALUE:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    head = run[:MAX_LABEL_VALUE - len(suffix) - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}{suffix}"


def agent_job_of(run: dict[str, object], attempt: int) -> str:
    """The agent Job whose log is the agent's of `attempt`, from a run object as stored: the last attempt's is the
    one `status.jobName` names (after a restart or a resume, `<run>-restart<R>` or `<run>-resume<W>`, the pod that
    reported last), an earlier attempt's its first."""
    meta = run.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    status = run.get("status")
    status = status if isinstance(status, dict) else {}
    first = job_name(name, "agent-run", attempt)
    current = str(status.get("jobName") or "")
    if attempt == int(status.get("attempt") or 1) and current.startswith((first + "-restart", first + "-resume")):
        return current
    return first


def hook_container(component: Component, hook: str) -> str:
    """The init container that runs hook `hook` of a preRun or postRun Job."""
    return f"{_CONTAINER_PREFIX[component]}-{hook}"


def hook_of(container: str) -> str:
    """The hook a hook container runs (the inverse of `hook_container`); other names come back unchanged."""
    prefix, sep, hook = container.partition("-")
    return hook if sep and prefix in _CONTAINER_PREFIX.values() else container
