"""The review and token kinds, answered without being stored: SelfSubjectAccessReview, SubjectAccessReview,
LocalSubjectAccessReview, TokenReview and the serviceaccounts/token subresource (TokenRequest).

Why a module of its own: in kube-apiserver each is the REST storage of its kind (pkg/registry/authorization/
{selfsubjectaccessreview,subjectaccessreview,localsubjectaccessreview}, pkg/registry/authentication/tokenreview,
pkg/registry/core/serviceaccount/storage/token.go), not a generic handler: each validates its body, asks the
authorizer or the authenticator, and answers the object with its status filled in. `server.py` routes to them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .authn import ADMIN, API_AUDIENCES, Auth, Objects, TokenInfo
from .errors import StatusError, bad_request, invalid, not_found
from .rbac import Attributes, RBACSource, UserInfo, authorize
from .registry import ResourceType
from .util import rfc3339

Obj = dict[str, Any]

TOKEN_REQUEST_GROUP = "authentication.k8s.io"
MIN_TOKEN_SECONDS = 600  # authenticationvalidation.MinTokenAgeSec
MAX_TOKEN_SECONDS = 1 << 32


def _go_struct(value: Any) -> str:
    """How field.Invalid prints a struct value (approximated by its JSON; a nil pointer is "null")."""
    return '"null"' if value is None else json.dumps(value, separators=(",", ":"))


def _review_spec_causes(spec: Obj) -> list[tuple[str, str, str]]:
    """ValidateSubjectAccessReviewSpec."""
    causes: list[tuple[str, str, str]] = []
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    for name, value in (("resourceAttributes", ra), ("nonResourceAttributes", nra)):
        if value is not None and not isinstance(value, dict):
            raise bad_request(f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                              f"SubjectAccessReviewSpec.spec.{name}")
    if ra is not None and nra is not None:
        causes.append(("spec.nonResourceAttributes", "FieldValueInvalid",
                       f"Invalid value: {_go_struct(nra)}: cannot be specified in combination with resourceAttributes"))
    if ra is None and nra is None:
        causes.append(("spec.resourceAttributes", "FieldValueInvalid",
                       'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be '
                       "specified"))
    if not spec.get("user") and not spec.get("groups"):
        causes.append(("spec.user", "FieldValueInvalid",
                       'Invalid value: "": at least one of user or group must be specified'))
    return causes


def self_subject_access_review(user: UserInfo, body: Any, rbac: RBACSource) -> Obj:
    """SelfSubjectAccessReview (`kubectl auth can-i`): RBAC's decision for the caller itself."""
    if not isinstance(body, dict):
        raise bad_request("body must be a SelfSubjectAccessReview")
    spec = body.get("spec") or {}
    ra = spec.get("resourceAttributes")
    nra = spec.get("nonResourceAttributes")
    if ra:
        attrs = Attributes(verb=ra.get("verb", ""), resource_request=True, api_group=ra.get("group", ""),
                           resource=ra.get("resource", ""), subresource=ra.get("subresource", ""),
                           namespace=ra.get("namespace", ""), name=ra.get("name", ""))
    elif nra:
        attrs = Attributes(verb=nra.get("verb", ""), resource_request=False, path=nra.get("path", ""))
    else:
        raise StatusError(422, "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: "
                               "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified")
    allowed, reason = (True, "admin") if user is ADMIN else authorize(user, attrs, rbac)
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec,
            "status": {"allowed": allowed, **({"reason": reason} if reason else {})}}


