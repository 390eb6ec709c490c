"""The admission webhooks for AgentRuns (SPEC §1.5, §4): validating `POST /admission/agentruns` and mutating
`POST /admission/agentruns/mutate`; for Agents, validating `POST /admission/agents` (no escalation through their
lifecycle RBAC defaults, api/escalation.py); and for SkillPacks, PersonaPacks, Ensembles and Models, validating
`POST /admission/definitions`, which refuses nothing and warns of the fields that have no effect here.

The kube-apiserver calls it over TLS (deploy/webhook.yaml), so it lives outside `/api/` and takes
no bearer token. It answers AdmissionReview `admission.k8s.io/v1` with the same evaluation the
workflow runs at start (`models.evaluate.evaluate_run`), so the two never disagree; the workflow's
check is what protects a cluster without the webhook, the webhook only refuses earlier, at
`kubectl apply`, before a run object exists.

What it refuses, and why only that:
- Policy rules and the always-denied env keys (`PolicyViolation`): 403 naming the field and rule; so are fields
  asking for an execution backend we do not offer (`models.compat.Unsupported`: `mode: server`, warm pools), on
  AgentRuns and Agents alike.
- Sympozium fields that have no effect here (channels, memory, ...: `models.compat`) are admitted with a warning
  naming each (kubectl prints it); a run's status repeats them in its `FieldsIgnored` condition.
- A missing Agent, an unreadable Agent spec, a bad duration or any other spec problem is admitted
  with a warning: the workflow fails that run at start naming the field (SPEC §3.1), so the user
  gets a run whose status says what is wrong, and an Agent applied after its runs in the same
  `kubectl apply` is not an error here.
- An Agent or policy that cannot be read (API error, timeout): refused (fail closed) with a 503
  saying so. Whether the apiserver admits a run when the webhook itself is down is the webhook
  configuration's `failurePolicy`.

A run's `lifecycle.rbac` (or the Agent's defaults it inherits) may grant only what the requesting user holds
(api/escalation.py): 403 naming the rule and the missing permission.

UPDATEs are evaluated only when `spec` changed: metadata changes (the finalizer the worker adds
and removes, the gate-verdict annotation) are never evaluated against the spec rules, so a policy tightened
while a run is in flight can never wedge its cleanup or its gate. DELETE, CONNECT and subresources are admitted.

Authentic verdicts (SPEC §4) are the other half, and need both webhooks. The mutating one stamps who wrote
what: a new run's `agentrun.dev/created-by` (the requesting user, or — from a trusted creator, the API — the
identity it set), and on a change of the verdict annotation `sympozium.ai/gate-verdict-by` = the writer (removed
with the verdict). The validating one then refuses a verdict on a new run, a `gate-verdict-by` that is not the
writer, any change of `created-by`, and a verdict from anyone but the run's gate hook (its lifecycle
ServiceAccount) or an approver of the Agent's policy (`gatePolicy`, and never the creator under
`requireDistinctApprover`). Removing the verdict stays allowed (the worker's gate step removes a stale one).
Those refusals never reach a workflow, so each is recorded as a `VerdictRefused` Event on the run
(`api/authority.py`), logged and counted.
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

from models.agent import normalize_agent
from models.agentrun import RBACRule
from models.base import FieldProblem, PolicyViolation, parse
from models.compat import AGENT_IGNORED, Unsupported, check_agent_backend, ignored_in
from models.evaluate import Reader, RunLister, evaluate_run
from models.gate import VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION
from models.informer import Informer
from models.kube import Kube, KubeError, NotFound
from models.model import NOT_OFFERED
from models.names import (
    ADMISSION_AGENTS_PATH,
    ADMISSION_DEFINITIONS_PATH,
    ADMISSION_MUTATE_PATH,
    ADMISSION_VALIDATE_PATH,
    ANNOTATION_CREATED_BY,
    DEFINITION_KINDS,
    GROUP,
    VERSION,
)
from models.personas import PackKind, read_pack
from models.personas import ignored_fields as pack_ignored_fields
from models.policy import Refusal
from models.resolve import approval_tools
from models.skillpack import SkillPackSpec, skill_pack_notes, skill_pack_warnings

from .authority import Unreadable, gate_authority, record_refusal
from .deps import State, StateDep
from .escalation import Requester, Unreviewable, escalation, rules_checked, skill_rules_checked

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


def _bad(detail: str) -> HTTPException:
    return HTTPException(status_code=400, detail=detail)


def _first_error(prefix: str, e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join([prefix, *(str(p) for p in err["loc"])] if prefix else [str(p) for p in err["loc"]])
    return f"{where or 'body'}: {err['msg']}"


def parse_review(body: bytes) -> AdmissionReview:
    """The review, or 400 naming what is wrong with it."""
    try:
        raw = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _bad(f"body is not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise _bad(f"body must be an AdmissionReview {ADMISSION_API_VERSION} object")
    try:
        return AdmissionReview.model_validate(raw)
    except ValidationError as e:
        raise _bad(f"not an AdmissionReview {ADMISSION_API_VERSION}: {_first_error('', e)}") from None


def reader(kube: Kube, ns: str, view: Informer | None = None) -> Reader:
    """Reads a run's Agent or policy: from `view` (a watch-fed copy) when it holds it, else from the API server."""
    async def read(plural: str, name: str) -> dict[str, Any] | None:
        held = view.definition(plural, ns, name) if view is not None else None
        if held is not None:
            return held
        try:
            obj = await kube.call(kube.custom.get_namespaced_custom_object, GROUP, VERSION, ns, plural, name,
                                  _request_timeout=READ_TIMEOUT_SECONDS, action=f"read {plural} {ns}/{name}")
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
            out = await kube.call(kube.custom.list_namespaced_custom_object, GROUP, VERSION, ns, "agentruns",
                                  _request_timeout=READ_TIMEOUT_SECONDS, action=f"list agentruns in {ns}")
        except KubeError as e:
            raise Unreadable(str(e)) from e
        return cast(list[dict[str, Any]], out.get("items") or [])
    return list_runs


