"""The validating admission webhook for AgentRuns (SPEC §1.5): `POST /admission/agentruns`.

The kube-apiserver calls it over TLS (deploy/webhook.yaml), so it lives outside `/api/` and takes
no bearer token. It answers AdmissionReview `admission.k8s.io/v1` with the same evaluation the
workflow runs at start (`models.evaluate.evaluate_run`), so the two never disagree; the workflow's
check is what protects a cluster without the webhook, the webhook only refuses earlier, at
`kubectl apply`, before a run object exists.

What it refuses, and why only that:
- Policy rules and the always-denied env keys (`PolicyViolation`): 403 naming the field and rule.
- A missing Agent, an unreadable Agent spec, a bad duration or any other spec problem is admitted
  with a warning: the workflow fails that run at start naming the field (SPEC §3.1), so the user
  gets a run whose status says what is wrong, and an Agent applied after its runs in the same
  `kubectl apply` is not an error here.
- An Agent or policy that cannot be read (API error, timeout): refused (fail closed) with a 503
  saying so. Whether the apiserver admits a run when the webhook itself is down is the webhook
  configuration's `failurePolicy`.

UPDATEs are evaluated only when `spec` changed: metadata changes (the finalizer the worker adds
and removes, the gate-verdict annotation) are always admitted, so a policy tightened while a run is
in flight can never wedge its cleanup or its gate. DELETE, CONNECT and subresources are admitted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal, cast

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from models.base import PolicyViolation
from models.evaluate import Reader, evaluate_run
from models.kube import Kube, KubeError, NotFound
from models.names import GROUP, VERSION
from models.resolve import approval_tools

from .deps import State, StateDep

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
    deletion_timestamp: str | None = None


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


class Unreadable(Exception):
    """The Agent or policy could not be read, so the run cannot be checked."""


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


def _reader(kube: Kube, ns: str) -> Reader:
    async def read(plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj = await kube.call(kube.custom.get_namespaced_custom_object, GROUP, VERSION, ns, plural, name,
                                  _request_timeout=READ_TIMEOUT_SECONDS, action=f"read {plural} {ns}/{name}")
        except NotFound:
            return None
        except KubeError as e:
            raise Unreadable(str(e)) from e
        return cast(dict[str, Any], obj)
    return read


def _allow(uid: str, warnings: list[str] | None = None) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=True, warnings=warnings or None)


def _refuse(uid: str, code: int, reason: str, message: str) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=False, status=AdmissionStatus(code=code, reason=reason, message=message))


async def decide(state: State, req: AdmissionRequest) -> AdmissionResponse:
    if (req.resource.group, req.resource.resource) != (GROUP, "agentruns"):
        raise _bad(f"this webhook admits {GROUP} agentruns, not {req.resource.group or 'core'} "
                   f"{req.resource.resource!r}")
    if req.sub_resource or req.operation not in ("CREATE", "UPDATE"):
        return _allow(req.uid)  # status writes and deletions carry nothing a policy governs
    obj = req.obj
    if obj is None:
        raise _bad(f"request.object is required for {req.operation}")
    spec = obj.get("spec")
    if not (spec is None or isinstance(spec, dict)):
        raise _bad("request.object.spec must be an object")
    try:
        meta = ObjectMeta.model_validate(obj.get("metadata") or {})
    except ValidationError as e:
        raise _bad(_first_error("request.object.metadata", e)) from None
    if req.operation == "UPDATE":
        old_spec = req.old_object.get("spec") if req.old_object is not None else None
        if meta.deletion_timestamp or (req.old_object is not None and old_spec == spec):
            return _allow(req.uid)
    ns = req.namespace or meta.namespace
    if not ns:
        raise _bad("request.namespace is required: AgentRuns are namespaced")
    meta.namespace = ns
    run = {**obj, "metadata": meta.model_dump(by_alias=True, exclude_none=True)}
    who = f"{ns}/{req.name or meta.name or meta.generate_name + '*'}"  # for the log
    try:
        async with asyncio.timeout(EVALUATE_TIMEOUT_SECONDS):
            ev = await evaluate_run(run, read=_reader(state.kube, ns), default_image=state.settings.agent_image)
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
    if ev.problem is not None:
        return _allow(req.uid, [f"this run will fail when it starts unless this is fixed first: {ev.problem}"])
    warnings: list[str] = []
    if ev.resolved is not None and ev.policy is not None:
        warnings = [f'tool "{t}" needs approval under policy "{ev.policy.name}" (toolGating action: ask)'
                    for t in approval_tools(ev.resolved, ev.policy)]
    return _allow(req.uid, warnings)


@router.post("/admission/agentruns", responses={400: {"description": "not an AdmissionReview v1 for agentruns"}})
async def admit_agentrun(request: Request, state: StateDep) -> dict[str, Any]:
    """Validate an AgentRun CREATE or UPDATE against its Agent's SympoziumPolicy."""
    review = parse_review(await request.body())
    response = await decide(state, review.request)
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "response": response.model_dump(by_alias=True, exclude_none=True)}