def subject_access_review(body: Any, rt: ResourceType, ns: str, rbac: RBACSource,
                          decode: Callable[[ResourceType, Any], Obj]) -> Obj:
    """SubjectAccessReview and LocalSubjectAccessReview: RBAC's decision for the user and groups of the spec
    (not for the caller, who needed `create` on the review kind), as their REST storage answers it. `decode`: the
    API server's typed decoding of a body into `rt`."""
    local = rt.kind == "LocalSubjectAccessReview"
    if local and not ns:
        raise StatusError(404, "the server could not find the requested resource")
    review = decode(rt, body)
    spec, md = review.get("spec"), review.get("metadata") or {}
    if not isinstance(spec, dict):
        spec = {}
    causes = _review_spec_causes(spec)
    if local and spec.get("nonResourceAttributes") is not None:
        causes.append(("spec.nonResourceAttributes", "FieldValueInvalid",
                       f"Invalid value: {_go_struct(spec['nonResourceAttributes'])}: disallowed on this kind of "
                       "request"))
    if local and md.get("namespace") not in (None, "", ns):
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    extra_meta = {k: v for k, v in md.items() if v not in (None, "", {}, []) and k != "namespace"}
    if extra_meta or (not local and md.get("namespace")):
        causes.append(("metadata", "FieldValueInvalid", f"Invalid value: {_go_struct(md)}: must be empty"
                       + (" except for namespace" if local else "")))
    if causes:
        raise invalid(f"{rt.kind}.{rt.group}", "", causes)
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if local:
        ra = dict(ra or {})  # not None: nonResourceAttributes were refused above
        if ra.get("namespace") and ra["namespace"] != ns:
            raise bad_request(f"spec.resourceAttributes.namespace must match namespace: {ns}")
        ra["namespace"] = ns
        spec = {**spec, "resourceAttributes": ra}
        review["metadata"] = {"namespace": ns}
    if ra is not None:
        attrs = Attributes(verb=str(ra.get("verb") or ""), resource_request=True,
                           api_group=str(ra.get("group") or ""), resource=str(ra.get("resource") or ""),
                           subresource=str(ra.get("subresource") or ""), namespace=str(ra.get("namespace") or ""),
                           name=str(ra.get("name") or ""))
    else:
        nra = nra or {}
        attrs = Attributes(verb=str(nra.get("verb") or ""), resource_request=False, path=str(nra.get("path") or ""))
    subject = UserInfo(str(spec.get("user") or ""), tuple(str(g) for g in spec.get("groups") or []),
                       str(spec.get("uid") or ""))
    allowed, reason = authorize(subject, attrs, rbac)
    review["metadata"] = {"creationTimestamp": None, **review.get("metadata", {})}
    review["spec"] = spec
    review["status"] = {"allowed": allowed, **({"reason": reason} if reason else {})}
    return review


