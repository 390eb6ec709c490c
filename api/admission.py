"""The admission webhooks for AgentRuns (SPEC §1.5, §4): validating `POST /admission/agentruns` and mutating
`POST /admission/agentruns/mutate`; and the AdmissionReview plumbing the other kinds' webhooks share (api/grants.py:
Agents, SkillPacks, packs, schedules, the authors they record).

The kube-apiserver calls it over TLS (deploy/webhook.yaml), so it lives outside `/api/` and takes
no bearer token. It answers AdmissionReview `admission.k8s.io/v1` with the same evaluation the
workflow runs at start (`models.evaluate.evaluate_run`), so the two never disagree; the workflow's
check is what protects a cluster without the webhook, the webhook only refuses earlier, at
`kubectl apply`, before a run object exists.

What it refuses, and why only that:
- Policy rules and the always-denied env keys (`PolicyViolation`): 403 naming the field and rule; so are fields
  asking for an execution backend we do not offer (`models.compat.Unsupported`: `mode: server`, warm pools).
- Text over its bound (`models.bounds.Uncarriable`): 422 naming the field. Such a run could not even be carried by its
  workflow (it sat `Pending` for ever), so it is never admitted with a warning.
- Sympozium fields that have no effect here (channels, memory, ...: `models.compat`) are admitted with a warning
  naming each (kubectl prints it); a run's status repeats them in its `FieldsIgnored` condition.
- A missing Agent, an unreadable Agent spec, a bad duration or any other spec problem is admitted
  with a warning: the workflow fails that run at start naming the field (SPEC §3.1), so the user
  gets a run whose status says what is wrong, and an Agent applied after its runs in the same
  `kubectl apply` is not an error here.
- An Agent or policy that cannot be read (API error, timeout): refused (fail closed) with a 503
  saying so. Whether the apiserver admits a run when the webhook itself is down is the webhook
  configuration's `failurePolicy`.

What a run is handed is checked against its author (api/escalation.py): its `lifecycle.rbac` (or the Agent's defaults
it inherits) and its SkillPacks' sidecar rules may grant only what the author holds, every Secret its own spec names
(models/secretrefs.py) needs `get` for them, and a run borrowing its Agent's provider key may not send it elsewhere
unless they may read it (`models.secretrefs.key_redirects`): 403 naming the field. The author is the requesting user,
or, for a run a control plane component creates for someone (the API for its caller, the worker for a schedule's
author), the `agentrun.dev/created-by` stamp it carries (models/authorship.py).

UPDATEs are evaluated only when `spec` changed: metadata changes (the finalizer the worker adds
and removes, the gate-verdict annotation) are never evaluated against the spec rules, so a policy tightened
while a run is in flight can never wedge its cleanup or its gate. DELETE, CONNECT and subresources are admitted.

Authentic verdicts (SPEC §4) are the other half, and need both webhooks. The mutating one stamps who wrote
what: a new run's `agentrun.dev/created-by` and `created-by-groups` (the requesting user, or the author a trusted
component carries), and on a change of the verdict annotation `sympozium.ai/gate-verdict-by` = the writer (removed
with the verdict). The validating one then refuses a verdict on a new run, a `gate-verdict-by` that is not the
writer, any change of the creator stamp, and a verdict from anyone but the run's gate hook (its lifecycle
ServiceAccount) or an approver of the Agent's policy (`gatePolicy`, and never the creator under
`requireDistinctApprover`); under a policy with approvers the gate hook itself decides only when someone other than
the creator wrote it (`status.lifecycleAuthor`, api/authority.py). Removing the verdict stays allowed (the worker's gate
step removes a stale one). Those refusals never reach a workflow, so each is recorded as a `VerdictRefused` Event on
the run (`api/authority.py`), logged and counted.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any, Literal, cast

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from kube import Kube, KubeError, NotFound
from kube.informer import Informer
from kube.resources import sympozium
from models import authorship
from models.approvals import TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION
from models.authorship import Author, stamp_keys
from models.base import PolicyViolation
from models.bounds import Uncarriable
from models.evaluate import Evaluation, Reader, RunLister, evaluate_run
from models.gate import VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION
from models.names import (
    ADMISSION_MUTATE_PATH,
    ADMISSION_VALIDATE_PATH,
    AGENTRUNS,
    ANNOTATION_CREATED_BY,
    GROUP,
)
from models.policy import Refusal
from models.resolve import approval_tools
from models.secretrefs import SecretRef, key_redirects, secret_refs

from .access import APPROVE, Ask
from .auth import Caller
from .authority import RULE_TOOL_APPROVER, Unreadable, gate_authority, record_refusal
from .deps import State, StateDep
from .escalation import Grants, Requester, Unreviewable, rules_checked, skill_rules_checked
from .escalation import refusal as check_grants

log = logging.getLogger("agentrun.api.admission")
ADMISSION_API_VERSION = "admission.k8s.io/v1"
# The answer must come well inside the webhook's timeoutSeconds (deploy/webhook.yaml: 10s), so that
# the apiserver gets our refusal rather than its own timeout: each read (up to three: both Agent
# kinds, the policy) and the whole evaluation are bounded.
READ_TIMEOUT_SECONDS = 5.0
EVALUATE_TIMEOUT_SECONDS = 8.0

router = APIRouter(tags=["admission"])


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class GroupVersionResource(_Camel):
    group: str = ""
    version: str = ""
    resource: str = ""


class ObjectMeta(_Camel):
    """The metadata fields evaluation reads, typed, so odd values are a 400 and not a crash."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletion_timestamp: str | None = None


