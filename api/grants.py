"""The admission webhooks of the kinds whose writers hand runs something: Agents (and SympoziumInstances), SkillPacks,
Ensembles and PersonaPacks, SympoziumSchedules (SPEC §1.5; issue 27, holes 1 to 3).

Each of them gives the runs that use it RBAC rules (an Agent's lifecycle defaults, a SkillPack sidecar's Role and
ClusterRole, a persona's lifecycle), Secrets (hook and sidecar env, provider keys, MCP and channel credentials), or a
task and the identity it runs as (a schedule's ticks). So:

- the mutating webhook (`/admission/authors/mutate`) stamps the author (models/authorship.py): on creation, and on
  every write that changes what the object grants (`authorship.grants`; a hook's image or command counts as much as
  its rules). A control plane component may carry the author it writes for (the bridge a pack's onto the Agents and
  schedules it stamps out, the API its caller's onto a schedule); anyone else's stamp is their own.
- the validating ones check, on the same writes, every rule and Secret the object names against that author, with
  SubjectAccessReviews (api/escalation.py): a SkillPack's `sidecar.rbac` in the namespace and `clusterRBAC`
  cluster-wide, a pack's personas' `lifecycle.rbac`, an Agent's lifecycle defaults, every Secret (models/secretrefs.py),
  and for a schedule the lifecycle rules its runs will inherit from their Agent. A write that changes nothing granted
  is not checked (anyone allowed to edit an Agent may change its system prompt without holding what its owner
  delegated), but may not change the stamp either. Size bounds of Agent and sidecar text refuse with 422
  (models/bounds.py).

The warnings-only webhook for packs and Models (`/admission/definitions`) is here too: it refuses nothing.
Refusals are 403 naming the field; an apiserver that cannot be asked is a 503 (fail closed). Whether a write goes
through while the API is down is each registration's `failurePolicy` (deploy/chart/agentrun/templates/webhook.yaml).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

from fastapi import APIRouter, Request

from models import authorship
from models.agent import normalize_agent
from models.agentrun import RBACRule
from models.authorship import stamp_keys, stamp_of
from models.base import FieldProblem, parse
from models.bounds import Uncarriable, check_args, check_env_list
from models.compat import AGENT_IGNORED, Unsupported, check_agent_backend, ignored_in
from models.evaluate import read_agent
from models.model import NOT_OFFERED
from models.names import (
    ADMISSION_AGENTS_PATH,
    ADMISSION_AUTHORS_MUTATE_PATH,
    ADMISSION_DEFINITIONS_PATH,
    ADMISSION_PACKS_PATH,
    ADMISSION_SCHEDULES_PATH,
    DEFINITION_KINDS,
    GROUP,
    SCHEDULES,
)
from models.personas import PackKind, read_pack
from models.personas import ignored_fields as pack_ignored_fields
from models.policy import Refusal
from models.resolve import check_agent_bounds
from models.schedule import schedule_agent
from models.secretrefs import secret_refs
from models.skillpack import SkillPackSpec, skill_pack_notes, skill_pack_warnings

from .admission import (
    EVALUATE_TIMEOUT_SECONDS,
    AdmissionRequest,
    AdmissionResponse,
    allow,
    answer,
    bad,
    carries,
    metadata,
    parse_review,
    patched,
    reader,
    refuse,
    writer,
)
from .authority import Unreadable
from .deps import State, StateDep
from .escalation import Grants, Requester, Unreviewable, refusal

log = logging.getLogger("agentrun.api.grants")
router = APIRouter(tags=["admission"])

KINDS = {"agents": "Agent", "sympoziuminstances": "SympoziumInstance", "skillpacks": "SkillPack",
         "ensembles": "Ensemble", "personapacks": "PersonaPack", SCHEDULES: "SympoziumSchedule"}
AGENT_KINDS = ("agents", "sympoziuminstances")
PACK_KINDS = ("skillpacks", "ensembles", "personapacks")
AGENT_RBAC_FIELD = "spec.agents.default.lifecycle.rbac"
RULE_AUTHOR = "author"


def _check_kind(req: AdmissionRequest, plurals: tuple[str, ...]) -> None:
    if req.resource.group != GROUP or req.resource.resource not in plurals:
        raise bad(f"this webhook admits {GROUP} {', '.join(plurals)}, not {req.resource.group or 'core'} "
                  f"{req.resource.resource!r}")


def _namespace(req: AdmissionRequest) -> str:
    ns = req.namespace or metadata(req.obj, "request.object").namespace
    if not ns:
        raise bad(f"request.namespace is required: {req.resource.resource} are namespaced")
    return ns


def _acts(req: AdmissionRequest) -> bool:
    """Whether the request writes an object's content (status writes, deletions and connects carry nothing)."""
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return False
    if req.obj is None:
        raise bad(f"request.object is required for {req.operation}")
    return True


