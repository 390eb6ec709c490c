"""The generic store of kube-apiserver on top of the raw store (k8s.io/apiserver/pkg/registry/generic/registry).

Everything that makes a write more than "put a dict", the same for every kind: decoding, names and generateName,
uid, generation, resourceVersion preconditions, the status subresource split, the built-in admission plug-ins
(`admission_plugins.py`) and admission webhooks (`webhooks.py`), finalizers and graceful deletion. What a kind adds
(its defaults, validation, the status it starts with, its grace period) is its strategy's (`kinds/`); what happens
after a deletion is the controllers' (`garbagecollector.py`, `crdfinalizer.py`, `controllers.py`).

The HTTP layer and every in-process controller go through this class, so a controller's
write behaves exactly like a client's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from . import admission_plugins, kinds
from . import patch as patchmod
from .errors import (
    StatusError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    method_not_allowed,
    not_found,
    precondition_failed,
)
from .kinds.base import Cause
from .kinds.meta import check_typed_maps, validate_meta, validate_name
from .rbac import UserInfo
from .registry import Registry, ResourceType, crd_resource_types
from .request import INTERNAL, Ctx, DeleteOptions
from .store import Obj, Store
from .util import deep, meta, rand_suffix, rfc3339
from .webhooks import AdmissionRequest, Pending, WebhookIndex

log = logging.getLogger("localkube.apiserver")

# Finalizers the API server itself adds when an object is deleted (the controllers remove them).
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"

__all__ = ["INTERNAL", "APIServer", "Ctx", "DeleteOptions"]


def _positive_int(value: Any) -> bool:
    try:
        return int(str(value)) > 0
    except ValueError:
        return False


def _storage_key(rt: ResourceType, obj: Obj) -> str:
    """The etcd key kube-apiserver names in storage errors."""
    prefix = f"{rt.group}/{rt.resource}" if rt.is_custom or rt.group == "apiextensions.k8s.io" else rt.resource
    m = obj["metadata"]
    return f"/registry/{prefix}/" + (f"{m['namespace']}/" if m.get("namespace") else "") + m["name"]


def _drop_empty_maps(meta: Obj) -> None:
    """Typed objects round-trip through omitempty: an empty labels/annotations map is not stored."""
    for key in ("labels", "annotations", "finalizers", "ownerReferences"):
        if key in meta and not meta[key]:
            del meta[key]


def _spec_part(rt: ResourceType, obj: Obj) -> Obj:
    """What metadata.generation tracks. A custom resource without a status subresource counts its
    status too (customResourceStrategy.PrepareForUpdate drops `status` only when it is a subresource)."""
    skip = ("metadata", "apiVersion", "kind") if rt.is_custom and "status" not in rt.subresources \
        else ("metadata", "status", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


def _comparable(obj: Obj) -> Obj:
    o = deep(obj)
    m = o.get("metadata", {})
    m.pop("resourceVersion", None)
    m.pop("managedFields", None)
    return o


class APIServer:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        # Hook for the kubelet: called when a running pod is asked to terminate gracefully.
        self.on_pod_terminating: Callable[[Obj], None] | None = None
        self.webhooks = WebhookIndex(store)
        # CRDs stored before a restart register their resources again.
        for crd in store.select(("apiextensions.k8s.io", "customresourcedefinitions")):
            if not crd["metadata"].get("deletionTimestamp") or crd["metadata"].get("finalizers"):
                for rt in crd_resource_types(crd):
                    registry.add(rt)

    # -- reads -------------------------------------------------------------------------------

    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.qualified, name)
        return self.present(rt, obj)

    def find(self, rt: ResourceType, ns: str, name: str) -> Obj | None:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        return None if obj is None else self.present(rt, obj)

    def list_objects(self, rt: ResourceType, ns: str | None) -> list[Obj]:
        return [self.present(rt, o) for o in self.store.select(rt.key, ns if rt.namespaced else None)]

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """A copy in the requested version (custom resources may be served in several)."""
        out = deep(obj)
        if rt.is_custom:
            out["apiVersion"] = rt.group_version
        return out

    # -- create ------------------------------------------------------------------------------

    def create(self, rt: ResourceType, ns: str, body: Any, ctx: Ctx = INTERNAL) -> Obj:
        obj = self.decode(rt, body)
        m = meta(obj)
        if rt.namespaced:
            body_ns = m.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            ns = ns or body_ns or "default"
            m["namespace"] = ns
        else:
            m.pop("namespace", None)
            ns = ""
        if not m.get("name"):
            gen = m.get("generateName")
            if gen:
                m["name"] = gen + rand_suffix()
            else:
                raise invalid(f"{rt.kind}{'.' + rt.group if rt.group else ''}", "", [
                    ("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")
                ])
        name = m["name"]
        if rt.namespaced:
            admission_plugins.namespace_lifecycle(self.store, ns, rt, name)
        sent_rv = m.get("resourceVersion")
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            m.pop(k, None)
        if not (ctx.mutated and m.get("uid")):  # a mutated create keeps the system fields of its first pass
            m["uid"] = str(uuid.uuid4())
            m["creationTimestamp"] = rfc3339()
        if rt.generation:
            m["generation"] = 1
        else:
            m.pop("generation", None)
        if rt.is_custom and "status" in rt.subresources:
            obj.pop("status", None)
        self._prepare_create(rt, obj, ctx)
        self._validate(rt, obj, None, ctx)
        if not ctx.internal and not ctx.dry_run and _positive_int(sent_rv):
            # etcd3 storage refuses it with a plain error, which the real server answers with a 500 and
            # no reason: a client re-creating an object it read must clear the resourceVersion.
            # The real server answers 500 here; localkube answers 400 with the same message, so a
            # client doing this still fails in tests, without a 500 for bad input.
            raise StatusError(400, "resourceVersion should not be set on objects to be created")
        _drop_empty_maps(m)
        if ctx.webhooks and self.webhooks.configured:
            # As in kube-apiserver, validating admission sees the create before storage refuses a duplicate.
            self._hold(AdmissionRequest(
                "CREATE", rt, "", ns, name,
                self.present(rt, obj), None, self._user(ctx), ctx.dry_run, self._options("CreateOptions", ctx),
            ), ctx, commit=lambda: self._commit_create(rt, ns, name, obj, ctx), stale=lambda: False,
                resume=lambda mutated: self._resume_create(rt, ns, obj, mutated, ctx))
        return self._commit_create(rt, ns, name, obj, ctx)

    def _resume_create(self, rt: ResourceType, ns: str, obj: Obj, mutated: Obj | None, ctx: Ctx) -> Obj:
        """The create again from what the mutating webhooks returned: decoded, defaulted and validated anew
        (BeforeCreate), the system fields (uid, creationTimestamp) being the server's whatever they say."""
        body = deep(mutated if mutated is not None else obj)
        m = meta(body)
        for k in ("uid", "creationTimestamp"):
            m[k] = obj["metadata"][k]
        return self.create(rt, ns, body, dataclasses.replace(ctx, mutated=True))

    def _commit_create(self, rt: ResourceType, ns: str, name: str, obj: Obj, ctx: Ctx) -> Obj:
        if self.store.get(rt.key, ns, name) is not None:
            raise already_exists(rt.qualified, name)
        if ctx.dry_run:
            obj["metadata"]["resourceVersion"] = str(self.store.rv)
            return self.present(rt, obj)
        stored = self.store.put(rt.key, obj)
        self._after_write(rt, stored)
        return self.present(rt, stored)

    # -- admission webhooks ------------------------------------------------------------------

    def _hold(self, req: AdmissionRequest, ctx: Ctx, *, commit: Callable[[], Any], stale: Callable[[], bool],
              resume: Callable[[Obj | None], Any]) -> None:
        """Raise `Pending` when webhooks must see `req` first (the mutating ones, then, once `resume` computed
        the write again from their result, the validating ones); return when none matches it."""
        if not ctx.mutated:
            hooks = self.webhooks.matching(req, mutating=True)
            if hooks:
                raise Pending(req, hooks, commit, stale, resume)
        hooks = self.webhooks.matching(req)
        if hooks:
            raise Pending(req, hooks, commit, stale)

    @staticmethod
    def _check_immutable(rt: ResourceType, before: Obj, after: Obj) -> None:
        """ValidateObjectMetaUpdate for what a mutating webhook returned for an update."""
        causes: list[Cause] = []
        old_m, new_m = before["metadata"], after.get("metadata")
        if not isinstance(new_m, dict):
            raise bad_request("metadata must be an object")
        for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds"):
            if new_m.get(k) != old_m.get(k):
                causes.append((f"metadata.{k}", "FieldValueInvalid",
                               f"Invalid value: {json.dumps(new_m.get(k))}: field is immutable"))
        if causes:
            raise invalid(f"{rt.kind}{'.' + rt.group if rt.group else ''}", str(old_m.get("name", "")), causes)

    @staticmethod
    def _user(ctx: Ctx) -> UserInfo:
        return ctx.user if ctx.user is not None else UserInfo("system:localkube")

    @staticmethod
    def _options(kind: str, ctx: Ctx) -> Obj:
        return {"kind": kind, "apiVersion": "meta.k8s.io/v1", **ctx.options}

    def _changed_since(self, rt: ResourceType, old: Obj) -> Callable[[], bool]:
        m = old["metadata"]
        return lambda: self.store.get(rt.key, m.get("namespace", ""), m["name"]) is not old

    @staticmethod
    def _admission_namespace(rt: ResourceType, obj: Obj) -> str:
        """RequestInfo's namespace: a Namespace's own name for requests on /namespaces/<name>."""
        m = obj["metadata"]
        return str(m["name"]) if rt.kind == "Namespace" and not rt.is_custom else str(m.get("namespace", ""))

    def decode(self, rt: ResourceType, body: Any) -> Obj:
        """A request body as an object of `rt` (400 when it cannot be one)."""
        if not isinstance(body, dict):
            raise bad_request(f"the body of the request was not a JSON object: {type(body).__name__}")
        obj = deep(body)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version is None and kind is None and rt.is_custom:
            # Built-in kinds are decoded into their type from the URL; custom resources must say.
            raise bad_request("Object 'Kind' is missing in '" + json.dumps(body)[:200] + "'")
        if kind is not None and kind != rt.kind:
            raise bad_request(
                f"{kind} in version \"{(api_version or '').rpartition('/')[2]}\" cannot be handled as a {rt.kind}: "
                f"the object provided is unrecognized (expected kind {rt.kind})"
            )
        if api_version is not None and api_version not in [
            f"{rt.group}/{v}" if rt.group else v for v in rt.served_versions
        ]:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.group_version})"
            )
        obj["apiVersion"] = rt.group_version
        obj["kind"] = rt.kind
        if "metadata" in obj and not isinstance(obj["metadata"], dict):
            raise bad_request("metadata must be an object")
        strategy = kinds.strategy_for(rt)
        check_typed_maps(rt, obj, strategy.typed_maps(obj))
        strategy.check_types(rt, obj)
        return obj

    # -- update / patch ----------------------------------------------------------------------

    def update(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: Ctx = INTERNAL, subresource: str = ""
    ) -> Obj:
        if not name:
            # PUT on a collection URL: kube-apiserver has no such route.
            raise method_not_allowed()
        new = self.decode(rt, body)
        m = meta(new)
        if m.get("name") and m["name"] != name:
            raise bad_request(f"the name of the object ({m['name']}) does not match the name on the URL ({name})")
        if rt.namespaced and m.get("namespace") and m["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        old = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if old is None:
            raise not_found(rt.qualified, name)
        uid = m.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            # A body from an earlier incarnation of the object: its uid is a precondition.
            raise precondition_failed(rt.qualified, name, _storage_key(rt, old),
                                      f"UID in precondition: {uid}, UID in object meta: {old['metadata']['uid']}")
        rv = m.get("resourceVersion")
        if rv:
            if rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt.qualified, name)
        elif rt.is_custom and not ctx.internal:
            raise invalid(f"{rt.kind}.{rt.group}", name, [(
                "metadata.resourceVersion", "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
            )])
        return self.write_update(rt, old, new, ctx, subresource)

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        content_type: str,
        raw: bytes,
        ctx: Ctx = INTERNAL,
        subresource: str = "",
    ) -> Obj:
        if not name:
            raise method_not_allowed()  # PATCH on a collection URL
        old = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if old is None:
            raise not_found(rt.qualified, name)
        current = self.present(rt, old)
        try:
            new = patchmod.apply_patch(content_type, current, raw, strategic_allowed=not rt.is_custom)
        except patchmod.PatchError as e:
            reason, message = e.reason, e.status_message or str(e)
            details = {"causes": [{"message": str(e)}]} if e.status_message != str(e) else None
            if e.code == 415 and not reason:
                # go-restful refuses the Content-Type and apiserver's serviceErrorHandler wraps that with
                # NewGenericServerResponse(415, ...), which names the reason and keeps go-restful's text.
                reason, message, details = "UnsupportedMediaType", "415: Unsupported Media Type", None
            raise StatusError(e.code, message, reason=reason, details=details) from e
        if not isinstance(new, dict):
            raise bad_request("the patch did not produce an object")
        m = meta(new)
        rv = m.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.qualified, name)
        if m.get("name") != name:
            raise bad_request(f"the name of the object ({m.get('name')}) does not match the name on the URL ({name})")
        return self.write_update(rt, old, new, ctx, subresource)

    def write_update(self, rt: ResourceType, old: Obj, new: Obj, ctx: Ctx, subresource: str = "") -> Obj:
        """An update of `old` (the stored object, as read) to `new`: for callers that hold the object already."""
        new = self.decode(rt, new)
        m = meta(new)
        om = old["metadata"]
        if subresource == "status":
            # The status endpoint changes status and nothing else.
            status = new.get("status")
            new = deep(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            m = new["metadata"]
        else:
            if "status" in rt.subresources:
                if "status" in old:
                    new["status"] = deep(old["status"])
                else:
                    new.pop("status", None)
            # Fields the server owns.
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "namespace", "name", "generation"):
                if k in om:
                    m[k] = deep(om[k])
                else:
                    m.pop(k, None)
            if om.get("deletionTimestamp"):
                added = set(m.get("finalizers") or []) - set(om.get("finalizers") or [])
                if added:
                    raise invalid(f"{rt.kind}{'.' + rt.group if rt.group else ''}", om["name"], [(
                        "metadata.finalizers", "FieldValueForbidden",
                        "Forbidden: no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {sorted(added)!r}".replace("'", '"'),
                    )])
        m["resourceVersion"] = om["resourceVersion"]
        m.pop("managedFields", None)
        if rt.generation and subresource != "status" and _spec_part(rt, new) != _spec_part(rt, old):
            m["generation"] = int(om.get("generation") or 1) + 1
        self._prepare_update(rt, new, old, ctx, subresource)
        self._validate(rt, new, old, ctx)
        _drop_empty_maps(new["metadata"])
        if ctx.webhooks and self.webhooks.configured:
            # Sent even when nothing changes, as the real server admits before storage compares.
            self._hold(AdmissionRequest(
                "UPDATE", rt, subresource, self._admission_namespace(rt, old), om["name"], self.present(rt, new),
                self.present(rt, old), self._user(ctx), ctx.dry_run, self._options("UpdateOptions", ctx),
            ), ctx, commit=lambda: self._commit_update(rt, old, new, ctx), stale=self._changed_since(rt, old),
                resume=lambda mutated: self._resume_update(rt, old, new, mutated, ctx, subresource))
        return self._commit_update(rt, old, new, ctx)

    def _resume_update(self, rt: ResourceType, old: Obj, new: Obj, mutated: Obj | None, ctx: Ctx,
                       subresource: str) -> Obj:
        """The update again from what the mutating webhooks returned (defaults and validation anew)."""
        if mutated is None:
            mutated = new
        self._check_immutable(rt, new, mutated)
        return self.write_update(rt, old, mutated, dataclasses.replace(ctx, mutated=True), subresource)

    def _commit_update(self, rt: ResourceType, old: Obj, new: Obj, ctx: Ctx) -> Obj:
        m = new["metadata"]
        if _comparable(new) == _comparable(old):
            return self.present(rt, old)  # a no-op write changes nothing, not even resourceVersion
        if ctx.dry_run:
            return self.present(rt, new)
        if m.get("deletionTimestamp") and not m.get("finalizers") and not kinds.strategy_for(rt).awaits_kubelet(new):
            self._remove(rt, new)
            return self.present(rt, new)
        stored = self.store.put(rt.key, new)
        self._after_write(rt, stored)
        return self.present(rt, stored)

    # -- delete ------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, ns: str, name: str, opts: DeleteOptions, ctx: Ctx = INTERNAL) -> tuple[Obj, bool]:
        """Returns (object, removed_now). Not removed now: finalizers or grace are pending."""
        old = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if old is None:
            raise not_found(rt.qualified, name)
        om = old["metadata"]
        if opts.precondition_uid and opts.precondition_uid != om["uid"]:
            raise precondition_failed(rt.qualified, name, _storage_key(rt, old),
                                      f"UID in precondition: {opts.precondition_uid}, UID in object meta: {om['uid']}")
        if opts.precondition_rv and opts.precondition_rv != om["resourceVersion"]:
            raise precondition_failed(rt.qualified, name, _storage_key(rt, old),
                                      f"ResourceVersion in precondition: {opts.precondition_rv}, "
                                      f"ResourceVersion in object meta: {om['resourceVersion']}")
        if ctx.webhooks and self.webhooks.configured:
            dry_run = ctx.dry_run or opts.dry_run
            self._hold(AdmissionRequest(
                "DELETE", rt, "", self._admission_namespace(rt, old), name, None, self.present(rt, old),
                self._user(ctx), dry_run, opts.review_options(),
            ), ctx, commit=lambda: self._commit_delete(rt, old, opts, ctx), stale=self._changed_since(rt, old),
                resume=lambda _: self.delete(rt, ns, name, opts, dataclasses.replace(ctx, mutated=True)))
        return self._commit_delete(rt, old, opts, ctx)

    def _commit_delete(self, rt: ResourceType, old: Obj, opts: DeleteOptions, ctx: Ctx) -> tuple[Obj, bool]:
        om = old["metadata"]
        if ctx.dry_run or opts.dry_run:
            return self.present(rt, old), False
        obj = deep(old)
        m = obj["metadata"]
        finalizers: list[str] = list(m.get("finalizers") or [])
        propagation = opts.propagation or rt.default_propagation
        if rt.kind == "Namespace":
            return self._delete_namespace(rt, obj), False
        if rt.kind == "CustomResourceDefinition" and CRD_CLEANUP not in finalizers:
            finalizers.append(CRD_CLEANUP)
        if not m.get("deletionTimestamp"):
            if propagation == "Orphan" and ORPHAN not in finalizers:
                finalizers.append(ORPHAN)
            elif propagation == "Foreground" and FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
        grace = kinds.strategy_for(rt).grace_period(obj, opts)
        if not finalizers and grace == 0:
            gone = self._remove(rt, obj)
            return gone, True
        if m.get("deletionTimestamp"):
            if rt.kind == "Pod" and grace is not None and grace < int(m.get("deletionGracePeriodSeconds") or 0):
                m["deletionGracePeriodSeconds"] = grace
                stored = self.store.put(rt.key, obj)
                self._signal_pod(stored)
                return self.present(rt, stored), False
            return self.present(rt, old), False
        m["deletionTimestamp"] = rfc3339()
        m["deletionGracePeriodSeconds"] = grace or 0
        if finalizers:
            m["finalizers"] = finalizers
        m["resourceVersion"] = om["resourceVersion"]
        stored = self.store.put(rt.key, obj)
        self._after_write(rt, stored)
        if rt.kind == "Pod" and grace:
            self._signal_pod(stored)
        return self.present(rt, stored), False

    def _signal_pod(self, pod: Obj) -> None:
        if self.on_pod_terminating is not None:
            self.on_pod_terminating(pod)

    def _delete_namespace(self, rt: ResourceType, obj: Obj) -> Obj:
        m = obj["metadata"]
        if not m.get("deletionTimestamp"):
            m["deletionTimestamp"] = rfc3339()
            m["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"
            obj = self.store.put(rt.key, obj)  # the namespace controller deletes what it holds
        return self.present(rt, obj)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        gone = self.store.remove(rt.key, obj)
        return self.present(rt, gone)

    def finalize_pod(self, ns: str, name: str) -> None:
        """The kubelet's final delete after the containers are gone."""
        rt = self.registry.lookup("", "v1", "pods")
        assert rt is not None
        obj = self.store.get(rt.key, ns, name)
        if obj is None or not obj["metadata"].get("deletionTimestamp"):
            return
        if obj["metadata"].get("finalizers"):
            return
        self._remove(rt, obj)

    # -- what the kind adds: defaults, admission plug-ins, validation --------------------------

    def _prepare_create(self, rt: ResourceType, obj: Obj, ctx: Ctx) -> None:
        strategy = kinds.strategy_for(rt)
        strategy.defaults(obj)
        admission_plugins.admit_create(rt, obj, self.store)
        strategy.prepare_for_create(rt, obj, ctx, self.store)

    def _prepare_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        kinds.strategy_for(rt).prepare_for_update(rt, new, old, ctx, subresource)

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> None:
        m = obj["metadata"]
        name = str(m.get("name", ""))
        causes: list[Cause] = validate_name(rt, name) + validate_meta(m)
        causes += kinds.strategy_for(rt).validate(rt, obj, old, ctx)
        if causes:
            raise invalid(f"{rt.kind}{'.' + rt.group if rt.group else ''}", name, causes)

    # -- after a write: a CRD's resources are served at once ----------------------------------

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        if rt.kind == "CustomResourceDefinition" and not rt.is_custom:
            spec = obj["spec"]
            self.registry.remove_group_resource(spec["group"], spec["names"]["plural"])
            for t in crd_resource_types(obj):
                self.registry.add(t)

    def drop_finalizer(self, rt: ResourceType, obj: Obj, finalizer: str) -> None:
        """The controllers' way to let go of an object they held (`obj`: as stored)."""
        new = deep(obj)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self.write_update(rt, obj, new, INTERNAL)