class UserInfo(_Camel):
    """Who sent the request, as the apiserver authenticated it."""

    username: str = ""
    groups: list[str] = Field(default_factory=list)
    uid: str = ""
    extra: dict[str, list[str]] = Field(default_factory=dict)

    def requester(self) -> Requester:
        return Requester(self.username, tuple(self.groups), self.uid,
                         tuple((k, tuple(v)) for k, v in sorted(self.extra.items())))


class AdmissionRequest(_Camel):
    uid: str = Field(min_length=1)
    resource: GroupVersionResource
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    obj: dict[str, Any] | None = Field(None, alias="object")
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    user_info: UserInfo = Field(default_factory=UserInfo)


class AdmissionReview(_Camel):
    api_version: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class AdmissionStatus(_Camel):
    code: int
    reason: str
    message: str


class AdmissionResponse(_Camel):
    uid: str
    allowed: bool
    status: AdmissionStatus | None = None
    warnings: list[str] | None = None
    patch_type: Literal["JSONPatch"] | None = None
    patch: str | None = None


def bad(detail: str) -> HTTPException:
    return HTTPException(status_code=400, detail=detail)


def first_error(prefix: str, e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join([prefix, *(str(p) for p in err["loc"])] if prefix else [str(p) for p in err["loc"]])
    return f"{where or 'body'}: {err['msg']}"


def parse_review(body: bytes) -> AdmissionReview:
    """The review, or 400 naming what is wrong with it."""
    try:
        raw = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(f"body is not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise bad(f"body must be an AdmissionReview {ADMISSION_API_VERSION} object")
    try:
        return AdmissionReview.model_validate(raw)
    except ValidationError as e:
        raise bad(f"not an AdmissionReview {ADMISSION_API_VERSION}: {first_error('', e)}") from None


def reader(kube: Kube, ns: str, view: Informer | None = None) -> Reader:
    """Reads a run's Agent or policy: from `view` (a watch-fed copy) when it holds it, else from the API server."""
    async def read(plural: str, name: str) -> dict[str, Any] | None:
        held = view.definition(plural, ns, name) if view is not None else None
        if held is not None:
            return held
        try:
            obj = await sympozium(kube, plural).get(ns, name, _request_timeout=READ_TIMEOUT_SECONDS,
                                                    action=f"read {plural} {ns}/{name}")
        except NotFound:
            return None
        except KubeError as e:
            raise Unreadable(str(e)) from e
        return cast(dict[str, Any], obj)
    return read


def run_lister(kube: Kube, ns: str) -> RunLister:
    """Lists the namespace's runs, for a sub-agent's limits (asked only for runs with `spec.parent`)."""
    async def list_runs() -> list[dict[str, Any]]:
        try:
            out = await sympozium(kube, "agentruns").list(ns, _request_timeout=READ_TIMEOUT_SECONDS,
                                                          action=f"list agentruns in {ns}")
        except KubeError as e:
            raise Unreadable(str(e)) from e
        return cast(list[dict[str, Any]], out.get("items") or [])
    return list_runs


def allow(uid: str, warnings: list[str] | None = None) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=True, warnings=warnings or None)


def refuse(uid: str, code: int, reason: str, message: str) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=False, status=AdmissionStatus(code=code, reason=reason, message=message))