def _allow(uid: str, warnings: list[str] | None = None) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=True, warnings=warnings or None)


def _refuse(uid: str, code: int, reason: str, message: str) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=False, status=AdmissionStatus(code=code, reason=reason, message=message))


def _check_resource(req: AdmissionRequest) -> None:
    if (req.resource.group, req.resource.resource) != (GROUP, "agentruns"):
        raise _bad(f"this webhook admits {GROUP} agentruns, not {req.resource.group or 'core'} "
                   f"{req.resource.resource!r}")


def _metadata(obj: dict[str, Any] | None, where: str) -> ObjectMeta:
    if obj is None:
        return ObjectMeta()
    try:
        return ObjectMeta.model_validate(obj.get("metadata") or {})
    except ValidationError as e:
        raise _bad(_first_error(f"{where}.metadata", e)) from None


# -- authentic verdicts ------------------------------------------------------------------------------------------

RULE_VERDICT_AT_CREATION = "verdict-at-creation"
RULE_VERDICT_BY = "gate-verdict-by"
RULE_CREATED_BY = "created-by"


def _creation_refusal(state: State, req: AdmissionRequest, notes: dict[str, str]) -> Refusal | None:
    given = [k for k in (VERDICT_ANNOTATION, VERDICT_BY_ANNOTATION) if k in notes]
    if given:
        return Refusal(RULE_VERDICT_AT_CREATION, f"a verdict cannot be given at creation: {', '.join(given)} may "
                                                 "not be set on a new run (a verdict counts only while its gate waits)")
    who = req.user_info.username
    creator = notes.get(ANNOTATION_CREATED_BY)
    if creator is not None and creator != who and who not in state.settings.trusted_creators:
        return Refusal(RULE_CREATED_BY, f'{ANNOTATION_CREATED_BY} must name the user creating the run ("{who}"), '
                                        f'not "{creator}"')
    return None