# -- the author stamp --------------------------------------------------------------------------------------------

def author_stamps(state: State, req: AdmissionRequest) -> dict[str, str | None]:
    """The author annotations the mutating webhook sets on this write (models/authorship.py)."""
    _check_kind(req, tuple(KINDS))
    plural = req.resource.resource
    if not _acts(req):
        return {}
    if carries(state, req, plural) and _carried(plural, req.obj):
        return {}  # the bridge for a pack's author, the API for its caller: the stamp it carries stays
    if req.operation == "UPDATE" and authorship.grants(plural, req.obj) == authorship.grants(plural, req.old_object):
        return {}  # nothing granted changed: whoever wrote it still did
    stamp = writer(req).annotations(plural)
    notes = metadata(req.obj, "request.object").annotations
    return {k: v for k, v in stamp.items() if notes.get(k) != v}


@router.post(ADMISSION_AUTHORS_MUTATE_PATH,
             responses={400: {"description": "not an AdmissionReview v1 for a kind with an author"}})
async def mutate_author(request: Request, state: StateDep) -> dict[str, Any]:
    """Stamp who wrote what an Agent, SkillPack, schedule or pack grants (a JSONPatch of two annotations)."""
    review = parse_review(await request.body())
    return answer(patched(review.request, author_stamps(state, review.request)))


def _carried(plural: str, obj: dict[str, Any] | None) -> bool:
    """Whether the object carries an author stamp: a name, or the empty one the bridge carries for a pack that records
    no author (written while no webhook ran: the bridge is nobody's author, so what it stamps out records none)."""
    return stamp_of(plural, obj)[0] is not None


@dataclass(frozen=True)
class Authored:
    """Whose rights a write is checked against, and whether it must be: it creates the object, changes what the
    object grants, or carries another author onto it."""

    checked: Requester
    changed: bool


def authored(state: State, req: AdmissionRequest) -> Authored | Refusal:
    plural, obj, old = req.resource.resource, req.obj, req.old_object
    new_stamp, old_stamp = stamp_of(plural, obj), stamp_of(plural, old)
    changed = req.operation == "CREATE" or authorship.grants(plural, obj) != authorship.grants(plural, old)
    carried = authorship.read(plural, obj)
    if carries(state, req, plural) and _carried(plural, obj):
        # Checked as the author it carries; carrying the empty stamp (no author known), as the component itself.
        who_else = Requester.of(carried) if carried is not None else req.user_info.requester()
        return Authored(who_else, changed or new_stamp != old_stamp)
    who, keys = req.user_info.username, stamp_keys(plural)
    if changed:
        expected = writer(req).annotations(plural)
        wrong = [k for k, v in zip(keys, new_stamp, strict=True) if v is not None and v != expected[k]]
        if wrong:
            return Refusal(RULE_AUTHOR, f'{", ".join(wrong)} must name the user writing the {KINDS[plural]} ("{who}") '
                                        "and its groups: it records who wrote what the object grants")
    elif new_stamp != old_stamp:
        return Refusal(RULE_AUTHOR, f"{' and '.join(keys)} record who wrote what this {KINDS[plural]} grants: the "
                                    f'admission webhook stamps them, and "{who}" may not set or change them')
    return Authored(req.user_info.requester(), changed)