def _check_resource(req: AdmissionRequest) -> None:
    if (req.resource.group, req.resource.resource) != (GROUP, "agentruns"):
        raise bad(f"this webhook admits {GROUP} agentruns, not {req.resource.group or 'core'} "
                  f"{req.resource.resource!r}")


def metadata(obj: dict[str, Any] | None, where: str) -> ObjectMeta:
    if obj is None:
        return ObjectMeta()
    try:
        return ObjectMeta.model_validate(obj.get("metadata") or {})
    except ValidationError as e:
        raise bad(first_error(f"{where}.metadata", e)) from None


# -- authentic verdicts ------------------------------------------------------------------------------------------

RULE_VERDICT_AT_CREATION = "verdict-at-creation"
RULE_VERDICT_BY = "gate-verdict-by"
RULE_TOOL_VERDICT_BY = "tool-verdict-by"
# The verdict annotations and the stamp of each one's writer: the gate's (SPEC §4) and tool calls' (SPEC §10).
STAMPED = ((VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION, RULE_VERDICT_BY),
           (TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION, RULE_TOOL_VERDICT_BY))
RULE_CREATED_BY = "created-by"


def carries(state: State, req: AdmissionRequest, plural: str) -> bool:
    """Whether the requesting user is a control plane component that may carry an author stamp onto this kind."""
    return state.settings.trusted_components().may_carry(req.user_info.username, plural)


def writer(req: AdmissionRequest) -> Author:
    return Author(req.user_info.username, tuple(req.user_info.groups))


def _creation_refusal(state: State, req: AdmissionRequest, notes: dict[str, str]) -> Refusal | None:
    given = [k for verdict, by, _ in STAMPED for k in (verdict, by) if k in notes]
    if given:
        gate = any(k in notes for k in (VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION))
        tools = any(k in notes for k in (TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION))
        waits = ("its gate, or its tool calls, wait" if gate and tools else "its gate waits" if gate
                 else "its tool calls wait")
        return Refusal(RULE_VERDICT_AT_CREATION, f"a verdict cannot be given at creation: {', '.join(given)} may "
                                                 f"not be set on a new run (a verdict counts only while {waits})")
    who = req.user_info.username
    stamp = writer(req).annotations(AGENTRUNS)
    wrong = [k for k in stamp if notes.get(k) is not None and notes[k] != stamp[k]]
    if wrong and not carries(state, req, AGENTRUNS):
        return Refusal(RULE_CREATED_BY, f'{", ".join(wrong)} must name the user creating the run ("{who}") and its '
                                        f'groups, not "{notes[wrong[0]]}"')
    return None


def _stamp_refusal(req: AdmissionRequest, old: dict[str, str], new: dict[str, str]) -> Refusal | None:
    """A change of `created-by` or its groups (never allowed after creation) or of `gate-verdict-by` that is not the
    admission webhook's stamp of this writer."""
    who = req.user_info.username
    for key in stamp_keys(AGENTRUNS):
        if old.get(key) != new.get(key):
            return Refusal(RULE_CREATED_BY, f"{key} cannot be set or changed after the run is created")
    for verdict_key, by_key, rule in STAMPED:
        verdict, by = new.get(verdict_key), new.get(by_key)
        changed = verdict != old.get(verdict_key)
        forged = f'{by_key} is stamped by the admission webhook with the verdict\'s writer; "{who}" may ' \
                 "not set, change or remove it"
        if by != old.get(by_key) and not ((changed and verdict is not None and by == who)
                                           or (verdict is None and by is None)):
            return Refusal(rule, forged)
        if changed and verdict is not None and by is not None and by != who:
            return Refusal(rule, forged)
    return None