def _stamp_refusal(req: AdmissionRequest, old: dict[str, str], new: dict[str, str]) -> Refusal | None:
    """A change of `created-by` (never allowed after creation) or of `gate-verdict-by` that is not the admission
    webhook's stamp of this writer."""
    who = req.user_info.username
    if old.get(ANNOTATION_CREATED_BY) != new.get(ANNOTATION_CREATED_BY):
        return Refusal(RULE_CREATED_BY, f"{ANNOTATION_CREATED_BY} cannot be set or changed after the run is created")
    verdict, by = new.get(VERDICT_ANNOTATION), new.get(VERDICT_BY_ANNOTATION)
    changed = verdict != old.get(VERDICT_ANNOTATION)
    forged = f'{VERDICT_BY_ANNOTATION} is stamped by the admission webhook with the verdict\'s writer; "{who}" may ' \
             "not set, change or remove it"
    if by != old.get(VERDICT_BY_ANNOTATION) and not ((changed and verdict is not None and by == who)
                                                      or (verdict is None and by is None)):
        return Refusal(RULE_VERDICT_BY, forged)
    if changed and verdict is not None and by is not None and by != who:
        return Refusal(RULE_VERDICT_BY, forged)
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
            return _refuse(req.uid, 403, "Forbidden", refusal.message)
        return await _refuse_verdict(state, req, obj, ns, refusal)
    if req.old_object is None:
        return None
    old = _metadata(req.old_object, "request.oldObject").annotations
    refusal = _stamp_refusal(req, old, meta.annotations)
    if refusal is not None:
        if refusal.rule == RULE_CREATED_BY:
            log.info("refused a change of AgentRun %s/%s: %s", ns, meta.name, refusal.message)
            state.refusals[f"admission {refusal.rule}"] += 1
            return _refuse(req.uid, 403, "Forbidden", refusal.message)
        return await _refuse_verdict(state, req, obj, ns, refusal)
    verdict = meta.annotations.get(VERDICT_ANNOTATION)
    if verdict is None or verdict == old.get(VERDICT_ANNOTATION):
        return None  # no verdict given (removing one is allowed: the gate step clears a stale one)
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            authority = await gate_authority(reader(state.kube, ns, state.definitions), req.old_object)
    except (TimeoutError, Unreadable) as e:
        why = str(e) or f"reading the Agent and policy took over {EVALUATE_TIMEOUT_SECONDS:g}s"
        log.warning("refused a verdict on AgentRun %s/%s from %s: %s", ns, meta.name, who, why)
        return _refuse(req.uid, 503, "ServiceUnavailable",
                       f"cannot check who may decide this run against its Agent's policy, so the verdict is refused: "
                       f"{why}")
    refusal = authority.annotation_refusal(who, req.user_info.groups, namespace=ns, run=meta.name or req.name)
    if refusal is not None:
        return await _refuse_verdict(state, req, obj, ns, refusal)
    return None


async def _refuse_verdict(state: State, req: AdmissionRequest, obj: dict[str, Any], ns: str,
                          refusal: Refusal) -> AdmissionResponse:
    state.refusals[f"admission {refusal.rule}"] += 1
    if not req.dry_run:
        await record_refusal(state.kube, namespace=ns, run=req.old_object or obj, who=req.user_info.username,
                             refusal=refusal, via="admission")
    return _refuse(req.uid, 403, "Forbidden", refusal.message)


# -- the validating webhook --------------------------------------------------------------------------------------

async def decide(state: State, req: AdmissionRequest) -> AdmissionResponse:
    _check_resource(req)
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return _allow(req.uid)  # status writes and deletions carry nothing a policy governs
    obj = req.obj
    if obj is None:
        raise _bad(f"request.object is required for {req.operation}")
    spec = obj.get("spec")
    if not (spec is None or isinstance(spec, dict)):
        raise _bad("request.object.spec must be an object")
    meta = _metadata(obj, "request.object")
    ns = req.namespace or meta.namespace
    if not ns:
        raise _bad("request.namespace is required: AgentRuns are namespaced")
    refused = await _authenticity(state, req, obj, meta, ns)
    if refused is not None:
        return refused
    if req.operation == "UPDATE":
        old_spec = req.old_object.get("spec") if req.old_object is not None else None
        if meta.deletion_timestamp or (req.old_object is not None and old_spec == spec):
            return _allow(req.uid)
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
        return _refuse(req.uid, 503, "ServiceUnavailable", "cannot check the run against its Agent's policy, so it "
                       f"is refused: reading the Agent and policy took over {EVALUATE_TIMEOUT_SECONDS:g}s")
    except Unreadable as e:
        log.warning("refused AgentRun %s: %s", who, e)
        return _refuse(req.uid, 503, "ServiceUnavailable",
                       f"cannot check the run against its Agent's policy, so it is refused: {e}")
    if isinstance(ev.problem, PolicyViolation):
        log.info("refused AgentRun %s: %s", who, ev.problem)
        return _refuse(req.uid, 403, "Forbidden", str(ev.problem))
    rules = rules_checked(run, ev.resolved.rbac if ev.resolved is not None else None, ev.agent_name)
    rules += skill_rules_checked(ev.resolved)
    if rules:
        try:
            async with asyncio.timeout(max(1.0, EVALUATE_TIMEOUT_SECONDS - (loop.time() - started))):
                refusal = await escalation(state.kube, req.user_info.requester(), ns, rules)
        except (TimeoutError, Unreviewable) as e:
            why = str(e) or f"the access reviews took over {EVALUATE_TIMEOUT_SECONDS:g}s"
            log.warning("refused AgentRun %s: cannot review its lifecycle RBAC: %s", who, why)
            return _refuse(req.uid, 503, "ServiceUnavailable", "cannot check the run's lifecycle.rbac against what "
                           f"{req.user_info.username} may do, so it is refused: {why}")
        if refusal is not None:
            log.info("refused AgentRun %s from %s: %s", who, req.user_info.username, refusal.message)
            return _refuse(req.uid, 403, "Forbidden", refusal.message)
    if ev.problem is not None:
        return _allow(req.uid, [f"this run will fail when it starts unless this is fixed first: {ev.problem}",
                                *ev.ignored])
    warnings: list[str] = []
    if ev.resolved is not None and ev.policy is not None:
        warnings = [f'tool "{t}" needs approval under policy "{ev.policy.name}" (toolGating action: ask)'
                    for t in approval_tools(ev.resolved, ev.policy)]
    # A SkillPack that does not exist is skipped, as Sympozium does (models/skills.py); the writer hears of it here.
    skipped = [f"{m}: skipped, the run starts without it" for m in ev.missing_packs]
    return _allow(req.uid, [*warnings, *skipped, *ev.ignored])