async def _checked(state: State, req: AdmissionRequest, ns: str, who: Requester, grants: Grants,
                   what: str) -> AdmissionResponse | None:
    """The refusal of the first grant `who` does not hold (403), or of a check that cannot be made (503); None:
    admitted as far as the grants go."""
    name = f"{KINDS[req.resource.resource]} {ns}/{req.name or metadata(req.obj, 'request.object').name}"
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            refused = await refusal(state.kube, who, ns, grants)
    except (TimeoutError, Unreviewable) as e:
        why = str(e) or f"the access reviews took over {EVALUATE_TIMEOUT_SECONDS:g}s"
        log.warning("refused %s: cannot review its %s: %s", name, what, why)
        return refuse(req.uid, 503, "ServiceUnavailable", f"cannot check the {KINDS[req.resource.resource]}'s {what} "
                      f"against what {who.username} may do, so it is refused: {why}")
    if refused is not None:
        log.info("refused %s from %s (checked as %s): %s", name, req.user_info.username, who.username, refused.message)
        return refuse(req.uid, 403, "Forbidden", refused.message)
    return None


# -- Agents --------------------------------------------------------------------------------------------------------

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
    """An Agent's lifecycle defaults are granted to the hooks of every run that inherits them, and the Secrets it
    names are read by its runs' pods: whoever writes them must hold every permission they grant and may `get` every
    Secret (api/escalation.py). Anything else about Agents is admitted, with warnings of fields without effect."""
    _check_kind(req, AGENT_KINDS)
    if not _acts(req):
        return allow(req.uid)
    assert req.obj is not None
    ns, name = _namespace(req), f"{req.resource.resource} {req.name or metadata(req.obj, 'request.object').name}"
    try:
        check_agent_backend(req.obj)
    except Unsupported as e:
        log.info("refused %s in %s: %s", name, ns, e)
        return refuse(req.uid, 403, "Forbidden", str(e))
    try:
        check_agent_bounds(normalize_agent(req.obj))
    except Uncarriable as e:
        log.info("refused %s in %s: %s", name, ns, e)
        return refuse(req.uid, 422, "Invalid", str(e))
    except FieldProblem:
        pass  # malformed: its runs fail at start naming the field
    warnings = ignored_in(req.obj, AGENT_IGNORED, "")  # what the Agent's runs will ask for in vain (models/compat.py)
    who = authored(state, req)
    if isinstance(who, Refusal):
        return refuse(req.uid, 403, "Forbidden", who.message)
    if not who.changed:
        return allow(req.uid, warnings)
    grants = Grants(rules=[(f"{AGENT_RBAC_FIELD}[{i}]", r) for i, r in enumerate(_agent_rbac(req.obj))],
                    secrets=secret_refs(KINDS[req.resource.resource], req.obj))
    refused = await _checked(state, req, ns, who.checked, grants, f"{AGENT_RBAC_FIELD} and Secrets")
    return refused or allow(req.uid, warnings)