async def _authenticity(state: State, req: AdmissionRequest, obj: dict[str, Any], meta: ObjectMeta,
                        ns: str) -> AdmissionResponse | None:
    """The refusal of a CREATE or UPDATE that breaks the authentic-verdict rules, else None."""
    who = req.user_info.username
    if req.operation == "CREATE":
        refusal = _creation_refusal(state, req, meta.annotations)
        if refusal is None:
            return None
        if refusal.rule == RULE_CREATED_BY:
            log.info("refused AgentRun %s/%s: %s", ns, meta.name or meta.generate_name, refusal.message)
            state.refusals[f"admission {refusal.rule}"] += 1
            return refuse(req.uid, 403, "Forbidden", refusal.message)
        return await _refuse_verdict(state, req, obj, ns, refusal)
    if req.old_object is None:
        return None
    old = metadata(req.old_object, "request.oldObject").annotations
    refusal = _stamp_refusal(req, old, meta.annotations)
    if refusal is not None:
        if refusal.rule == RULE_CREATED_BY:
            log.info("refused a change of AgentRun %s/%s: %s", ns, meta.name, refusal.message)
            state.refusals[f"admission {refusal.rule}"] += 1
            return refuse(req.uid, 403, "Forbidden", refusal.message)
        return await _refuse_verdict(state, req, obj, ns, refusal)
    tool_verdict = meta.annotations.get(TOOL_VERDICT_ANNOTATION)
    if tool_verdict is not None and tool_verdict != old.get(TOOL_VERDICT_ANNOTATION):
        refused = await _tool_authenticity(state, req, obj, meta, ns)
        if refused is not None:
            return refused
    verdict = meta.annotations.get(VERDICT_ANNOTATION)
    if verdict is None or verdict == old.get(VERDICT_ANNOTATION):
        return None  # no verdict given (removing one is allowed: the gate step clears a stale one)
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            authority = await gate_authority(reader(state.kube, ns, state.definitions), req.old_object)
    except (TimeoutError, Unreadable) as e:
        why = str(e) or f"reading the Agent and policy took over {EVALUATE_TIMEOUT_SECONDS:g}s"
        log.warning("refused a verdict on AgentRun %s/%s from %s: %s", ns, meta.name, who, why)
        return refuse(req.uid, 503, "ServiceUnavailable",
                      f"cannot check who may decide this run against its Agent's policy, so the verdict is refused: "
                      f"{why}")
    refusal = authority.annotation_refusal(who, req.user_info.groups, namespace=ns, run=meta.name or req.name)
    if refusal is not None:
        return await _refuse_verdict(state, req, obj, ns, refusal)
    return None


async def _tool_authenticity(state: State, req: AdmissionRequest, obj: dict[str, Any], meta: ObjectMeta,
                             ns: str) -> AdmissionResponse | None:
    """A tool-verdict annotation (SPEC §10) decides only from someone the API would let decide: never an account runs
    execute as, only with RBAC's `approve agentruns` on this run (the API's own check, here as a SubjectAccessReview
    for the writer), and as the Agent's policy's gatePolicy allows. The run's gate hook has no say here: what a run
    executes never approves what its agent does."""
    who = req.user_info.username
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            authority = await gate_authority(reader(state.kube, ns, state.definitions), req.old_object or obj)
            refusal = authority.tool_refusal(who, req.user_info.groups)
            if refusal is None:
                u = req.user_info
                caller = Caller(who, tuple(u.groups), u.uid, tuple((k, tuple(v)) for k, v in sorted(u.extra.items())))
                if not await state.access.allowed(caller, Ask(APPROVE, AGENTRUNS, ns, meta.name or req.name)):
                    refusal = Refusal(RULE_TOOL_APPROVER, f'"{who}" may not decide this run\'s tool calls: RBAC does '
                                                          f'not let it approve agentruns in namespace "{ns}" '
                                                          "(agentrun-approver grants it)")
    except (TimeoutError, Unreadable, KubeError) as e:
        why = str(e) or f"checking the writer took over {EVALUATE_TIMEOUT_SECONDS:g}s"
        log.warning("refused a tool decision on AgentRun %s/%s from %s: %s", ns, meta.name, who, why)
        return refuse(req.uid, 503, "ServiceUnavailable",
                      f"cannot check who may decide this run's tool calls, so the decision is refused: {why}")
    if refusal is not None:
        return await _refuse_verdict(state, req, obj, ns, refusal, what="tool decision")
    return None


async def _refuse_verdict(state: State, req: AdmissionRequest, obj: dict[str, Any], ns: str,
                          refusal: Refusal, what: str = "verdict") -> AdmissionResponse:
    state.refusals[f"admission {refusal.rule}"] += 1
    if not req.dry_run:
        await record_refusal(state.kube, namespace=ns, run=req.old_object or obj, who=req.user_info.username,
                             refusal=refusal, via="admission", what=what)
    return refuse(req.uid, 403, "Forbidden", refusal.message)