# -- the mutating webhook ----------------------------------------------------------------------------------------

def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def stamps(state: State, req: AdmissionRequest) -> dict[str, str | None]:
    """The annotations the mutating webhook sets (a value) or removes (None) on this request."""
    _check_resource(req)
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return {}
    if req.obj is None:
        raise _bad(f"request.object is required for {req.operation}")
    notes = _metadata(req.obj, "request.object").annotations
    who = req.user_info.username
    if req.operation == "CREATE":
        if who in state.settings.trusted_creators and notes.get(ANNOTATION_CREATED_BY):
            return {}  # the API, creating the run for its token's identity, which it stamped itself
        return {ANNOTATION_CREATED_BY: who}
    old = _metadata(req.old_object, "request.oldObject").annotations
    verdict = notes.get(VERDICT_ANNOTATION)
    if verdict == old.get(VERDICT_ANNOTATION):
        return {}
    if verdict is not None:
        return {VERDICT_BY_ANNOTATION: who}
    return {VERDICT_BY_ANNOTATION: None} if VERDICT_BY_ANNOTATION in notes else {}


def mutate(state: State, req: AdmissionRequest) -> AdmissionResponse:
    changes = stamps(state, req)
    if not changes:
        return _allow(req.uid)
    assert req.obj is not None  # stamps() refused a write without one
    ops: list[dict[str, Any]] = []
    if not isinstance((req.obj.get("metadata") or {}).get("annotations"), dict):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    for key, value in changes.items():
        ops.append({"op": "remove", "path": _pointer(key)} if value is None
                   else {"op": "add", "path": _pointer(key), "value": value})
    patch = base64.b64encode(json.dumps(ops).encode()).decode()
    return AdmissionResponse(uid=req.uid, allowed=True, patch_type="JSONPatch", patch=patch)


def _answer(response: AdmissionResponse) -> dict[str, Any]:
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "response": response.model_dump(by_alias=True, exclude_none=True)}