def token_review(body: Any, auth: Auth, objects: Objects) -> Obj:
    """TokenReview: who a bearer token authenticates as (the admin's or a ServiceAccount's), as the TokenReview
    REST storage answers it: `authenticated` false (with an error) for a token that is not, or no longer, valid;
    `spec.audiences` (default: the API server's) must meet the token's."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request was not a JSON object")
    spec = body.get("spec") or {}
    token = spec.get("token") if isinstance(spec, dict) else None
    if not isinstance(token, str) or not token:
        raise invalid(f"TokenReview.{TOKEN_REQUEST_GROUP}", "", [("spec.token", "FieldValueRequired",
                                                                  "Required value")])
    wanted = tuple(str(a) for a in spec.get("audiences") or []) or API_AUDIENCES
    user, audiences = auth.lookup(token, objects)
    met = [a for a in wanted if a in audiences]
    status: Obj
    if user is None or not met:
        status = {"authenticated": False, "user": {},
                  "error": "[invalid bearer token, token lookup failed]" if user is None else
                           "[invalid bearer token, token audiences is invalid for the target audiences]"}
    else:
        groups = list(user.groups)
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        status = {"authenticated": True, "audiences": met,
                  "user": {"username": user.name, **({"uid": user.uid} if user.uid else {}), "groups": groups}}
    return {"kind": "TokenReview", "apiVersion": f"{TOKEN_REQUEST_GROUP}/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


def token_request(ns: str, name: str, body: Any, auth: Auth, objects: Objects) -> Obj:
    """POST serviceaccounts/<name>/token, as the TokenREST of kube-apiserver answers it."""
    group_kind = f"TokenRequest.{TOKEN_REQUEST_GROUP}"
    if not isinstance(body, dict):
        raise bad_request("the body of the request was not a JSON object")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if kind not in (None, "TokenRequest") or api_version not in (None, f"{TOKEN_REQUEST_GROUP}/v1"):
        raise bad_request(f'{kind} in version "{str(api_version or "").rpartition("/")[2]}" cannot be handled '
                          "as a TokenRequest: the object provided is unrecognized (expected kind TokenRequest)")
    md = body.get("metadata") or {}
    spec = dict(body.get("spec") or {})
    if not isinstance(md, dict) or not isinstance(spec, dict):
        raise bad_request("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: metadata and spec "
                          "must be objects")
    for f, what in (("name", name), ("namespace", ns)):
        if md.get(f) and md[f] != what:
            raise invalid(group_kind, name, [(f"metadata.{f}", "FieldValueInvalid",
                                              f"Invalid value: {json.dumps(md[f])}: must match the service "
                                              f"account {f} if specified")])
    sa = objects.get(("", "serviceaccounts"), ns, name)
    if sa is None:
        raise not_found("serviceaccounts", name)
    spec["audiences"] = [str(a) for a in spec.get("audiences") or []] or list(API_AUDIENCES)
    seconds = spec.get("expirationSeconds")
    if seconds is None:
        seconds = spec["expirationSeconds"] = 3600  # SetDefaults_TokenRequestSpec
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise bad_request("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot "
                          f"unmarshal {type(seconds).__name__} into Go struct field "
                          "TokenRequestSpec.spec.expirationSeconds of type int64")
    if seconds < MIN_TOKEN_SECONDS:
        raise invalid(group_kind, "", [("spec.expirationSeconds", "FieldValueInvalid",
                                        f"Invalid value: {seconds}: may not specify a duration less than 10 minutes")])
    if seconds > MAX_TOKEN_SECONDS:
        raise invalid(group_kind, "", [("spec.expirationSeconds", "FieldValueInvalid",
                                        f"Invalid value: {seconds}: may not specify a duration larger than 2^32 "
                                        "seconds")])
    bound = _bound_object(ns, spec, objects)
    now = time.time()
    token = auth.request(TokenInfo(ns, name, sa_uid=sa["metadata"]["uid"], expires=now + seconds,
                                        bound=bound, audiences=tuple(spec["audiences"])))
    return {"kind": "TokenRequest", "apiVersion": f"{TOKEN_REQUEST_GROUP}/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339()},
            "spec": spec,
            "status": {"token": token,
                       "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + seconds))}}

def _bound_object(ns: str, spec: Obj, objects: Objects) -> tuple[str, str, str] | None:
    """The Pod or Secret a token is bound to (spec.boundObjectRef, its uid filled in), or None."""
    ref = spec.get("boundObjectRef")
    if not ref:
        return None
    if not isinstance(ref, dict):
        raise bad_request("boundObjectRef must be an object")
    api_version, kind, name = str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("name") or "")
    group, _, version = api_version.rpartition("/")
    resource = {"Pod": "pods", "Secret": "secrets"}.get(kind) if not group else None
    if resource is None:
        raise bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    obj = objects.get(("", resource), ns, name)
    if obj is None:
        raise not_found(resource, name)
    uid = obj["metadata"]["uid"]
    if ref.get("uid") and ref["uid"] != uid:
        raise StatusError(409, f'Operation cannot be fulfilled on {kind} "{name}": the UID in the bound object '
                               f"reference ({ref['uid']}) does not match the UID in record. The object might have "
                               "been deleted and then recreated", details={"name": name, "kind": kind})
    spec["boundObjectRef"] = {**ref, "uid": uid}
    return resource, name, uid