# -- the validating webhook --------------------------------------------------------------------------------------

async def decide(state: State, req: AdmissionRequest) -> AdmissionResponse:
    _check_resource(req)
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return allow(req.uid)  # status writes and deletions carry nothing a policy governs
    obj = req.obj
    if obj is None:
        raise bad(f"request.object is required for {req.operation}")
    spec = obj.get("spec")
    if not (spec is None or isinstance(spec, dict)):
        raise bad("request.object.spec must be an object")
    meta = metadata(obj, "request.object")
    ns = req.namespace or meta.namespace
    if not ns:
        raise bad("request.namespace is required: AgentRuns are namespaced")
    refused = await _authenticity(state, req, obj, meta, ns)
    if refused is not None:
        return refused
    if req.operation == "UPDATE":
        old_spec = req.old_object.get("spec") if req.old_object is not None else None
        if meta.deletion_timestamp or (req.old_object is not None and old_spec == spec):
            return allow(req.uid)
    meta.namespace = ns
    run = {**obj, "metadata": meta.model_dump(by_alias=True, exclude_none=True, exclude={"annotations"})}
    who = f"{ns}/{req.name or meta.name or meta.generate_name + '*'}"  # for the log
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            # A sub-agent is checked against its parent's limits here too, so kubectl is refused at once; the
            # worker's check at start stays the one that holds when two children are created at the same time.
            ev = await evaluate_run(run, read=reader(state.kube, ns, state.definitions),
                                    default_image=state.settings.agent_image, list_runs=run_lister(state.kube, ns))
    except TimeoutError:
        log.warning("refused AgentRun %s: reading its Agent and policy took over %ss", who, EVALUATE_TIMEOUT_SECONDS)
        return refuse(req.uid, 503, "ServiceUnavailable", "cannot check the run against its Agent's policy, so it "
                      f"is refused: reading the Agent and policy took over {EVALUATE_TIMEOUT_SECONDS:g}s")
    except Unreadable as e:
        log.warning("refused AgentRun %s: %s", who, e)
        return refuse(req.uid, 503, "ServiceUnavailable",
                      f"cannot check the run against its Agent's policy, so it is refused: {e}")
    if isinstance(ev.problem, PolicyViolation):
        log.info("refused AgentRun %s: %s", who, ev.problem)
        return refuse(req.uid, 403, "Forbidden", str(ev.problem))
    if isinstance(ev.problem, Uncarriable):
        log.info("refused AgentRun %s: %s", who, ev.problem)
        return refuse(req.uid, 422, "Invalid", str(ev.problem))
    checked = _checked_identity(state, req, obj)
    rules = rules_checked(run, ev.resolved.rbac if ev.resolved is not None else None, ev.agent_name)
    rules += skill_rules_checked(ev.resolved)
    grants = Grants(rules=rules, secrets=[*secret_refs("AgentRun", obj), *_key_redirects(state, obj, ev)])
    if grants:
        try:
            async with asyncio.timeout(max(1.0, EVALUATE_TIMEOUT_SECONDS - (loop.time() - started))):
                refusal = await check_grants(state.kube, checked, ns, grants)
        except (TimeoutError, Unreviewable) as e:
            why = str(e) or f"the access reviews took over {EVALUATE_TIMEOUT_SECONDS:g}s"
            log.warning("refused AgentRun %s: cannot review its lifecycle RBAC and Secrets: %s", who, why)
            return refuse(req.uid, 503, "ServiceUnavailable", "cannot check the run's lifecycle.rbac against what "
                          f"{checked.username} may do, nor the Secrets it names, so it is refused: {why}")
        if refusal is not None:
            log.info("refused AgentRun %s from %s (checked as %s): %s", who, req.user_info.username,
                     checked.username, refusal.message)
            return refuse(req.uid, 403, "Forbidden", refusal.message)
    if ev.problem is not None:
        return allow(req.uid, [f"this run will fail when it starts unless this is fixed first: {ev.problem}",
                                *ev.ignored])
    warnings: list[str] = []
    if ev.resolved is not None and ev.policy is not None:
        warnings = [f'tool "{t}" needs approval under policy "{ev.policy.name}" (toolGating action: ask)'
                    for t in approval_tools(ev.resolved, ev.policy)]
    # A SkillPack that does not exist is skipped, as Sympozium does (models/skills.py); the writer hears of it here.
    skipped = [f"{m}: skipped, the run starts without it" for m in ev.missing_packs]
    return allow(req.uid, [*warnings, *skipped, *ev.ignored])