@router.post(ADMISSION_VALIDATE_PATH, responses={400: {"description": "not an AdmissionReview v1 for agentruns"}})
async def admit_agentrun(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate an AgentRun CREATE or UPDATE: its Agent's SympoziumPolicy, and who may give its verdict."""
    review = parse_review(await request.body())
    return _answer(await decide(state, review.request))


# -- the Agents' webhook --------------------------------------------------------------------------------------------

AGENT_KINDS = ("agents", "sympoziuminstances")
AGENT_RBAC_FIELD = "spec.agents.default.lifecycle.rbac"


def _agent_rbac(obj: dict[str, Any] | None) -> list[RBACRule]:
    """The lifecycle RBAC an Agent (either kind, either shape) hands the runs that inherit it; none if malformed (its
    runs then fail at start, and the update that fixes it is checked)."""
    if obj is None:
        return []
    try:
        lifecycle = normalize_agent(obj).lifecycle
    except FieldProblem:
        return []
    return list(lifecycle.rbac) if lifecycle else []


async def decide_agent(state: State, req: AdmissionRequest) -> AdmissionResponse:
    """An Agent's lifecycle defaults are granted to the hooks of every run that inherits them, so whoever creates or
    changes them must hold every permission they grant (api/escalation.py); anything else about Agents is admitted."""
    if req.resource.group != GROUP or req.resource.resource not in AGENT_KINDS:
        raise _bad(f"this webhook admits {GROUP} {' and '.join(AGENT_KINDS)}, not {req.resource.group or 'core'} "
                   f"{req.resource.resource!r}")
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return _allow(req.uid)
    if req.obj is None:
        raise _bad(f"request.object is required for {req.operation}")
    meta = _metadata(req.obj, "request.object")
    ns = req.namespace or meta.namespace
    if not ns:
        raise _bad("request.namespace is required: Agents are namespaced")
    try:
        check_agent_backend(req.obj)
    except Unsupported as e:
        log.info("refused %s %s/%s: %s", req.resource.resource, ns, req.name or meta.name, e)
        return _refuse(req.uid, 403, "Forbidden", str(e))
    warnings = ignored_in(req.obj, AGENT_IGNORED, "")  # what the Agent's runs will ask for in vain (models/compat.py)
    rules = _agent_rbac(req.obj)
    if not rules or (req.operation == "UPDATE" and rules == _agent_rbac(req.old_object)):
        return _allow(req.uid, warnings)
    who = f"{req.resource.resource} {ns}/{req.name or meta.name}"
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            refusal = await escalation(state.kube, req.user_info.requester(), ns,
                                       [(f"{AGENT_RBAC_FIELD}[{i}]", r) for i, r in enumerate(rules)])
    except (TimeoutError, Unreviewable) as e:
        why = str(e) or f"the access reviews took over {EVALUATE_TIMEOUT_SECONDS:g}s"
        log.warning("refused %s: cannot review its lifecycle RBAC: %s", who, why)
        return _refuse(req.uid, 503, "ServiceUnavailable", f"cannot check the Agent's {AGENT_RBAC_FIELD} against "
                       f"what {req.user_info.username} may do, so it is refused: {why}")
    if refusal is not None:
        log.info("refused %s from %s: %s", who, req.user_info.username, refusal.message)
        return _refuse(req.uid, 403, "Forbidden", refusal.message)
    return _allow(req.uid, warnings)


@router.post(ADMISSION_AGENTS_PATH, responses={400: {"description": "not an AdmissionReview v1 for agents"}})
async def admit_agent(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate an Agent CREATE or UPDATE: its lifecycle RBAC defaults may grant only what the writer holds."""
    review = parse_review(await request.body())
    return _answer(await decide_agent(state, review.request))


def definition_warnings(plural: str, obj: dict[str, Any]) -> list[str]:
    """What kubectl should print for a pack or a Model: the fields stored without effect here, as the bridge writes
    them into the object's FieldsIgnored condition (a Model as a whole). A malformed spec gets no warning here: the
    API server's schema refuses it, or the bridge's status names the field."""
    kind = DEFINITION_KINDS[plural]
    if kind == "Model":
        return [f"Model: {NOT_OFFERED}"]
    try:
        notes: list[str] = []
        if kind == "SkillPack":
            spec = parse(SkillPackSpec, obj.get("spec") or {}, "spec")
            fields, notes = skill_pack_warnings(spec), skill_pack_notes(spec)
        else:
            fields = pack_ignored_fields(read_pack(cast(PackKind, kind), obj))
    except FieldProblem:
        return []
    return [f"{f}: has no effect here" for f in fields] + notes


def decide_definition(req: AdmissionRequest) -> AdmissionResponse:
    if req.resource.group != GROUP or req.resource.resource not in DEFINITION_KINDS:
        raise _bad(f"this webhook admits {GROUP} {', '.join(DEFINITION_KINDS)}, not {req.resource.group or 'core'} "
                   f"{req.resource.resource!r}")
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE") or req.obj is None:
        return _allow(req.uid)
    return _allow(req.uid, definition_warnings(req.resource.resource, req.obj))


@router.post(ADMISSION_DEFINITIONS_PATH,
             responses={400: {"description": "not an AdmissionReview v1 for a pack or a Model"}})
async def admit_definition(request: Request) -> dict[str, Any]:
    """Admit a SkillPack, PersonaPack, Ensemble or Model, warning of the fields that have no effect here."""
    review = parse_review(await request.body())
    return _answer(decide_definition(review.request))


@router.post(ADMISSION_MUTATE_PATH, responses={400: {"description": "not an AdmissionReview v1 for agentruns"}})
async def mutate_agentrun(request: Request, state: StateDep) -> dict[str, Any]:
    """Stamp a new AgentRun's creator and the writer of a verdict annotation (a JSONPatch)."""
    review = parse_review(await request.body())
    return _answer(mutate(state, review.request))