@router.post(ADMISSION_AGENTS_PATH, responses={400: {"description": "not an AdmissionReview v1 for agents"}})
async def admit_agent(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate an Agent CREATE or UPDATE: its lifecycle RBAC defaults and Secrets, against their author."""
    review = parse_review(await request.body())
    return answer(await decide_agent(state, review.request))


# -- SkillPacks, Ensembles, PersonaPacks ----------------------------------------------------------------------------

def pack_grants(plural: str, obj: dict[str, Any]) -> Grants:
    """Every rule and Secret a pack hands the runs that use it (FieldProblem if its spec is malformed; Uncarriable if
    a sidecar's text is over its bound)."""
    kind = KINDS[plural]
    secrets = secret_refs(kind, obj)
    if kind == "SkillPack":
        sidecar = parse(SkillPackSpec, obj.get("spec") or {}, "spec").sidecar
        if sidecar is None:
            return Grants(secrets=secrets)
        check_env_list("spec.sidecar.env", sidecar.env or [])
        check_args("spec.sidecar", list(sidecar.command or []), [])
        return Grants(rules=[(f"spec.sidecar.rbac[{j}]", r.as_rule()) for j, r in enumerate(sidecar.rbac or [])],
                      cluster_rules=[(f"spec.sidecar.clusterRBAC[{j}]", r.as_rule())
                                     for j, r in enumerate(sidecar.cluster_rbac or [])],
                      secrets=secrets)
    pack = read_pack(cast(PackKind, kind), obj)
    personas = "spec.agentConfigs" if kind == "Ensemble" else "spec.personas"
    return Grants(rules=[(f"{personas}[{i}].lifecycle.rbac[{j}]", rule)
                         for i, persona in enumerate(pack.spec.agent_configs) if persona.lifecycle is not None
                         for j, rule in enumerate(persona.lifecycle.rbac)],
                  secrets=secrets)


async def decide_pack(state: State, req: AdmissionRequest) -> AdmissionResponse:
    """A SkillPack's sidecar rules and Secrets, a pack's personas' lifecycle rules and every Secret it names, against
    their author. A malformed spec is admitted here: the schema refuses it, or the bridge's status names the field."""
    _check_kind(req, PACK_KINDS)
    if not _acts(req):
        return allow(req.uid)
    assert req.obj is not None
    ns = _namespace(req)
    try:
        grants = pack_grants(req.resource.resource, req.obj)
    except Uncarriable as e:
        return refuse(req.uid, 422, "Invalid", str(e))
    except FieldProblem:
        grants = Grants()
    who = authored(state, req)
    if isinstance(who, Refusal):
        return refuse(req.uid, 403, "Forbidden", who.message)
    if not who.changed:
        return allow(req.uid)
    return await _checked(state, req, ns, who.checked, grants, "RBAC rules and Secrets") or allow(req.uid)


@router.post(ADMISSION_PACKS_PATH, responses={400: {"description": "not an AdmissionReview v1 for a pack"}})
async def admit_pack(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate a SkillPack, Ensemble or PersonaPack CREATE or UPDATE: its rules and Secrets, against their author."""
    review = parse_review(await request.body())
    return answer(await decide_pack(state, review.request))


# -- SympoziumSchedules --------------------------------------------------------------------------------------------

async def decide_schedule(state: State, req: AdmissionRequest) -> AdmissionResponse:
    """A schedule's ticks create runs in its author's name, which inherit its Agent's lifecycle: the author must hold
    those rules, as they would to create such a run themselves (each run is checked again when its tick creates it).
    A schedule whose Agent does not exist yet is admitted: its runs are checked when they are created."""
    _check_kind(req, (SCHEDULES,))
    if not _acts(req):
        return allow(req.uid)
    assert req.obj is not None
    ns = _namespace(req)
    who = authored(state, req)
    if isinstance(who, Refusal):
        return refuse(req.uid, 403, "Forbidden", who.message)
    spec = req.obj.get("spec")
    agent_name = schedule_agent(spec) if isinstance(spec, dict) else ""
    if not who.changed or not agent_name:
        return allow(req.uid)
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            agent = await read_agent(reader(state.kube, ns, state.definitions), agent_name)
    except (TimeoutError, Unreadable) as e:
        return refuse(req.uid, 503, "ServiceUnavailable",
                      f"cannot read the schedule's Agent to check what its runs inherit, so it is refused: {e}")
    rules = [(f'spec.agentRef (its runs inherit Agent "{agent_name}" {AGENT_RBAC_FIELD}[{i}])', r)
             for i, r in enumerate(_agent_rbac(agent))]
    return await _checked(state, req, ns, who.checked, Grants(rules=rules), "inherited lifecycle.rbac") \
        or allow(req.uid)


@router.post(ADMISSION_SCHEDULES_PATH, responses={400: {"description": "not an AdmissionReview v1 for a schedule"}})
async def admit_schedule(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate a SympoziumSchedule CREATE or UPDATE: its author must hold what its runs will inherit."""
    review = parse_review(await request.body())
    return answer(await decide_schedule(state, review.request))


# -- warnings of fields without effect -------------------------------------------------------------------------------

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
    _check_kind(req, tuple(DEFINITION_KINDS))
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE") or req.obj is None:
        return allow(req.uid)
    return allow(req.uid, definition_warnings(req.resource.resource, req.obj))


@router.post(ADMISSION_DEFINITIONS_PATH,
             responses={400: {"description": "not an AdmissionReview v1 for a pack or a Model"}})
async def admit_definition(request: Request) -> dict[str, Any]:
    """Admit a SkillPack, PersonaPack, Ensemble or Model, warning of the fields that have no effect here."""
    review = parse_review(await request.body())
    return answer(decide_definition(review.request))