def _checked_identity(state: State, req: AdmissionRequest, obj: dict[str, Any]) -> Requester:
    """Whose rights a run's grants are checked against: its creator as stamped, when a control plane component
    creates it for someone (the API for its caller, the worker for a schedule's author); otherwise the writer."""
    author = authorship.read(AGENTRUNS, obj)
    if req.operation == "CREATE" and author is not None and carries(state, req, AGENTRUNS):
        return Requester.of(author)
    return req.user_info.requester()


def _key_redirects(state: State, obj: dict[str, Any], ev: Evaluation) -> list[SecretRef]:
    """A run that uses its Agent's provider key without naming it may send the key elsewhere only if its author may
    read it (models/secretrefs.py): each field that would, as a Secret to `get`."""
    if ev.resolved is None or ev.profile is None:
        return []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    secret = ev.resolved.model.auth_secret_ref
    where = f'Agent "{ev.agent_name}"'
    return [SecretRef(f"{f} (would send the provider key of {where}, Secret \"{secret}\", elsewhere than the Agent "
                      "does)", secret)
            for f in key_redirects(spec or {}, ev.profile, ev.resolved, default_image=state.settings.agent_image)]


# -- the mutating webhook ----------------------------------------------------------------------------------------

def pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def stamps(state: State, req: AdmissionRequest) -> dict[str, str | None]:
    """The annotations the mutating webhook sets (a value) or removes (None) on this request."""
    _check_resource(req)
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return {}
    if req.obj is None:
        raise bad(f"request.object is required for {req.operation}")
    notes = metadata(req.obj, "request.object").annotations
    who = req.user_info.username
    if req.operation == "CREATE":
        if carries(state, req, AGENTRUNS) and notes.get(ANNOTATION_CREATED_BY):
            return {}  # the API for its caller, the worker for a schedule's author: the stamp it carries stays
        stamp = writer(req).annotations(AGENTRUNS)
        return {k: v for k, v in stamp.items() if notes.get(k) != v}
    old = metadata(req.old_object, "request.oldObject").annotations
    out: dict[str, str | None] = {}
    for verdict_key, by_key, _ in STAMPED:
        verdict = notes.get(verdict_key)
        if verdict == old.get(verdict_key):
            continue
        if verdict is not None:
            out[by_key] = who
        elif by_key in notes:
            out[by_key] = None
    return out


def mutate(state: State, req: AdmissionRequest) -> AdmissionResponse:
    return patched(req, stamps(state, req))


def patched(req: AdmissionRequest, changes: dict[str, str | None]) -> AdmissionResponse:
    """Allow the write with these annotations set (a value) or removed (None), as a JSONPatch."""
    if not changes:
        return allow(req.uid)
    assert req.obj is not None  # a change needs an object to change
    ops: list[dict[str, Any]] = []
    if not isinstance((req.obj.get("metadata") or {}).get("annotations"), dict):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    for key, value in changes.items():
        ops.append({"op": "remove", "path": pointer(key)} if value is None
                   else {"op": "add", "path": pointer(key), "value": value})
    patch = base64.b64encode(json.dumps(ops).encode()).decode()
    return AdmissionResponse(uid=req.uid, allowed=True, patch_type="JSONPatch", patch=patch)


def answer(response: AdmissionResponse) -> dict[str, Any]:
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "response": response.model_dump(by_alias=True, exclude_none=True)}


@router.post(ADMISSION_VALIDATE_PATH, responses={400: {"description": "not an AdmissionReview v1 for agentruns"}})
async def admit_agentrun(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate an AgentRun CREATE or UPDATE: its Agent's SympoziumPolicy, and who may give its verdict."""
    review = parse_review(await request.body())
    return answer(await decide(state, review.request))


@router.post(ADMISSION_MUTATE_PATH, responses={400: {"description": "not an AdmissionReview v1 for agentruns"}})
async def mutate_agentrun(request: Request, state: StateDep) -> dict[str, Any]:
    """Stamp a new AgentRun's creator and the writer of a verdict annotation (a JSONPatch)."""
    review = parse_review(await request.body())
    return answer(mutate(state, review.request))
