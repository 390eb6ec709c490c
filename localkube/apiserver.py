"""API semantics of kube-apiserver on top of the raw store.

Everything that makes a write more than "put a dict": names and generateName, uid,
generation, resourceVersion preconditions, the status subresource split, defaulting and
validation per kind, admission (namespace existence, the ServiceAccount admission plug-in, and
validating webhooks through `webhooks.py`),
custom-resource schemas, finalizers and graceful deletion, and garbage collection of
dependents (Background, Foreground with blockOwnerDeletion, Orphan).

The HTTP layer and every in-process controller go through this class, so a controller's
write behaves exactly like a client's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import network, webhook_config, workloads
from . import patch as patchmod
from . import schema as schemamod
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
from .rbac import UserInfo
from .registry import Registry, ResourceType, crd_resource_types
from .store import DELETED, Event, Obj, Store
from .util import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    deep,
    go_kind,
    meta,
    rand_suffix,
    rfc3339,
    set_condition,
)
from .webhooks import AdmissionRequest, Pending, WebhookIndex

log = logging.getLogger("localkube.apiserver")

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

Cause = tuple[str, str, str]

MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize, also the ConfigMap limit
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _config_key_errors(key: str) -> list[str]:
    """validation.IsConfigMapKey."""
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not CONFIG_KEY.match(key):
        errs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                    "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        errs.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


@dataclass
class Ctx:
    """Who is asking and how. `user=None` means an in-process controller (all-powerful)."""

    user: UserInfo | None = None
    dry_run: bool = False
    field_validation: str = "Warn"
    warnings: list[str] = field(default_factory=list)
    # Controllers may write fields (pod binding, status of immutable specs) clients may not.
    internal: bool = False
    # Set by the HTTP layer, which awaits webhooks when a write raises `webhooks.Pending`. In-process
    # controllers cannot await, so their writes are not sent to admission webhooks.
    webhooks: bool = False
    # The request's options as admission webhooks see them (fieldManager, fieldValidation, dryRun).
    options: dict[str, Any] = field(default_factory=dict)
    # The write is being computed again from what the mutating webhooks made of it: only the
    # validating webhooks are left to see it.
    mutated: bool = False


INTERNAL = Ctx(internal=True)


@dataclass
class DeleteOptions:
    propagation: str | None = None
    grace_period: int | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: Any, query: dict[str, str]) -> DeleteOptions:
        opts = cls()
        if isinstance(body, dict):
            opts.propagation = body.get("propagationPolicy")
            if body.get("orphanDependents") is True and opts.propagation is None:
                opts.propagation = "Orphan"
            if body.get("orphanDependents") is False and opts.propagation is None:
                opts.propagation = "Background"
            gp = body.get("gracePeriodSeconds")
            if gp is not None:
                opts.grace_period = int(gp)
            pre = body.get("preconditions") or {}
            opts.precondition_uid = pre.get("uid")
            opts.precondition_rv = pre.get("resourceVersion")
            if body.get("dryRun"):
                opts.dry_run = True
        if "propagationPolicy" in query:
            opts.propagation = query["propagationPolicy"]
        if "gracePeriodSeconds" in query:
            try:
                opts.grace_period = int(query["gracePeriodSeconds"])
            except ValueError as e:
                raise bad_request(f"invalid gracePeriodSeconds: {query['gracePeriodSeconds']!r}") from e
        if query.get("dryRun"):
            opts.dry_run = True
        if opts.propagation not in (None, "Orphan", "Background", "Foreground"):
            raise invalid("DeleteOptions", "", [(
                "propagationPolicy", "FieldValueNotSupported",
                f'Unsupported value: "{opts.propagation}": supported values: "Foreground", "Background", "Orphan", "nil"',
            )])
        return opts

    def review_options(self) -> dict[str, Any]:
        """The DeleteOptions object an admission webhook is shown."""
        out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period is not None:
            out["gracePeriodSeconds"] = self.grace_period
        pre = {k: v for k, v in (("uid", self.precondition_uid), ("resourceVersion", self.precondition_rv)) if v}
        if pre:
            out["preconditions"] = pre
        if self.propagation:
            out["propagationPolicy"] = self.propagation
        if self.dry_run:
            out["dryRun"] = ["All"]
        return out


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


def _default_containers(spec: Obj) -> None:
    """Container defaults of a pod spec (pods and pod templates alike)."""
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        image = str(c.get("image") or "")
        tag = image.rsplit("/", 1)[-1]
        c.setdefault("imagePullPolicy", "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in tag
                     else "IfNotPresent")
        c.setdefault("resources", {})


def _drop_empty_maps(meta: Obj) -> None:
    """Typed objects round-trip through omitempty: an empty labels/annotations map is not stored."""
    for key in ("labels", "annotations", "finalizers", "ownerReferences"):
        if key in meta and not meta[key]:
            del meta[key]


def _blocks(dependent: Obj, owner_uid: str) -> bool:
    return any(r.get("uid") == owner_uid and r.get("blockOwnerDeletion")
               for r in dependent["metadata"].get("ownerReferences") or [])


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
        # uid -> set of (group, resource, namespace, name) of objects naming it as an owner.
        self._dependents: dict[str, set[tuple[str, str, str, str]]] = {}
        self._gc_queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._gc_task: asyncio.Task[None] | None = None
        # Hook for the kubelet: called when a running pod is asked to terminate gracefully.
        self.on_pod_terminating: Callable[[Obj], None] | None = None
        self.webhooks = WebhookIndex(store)
        store.add_listener(self._index)
        for _key, obj in store.iter_all():
            self._index_obj(obj)
        # CRDs stored before a restart register their resources again.
        for crd in store.select(("apiextensions.k8s.io", "customresourcedefinitions")):
            if not crd["metadata"].get("deletionTimestamp") or crd["metadata"].get("finalizers"):
                for rt in crd_resource_types(crd):
                    registry.add(rt)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._gc_task = asyncio.get_running_loop().create_task(self._gc_loop())
        # Objects whose owners vanished while we were down (or never existed) are collected.
        for _key, obj in self.store.iter_all():
            if obj["metadata"].get("ownerReferences"):
                self._gc_queue.put_nowait(("orphan-check", obj["metadata"]["uid"]))
            if obj["metadata"].get("deletionTimestamp"):
                self._gc_queue.put_nowait(("finalizers", obj["metadata"]["uid"]))

    async def stop(self) -> None:
        if self._gc_task:
            self._gc_task.cancel()
            try:
                await self._gc_task
            except asyncio.CancelledError:
                pass

    # -- reads -------------------------------------------------------------------------------

    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.qualified, name)
        return self._present(rt, obj)

    def find(self, rt: ResourceType, ns: str, name: str) -> Obj | None:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        return None if obj is None else self._present(rt, obj)

    def list_objects(self, rt: ResourceType, ns: str | None) -> list[Obj]:
        return [self._present(rt, o) for o in self.store.select(rt.key, ns if rt.namespaced else None)]

    def _present(self, rt: ResourceType, obj: Obj) -> Obj:
        """A copy in the requested version (custom resources may be served in several)."""
        out = deep(obj)
        if rt.is_custom:
            out["apiVersion"] = rt.group_version
        return out

    # -- create ------------------------------------------------------------------------------

    def create(self, rt: ResourceType, ns: str, body: Any, ctx: Ctx = INTERNAL) -> Obj:
        obj = self._decode(rt, body)
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
            self._admit_namespace(ns, rt, name)
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
                self._present(rt, obj), None, self._user(ctx), ctx.dry_run, self._options("CreateOptions", ctx),
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
            return self._present(rt, obj)
        stored = self.store.put(rt.key, obj)
        self._after_write(rt, stored)
        return self._present(rt, stored)

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

    def _decode(self, rt: ResourceType, body: Any) -> Obj:
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
        self._check_field_types(rt, obj)
        if rt.key in webhook_config.KINDS:
            webhook_config.check_types(obj, rt.kind)
        return obj

    @staticmethod
    def _check_field_types(rt: ResourceType, obj: Obj) -> None:
        """The typed decoding of the real server: a map of strings that holds something else cannot be
        decoded at all, so it is a 400 before any validation (not a 422)."""
        fields: list[tuple[str, str, Any, str]] = []  # (Go struct, path, value, element type)
        m = obj.get("metadata") or {}
        for f in ("labels", "annotations"):
            fields.append(("ObjectMeta", f"metadata.{f}", m.get(f), "string"))
        if rt.kind == "ConfigMap" and not rt.is_custom:
            fields += [("ConfigMap", "data", obj.get("data"), "string"),
                       ("ConfigMap", "binaryData", obj.get("binaryData"), "[]uint8")]
        elif rt.kind == "Secret" and not rt.is_custom:
            fields += [("Secret", "data", obj.get("data"), "[]uint8"),
                       ("Secret", "stringData", obj.get("stringData"), "string")]
        for struct, path, value, elem in fields:
            if value is None:
                continue
            if not isinstance(value, dict):
                bad, go_type = value, f"map[string]{elem}"
            else:
                wrong = [v for v in value.values() if not isinstance(v, str) and v is not None]
                if not wrong:
                    continue
                bad, go_type = wrong[0], elem
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: cannot unmarshal '
                f"{go_kind(bad)} into Go struct field {struct}.{path} of type {go_type}"
            )

    def _admit_namespace(self, ns: str, rt: ResourceType, name: str) -> None:
        nsobj = self.store.get(("", "namespaces"), "", ns)
        if nsobj is None:
            raise not_found("namespaces", ns)
        if nsobj["metadata"].get("deletionTimestamp"):
            raise StatusError(
                403,
                f'{rt.qualified} "{name}" is forbidden: unable to create new content in namespace {ns} '
                "because it is being terminated",
            )

    # -- update / patch ----------------------------------------------------------------------

    def update(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: Ctx = INTERNAL, subresource: str = ""
    ) -> Obj:
        if not name:
            # PUT on a collection URL: kube-apiserver has no such route.
            raise method_not_allowed()
        new = self._decode(rt, body)
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
        return self._write_update(rt, old, new, ctx, subresource)

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
        current = self._present(rt, old)
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
        return self._write_update(rt, old, new, ctx, subresource)

    def _write_update(self, rt: ResourceType, old: Obj, new: Obj, ctx: Ctx, subresource: str) -> Obj:
        new = self._decode(rt, new)
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
                "UPDATE", rt, subresource, self._admission_namespace(rt, old), om["name"], self._present(rt, new),
                self._present(rt, old), self._user(ctx), ctx.dry_run, self._options("UpdateOptions", ctx),
            ), ctx, commit=lambda: self._commit_update(rt, old, new, ctx), stale=self._changed_since(rt, old),
                resume=lambda mutated: self._resume_update(rt, old, new, mutated, ctx, subresource))
        return self._commit_update(rt, old, new, ctx)

    def _resume_update(self, rt: ResourceType, old: Obj, new: Obj, mutated: Obj | None, ctx: Ctx,
                       subresource: str) -> Obj:
        """The update again from what the mutating webhooks returned (defaults and validation anew)."""
        if mutated is None:
            mutated = new
        self._check_immutable(rt, new, mutated)
        return self._write_update(rt, old, mutated, dataclasses.replace(ctx, mutated=True), subresource)

    def _commit_update(self, rt: ResourceType, old: Obj, new: Obj, ctx: Ctx) -> Obj:
        m = new["metadata"]
        if _comparable(new) == _comparable(old):
            return self._present(rt, old)  # a no-op write changes nothing, not even resourceVersion
        if ctx.dry_run:
            return self._present(rt, new)
        if m.get("deletionTimestamp") and not m.get("finalizers") and not self._pod_pending_kill(rt, new):
            self._remove(rt, new)
            return self._present(rt, new)
        stored = self.store.put(rt.key, new)
        self._after_write(rt, stored)
        return self._present(rt, stored)

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
                "DELETE", rt, "", self._admission_namespace(rt, old), name, None, self._present(rt, old),
                self._user(ctx), dry_run, opts.review_options(),
            ), ctx, commit=lambda: self._commit_delete(rt, old, opts, ctx), stale=self._changed_since(rt, old),
                resume=lambda _: self.delete(rt, ns, name, opts, dataclasses.replace(ctx, mutated=True)))
        return self._commit_delete(rt, old, opts, ctx)

    def _commit_delete(self, rt: ResourceType, old: Obj, opts: DeleteOptions, ctx: Ctx) -> tuple[Obj, bool]:
        om = old["metadata"]
        if ctx.dry_run or opts.dry_run:
            return self._present(rt, old), False
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
        grace = self._grace(rt, obj, opts)
        if not finalizers and grace == 0:
            gone = self._remove(rt, obj)
            return gone, True
        if m.get("deletionTimestamp"):
            if rt.kind == "Pod" and grace is not None and grace < int(m.get("deletionGracePeriodSeconds") or 0):
                m["deletionGracePeriodSeconds"] = grace
                stored = self.store.put(rt.key, obj)
                self._signal_pod(stored)
                return self._present(rt, stored), False
            return self._present(rt, old), False
        m["deletionTimestamp"] = rfc3339()
        m["deletionGracePeriodSeconds"] = grace or 0
        if finalizers:
            m["finalizers"] = finalizers
        m["resourceVersion"] = om["resourceVersion"]
        stored = self.store.put(rt.key, obj)
        self._after_write(rt, stored)
        if rt.kind == "Pod" and grace:
            self._signal_pod(stored)
        return self._present(rt, stored), False

    def _grace(self, rt: ResourceType, obj: Obj, opts: DeleteOptions) -> int | None:
        if rt.kind != "Pod":
            return 0
        phase = (obj.get("status") or {}).get("phase")
        if not obj.get("spec", {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if opts.grace_period is not None:
            return max(opts.grace_period, 0)
        return int(obj.get("spec", {}).get("terminationGracePeriodSeconds", 30))

    def _pod_pending_kill(self, rt: ResourceType, obj: Obj) -> bool:
        """A running pod whose deletion is in progress waits for the kubelet's final delete."""
        if rt.kind != "Pod":
            return False
        return bool(obj["metadata"].get("deletionGracePeriodSeconds")) and (obj.get("status") or {}).get(
            "phase") not in ("Succeeded", "Failed")

    def _signal_pod(self, pod: Obj) -> None:
        if self.on_pod_terminating is not None:
            self.on_pod_terminating(pod)

    def _delete_namespace(self, rt: ResourceType, obj: Obj) -> Obj:
        m = obj["metadata"]
        if not m.get("deletionTimestamp"):
            m["deletionTimestamp"] = rfc3339()
            m["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"
            obj = self.store.put(rt.key, obj)
            self._gc_queue.put_nowait(("namespace", m["name"]))
        return self._present(rt, obj)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        gone = self.store.remove(rt.key, obj)
        return self._present(rt, gone)

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

    # -- admission: defaults per kind --------------------------------------------------------

    def _prepare_create(self, rt: ResourceType, obj: Obj, ctx: Ctx) -> None:
        kind = rt.kind if not rt.is_custom else "*custom*"
        m = obj["metadata"]
        if kind == "Namespace":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            m.setdefault("labels", {})["kubernetes.io/metadata.name"] = m["name"]
        elif kind == "Pod":
            self._default_pod(obj, ctx)
        elif kind == "Job":
            self._default_job(obj)
        elif kind in ("Deployment", "ReplicaSet"):
            workloads.set_defaults(obj)
        elif kind == "Service":
            network.default_service(obj, self.store.select(network.SERVICES))
        elif kind == "PersistentVolumeClaim":
            spec = obj.setdefault("spec", {})
            if "storageClassName" not in spec:
                default_sc = self._default_storage_class()
                if default_sc:
                    spec["storageClassName"] = default_sc
            spec.setdefault("volumeMode", "Filesystem")
            obj["status"] = {"phase": "Pending"}
            fins = m.setdefault("finalizers", [])
            if PVC_PROTECTION not in fins:
                fins.append(PVC_PROTECTION)
        elif kind == "Secret":
            self._secret_string_data(obj)
            obj.setdefault("type", "Opaque")
        elif kind == "CustomResourceDefinition":
            self._crd_status(obj)
        elif kind == "*custom*":
            self._custom_defaults(rt, obj, ctx)
        elif rt.key in webhook_config.KINDS:
            webhook_config.set_defaults(obj, rt.kind)

    def _prepare_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if rt.kind == "Secret":
            self._secret_string_data(new)
        if rt.is_custom and subresource != "status":
            self._custom_defaults(rt, new, ctx)
        if rt.kind == "CustomResourceDefinition" and subresource != "status":
            self._crd_status(new)
        if rt.key in webhook_config.KINDS:
            webhook_config.set_defaults(new, rt.kind)
        if rt.kind in ("Deployment", "ReplicaSet") and subresource != "status":
            workloads.set_defaults(new)
        if rt.kind == "Service" and subresource != "status":
            network.keep_cluster_ip(new, old)
        if rt.kind == "Namespace" and subresource != "status":
            new["spec"] = deep(old.get("spec", {}))
            if subresource == "finalize":
                pass

    def _default_storage_class(self) -> str | None:
        for sc in self.store.select(("storage.k8s.io", "storageclasses")):
            ann = sc["metadata"].get("annotations") or {}
            if ann.get("storageclass.kubernetes.io/is-default-class") == "true":
                return str(sc["metadata"]["name"])
        return None

    @staticmethod
    def _secret_string_data(obj: Obj) -> None:
        import base64

        sd = obj.pop("stringData", None)
        if isinstance(sd, dict):
            data = obj.setdefault("data", {})
            for k, v in sd.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        for k, v in (obj.get("data") or {}).items():
            try:
                base64.b64decode(v, validate=True)
            except Exception as e:
                raise bad_request(f"illegal base64 data in secret key {k!r}: {e}") from e

    def _default_pod(self, obj: Obj, ctx: Ctx) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("securityContext", {})
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        _default_containers(spec)
        sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = sa
        spec["serviceAccount"] = sa
        ns = obj["metadata"]["namespace"]
        sa_obj = self.store.get(("", "serviceaccounts"), ns, sa)
        if sa_obj is None:
            raise StatusError(
                403,
                f'pods "{obj["metadata"]["name"]}" is forbidden: error looking up service account {ns}/{sa}: '
                f'serviceaccount "{sa}" not found',
            )
        rc = spec.get("runtimeClassName")
        if rc and self.store.get(("node.k8s.io", "runtimeclasses"), "", str(rc)) is None:
            # The RuntimeClass admission plug-in refuses the pod (kube-apiserver answers the same words).
            raise StatusError(403, f'pods "{obj["metadata"]["name"]}" is forbidden: pod rejected: RuntimeClass '
                                   f'"{rc}" not found')
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = sa_obj.get("automountServiceAccountToken", True)
        # A create computed again after mutating webhooks was defaulted already: the volume is not added twice.
        defaulted = any(isinstance(v, dict) and str(v.get("name", "")).startswith("kube-api-access-")
                        and v.get("projected") for v in spec.get("volumes") or [])
        if automount is not False and not defaulted:
            vol_name = "kube-api-access-" + rand_suffix()
            spec.setdefault("volumes", []).append({
                "name": vol_name,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                    ],
                },
            })
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                if isinstance(c, dict) and not any(
                    vm.get("mountPath") == SA_MOUNT for vm in c.get("volumeMounts") or []
                ):
                    c.setdefault("volumeMounts", []).append(
                        {"name": vol_name, "readOnly": True, "mountPath": SA_MOUNT})
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}

    def _default_job(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        m = obj["metadata"]
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", None)
        if spec.get("manualSelector") is None:
            spec.pop("manualSelector")
        template = spec.get("template")
        if isinstance(template, dict):
            tmeta = template.setdefault("metadata", {})
            labels = tmeta.setdefault("labels", {})
            if not spec.get("manualSelector"):
                labels["batch.kubernetes.io/controller-uid"] = m["uid"]
                labels["controller-uid"] = m["uid"]
                labels["batch.kubernetes.io/job-name"] = m["name"]
                labels["job-name"] = m["name"]
                spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": m["uid"]}}
            tspec = template.setdefault("spec", {})
            tspec.setdefault("dnsPolicy", "ClusterFirst")
            tspec.setdefault("schedulerName", "default-scheduler")
            tspec.setdefault("terminationGracePeriodSeconds", 30)
            tspec.setdefault("securityContext", {})
            _default_containers(tspec)
        obj["status"] = {}

    def _crd_status(self, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        accepted = {k: v for k, v in names.items()}
        if names.get("kind") and "listKind" not in accepted:
            accepted["listKind"] = names["kind"] + "List"
        if names.get("kind") and "singular" not in accepted:
            accepted["singular"] = str(names["kind"]).lower()
        status = obj.setdefault("status", {})
        conds = status.setdefault("conditions", [])
        set_condition(conds, "NamesAccepted", "True", reason="NoConflicts", message="no conflicts found")
        set_condition(conds, "Established", "True", reason="InitialNamesAccepted",
                      message="the initial names have been accepted")
        status["acceptedNames"] = accepted
        stored = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
        sv = status.setdefault("storedVersions", [])
        for v in stored:
            if v not in sv:
                sv.append(v)
        names.setdefault("singular", str(names.get("kind", "")).lower())
        names.setdefault("listKind", str(names.get("kind", "")) + "List")
        for v in spec.get("versions") or []:
            if isinstance(v, dict):
                v.setdefault("served", True)

    def _custom_defaults(self, rt: ResourceType, obj: Obj, ctx: Ctx) -> None:
        schema = rt.schema_for(rt.version)
        if not schema:
            return
        m = obj["metadata"]
        body = {k: v for k, v in obj.items() if k != "metadata"}
        body = schemamod.apply_defaults(body, schema)
        pruned, unknown = schemamod.prune(body, schema)
        if unknown and not ctx.internal:
            if ctx.field_validation == "Strict":
                raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{u.lstrip(".")}"'
                                                                        for u in unknown))
            if ctx.field_validation != "Ignore":
                ctx.warnings.extend(f'unknown field "{u.lstrip(".")}"' for u in unknown)
        obj.clear()
        obj.update(pruned)
        obj["metadata"] = m

    # -- validation ----------------------------------------------------------------------------

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> None:
        causes: list[Cause] = []
        m = obj["metadata"]
        name = str(m.get("name", ""))
        causes += self._validate_name(rt, name)
        causes += self._validate_meta(m)
        kind = rt.kind
        if rt.is_custom:
            schema = rt.schema_for(rt.version)
            if schema:
                causes += [(e.field, e.reason, e.message) for e in schemamod.validate_custom_resource(obj, schema)]
        elif kind == "Pod":
            causes += self._validate_pod_spec(obj.get("spec"), "spec")
            if old is not None and not ctx.internal:
                causes += self._validate_pod_update(obj, old)
        elif kind == "Job":
            causes += self._validate_job(obj, old)
        elif kind in ("Deployment", "ReplicaSet"):
            causes += workloads.validate(obj, old)
        elif kind == "Service":
            causes += network.validate_service(obj)
        elif kind == "PersistentVolumeClaim":
            causes += self._validate_pvc(obj, old)
        elif kind in ("ConfigMap", "Secret"):
            causes += self._validate_data(obj, kind)
        elif kind == "CustomResourceDefinition":
            causes += self._validate_crd(obj, old)
        elif rt.key in webhook_config.KINDS:
            causes += webhook_config.validate_configuration(obj, rt.kind)
        elif kind == "RuntimeClass":
            handler = obj.get("handler")
            if not handler:
                causes.append(("handler", "FieldValueRequired", "Required value"))
            elif not isinstance(handler, str) or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", handler):
                causes.append(("handler", "FieldValueInvalid", f'Invalid value: "{handler}": a lowercase RFC 1123 '
                               "label must consist of lower case alphanumeric characters or '-'"))
            elif old is not None and old.get("handler") != handler:
                causes.append(("handler", "FieldValueInvalid", f'Invalid value: "{handler}": field is immutable'))
        elif kind in ("Role", "ClusterRole"):
            for i, r in enumerate(obj.get("rules") or []):
                if not isinstance(r, dict) or not r.get("verbs"):
                    causes.append((f"rules[{i}].verbs", "FieldValueRequired", "Required value: verbs must contain at least one value"))
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef")
            if not isinstance(ref, dict) or not ref.get("name"):
                causes.append(("roleRef.name", "FieldValueRequired", "Required value"))
            elif ref.get("kind") not in (("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)):
                causes.append(("roleRef.kind", "FieldValueNotSupported",
                               f'Unsupported value: "{ref.get("kind")}": supported values: '
                               + ('"Role", "ClusterRole"' if kind == "RoleBinding" else '"ClusterRole"')))
            if old is not None and old.get("roleRef") != ref:
                causes.append(("roleRef", "FieldValueInvalid",
                               f"Invalid value: {json.dumps(ref)}: cannot change roleRef"))
        if causes:
            raise invalid(f"{rt.kind}{'.' + rt.group if rt.group else ''}", name, causes)

    def _validate_name(self, rt: ResourceType, name: str) -> list[Cause]:
        if rt.name_rule == "path":
            if name in (".", ".."):
                return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": may not be \'{name}\'')]
            for bad in ("/", "%"):
                if bad in name:
                    return [("metadata.name", "FieldValueInvalid",
                             f'Invalid value: "{name}": may not contain \'{bad}\'')]
            return []
        if rt.name_rule == "label":
            if len(name) > 63:
                return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": must be no more than 63 characters')]
            if not DNS1123_LABEL.match(name):
                return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {LABEL_MSG}')]
            return []
        if len(name) > 253:
            return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": must be no more than 253 characters')]
        if not DNS1123_SUBDOMAIN.match(name):
            return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {SUBDOMAIN_MSG}')]
        return []

    def _validate_meta(self, m: Obj) -> list[Cause]:
        causes: list[Cause] = []
        # Label and annotation types were checked when the body was decoded (_check_field_types).
        for k, v in (m.get("labels") or {}).items():
            if not isinstance(v, str):
                continue
            prefix, _, lname = k.rpartition("/")
            if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(lname) > 63 or not LABEL_NAME.match(lname):
                causes.append(("metadata.labels", "FieldValueInvalid",
                               f'Invalid value: "{k}": name part must consist of alphanumeric characters, \'-\', \'_\' '
                               "or '.', and must start and end with an alphanumeric character"))
            if len(v) > 63 or not LABEL_VALUE.match(v):
                causes.append(("metadata.labels", "FieldValueInvalid",
                               f'Invalid value: "{v}": a valid label must be an empty string or consist of alphanumeric '
                               "characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
        if sum(len(k) + len(v) for k, v in (m.get("annotations") or {}).items() if isinstance(v, str)) > 262144:
            causes.append(("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes"))
        controllers = 0
        for i, ref in enumerate(m.get("ownerReferences") or []):
            if not isinstance(ref, dict):
                causes.append((f"metadata.ownerReferences[{i}]", "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            for f in ("apiVersion", "kind", "name", "uid"):
                if not ref.get(f):
                    causes.append((f"metadata.ownerReferences[{i}].{f}", "FieldValueRequired", "Required value"))
            if ref.get("controller"):
                controllers += 1
        if controllers > 1:
            causes.append(("metadata.ownerReferences", "FieldValueInvalid",
                           "Invalid value: only one reference can have Controller set to true"))
        return causes

    def _validate_pod_spec(self, spec: Any, path: str) -> list[Cause]:
        causes: list[Cause] = []
        if not isinstance(spec, dict):
            return [(path, "FieldValueRequired", "Required value")]
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append((f"{path}.containers", "FieldValueRequired", "Required value"))
            containers = []
        inits = spec.get("initContainers") or []
        volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)}
        seen: set[str] = set()
        for group, items in (("initContainers", inits), ("containers", containers)):
            for i, c in enumerate(items):
                p = f"{path}.{group}[{i}]"
                if not isinstance(c, dict):
                    causes.append((p, "FieldValueInvalid", "Invalid value: must be an object"))
                    continue
                cname = c.get("name")
                if not cname:
                    causes.append((f"{p}.name", "FieldValueRequired", "Required value"))
                elif not DNS1123_LABEL.match(str(cname)):
                    causes.append((f"{p}.name", "FieldValueInvalid", f'Invalid value: "{cname}": {LABEL_MSG}'))
                elif cname in seen:
                    causes.append((f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{cname}"'))
                else:
                    seen.add(str(cname))
                if not c.get("image"):
                    causes.append((f"{p}.image", "FieldValueRequired", "Required value"))
                crp = c.get("restartPolicy")
                if crp is not None and group == "containers":
                    causes.append((f"{p}.restartPolicy", "FieldValueForbidden",
                                   "Forbidden: may not be set for non-init containers"))
                elif crp not in (None, "Always"):
                    causes.append((f"{p}.restartPolicy", "FieldValueNotSupported",
                                   f'Unsupported value: "{crp}": supported values: "Always"'))
                for j, e in enumerate(c.get("env") or []):
                    ename = e.get("name") if isinstance(e, dict) else None
                    if not ename:
                        causes.append((f"{p}.env[{j}].name", "FieldValueRequired", "Required value"))
                    elif not ENV_NAME.match(str(ename)):
                        causes.append((f"{p}.env[{j}].name", "FieldValueInvalid",
                                       f'Invalid value: "{ename}": a valid environment variable name must consist of '
                                       "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"))
                for j, vm in enumerate(c.get("volumeMounts") or []):
                    if not isinstance(vm, dict) or vm.get("name") not in volumes:
                        causes.append((f"{p}.volumeMounts[{j}].name", "FieldValueNotFound",
                                       f'Not found: "{vm.get("name") if isinstance(vm, dict) else vm}"'))
                    elif not str(vm.get("mountPath") or "").startswith("/"):
                        causes.append((f"{p}.volumeMounts[{j}].mountPath", "FieldValueRequired", "Required value"))
        rp = spec.get("restartPolicy")
        if rp not in (None, "Always", "OnFailure", "Never"):
            causes.append((f"{path}.restartPolicy", "FieldValueNotSupported",
                           f'Unsupported value: "{rp}": supported values: "Always", "OnFailure", "Never"'))
        names = [v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)]
        for i, n in enumerate(names):
            if n in names[:i]:
                causes.append((f"{path}.volumes[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{n}"'))
        ads = spec.get("activeDeadlineSeconds")
        if ads is not None and (not isinstance(ads, int) or ads <= 0):
            causes.append((f"{path}.activeDeadlineSeconds", "FieldValueInvalid",
                           f"Invalid value: {ads}: must be between 1 and 2147483647, inclusive"))
        return causes

    @staticmethod
    def _validate_pod_update(new: Obj, old: Obj) -> list[Cause]:
        a, b = deep(new.get("spec") or {}), deep(old.get("spec") or {})
        for s in (a, b):
            s.pop("activeDeadlineSeconds", None)
            s.pop("tolerations", None)
            for c in (s.get("containers") or []) + (s.get("initContainers") or []):
                if isinstance(c, dict):
                    c.pop("image", None)
        if a != b:
            return [("spec", "FieldValueForbidden",
                     "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                     "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                     "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                     "(allow it to be set to 1 if it was previously negative)")]
        return []

    def _validate_job(self, obj: Obj, old: Obj | None) -> list[Cause]:
        spec = obj.get("spec")
        causes: list[Cause] = []
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        name = obj["metadata"]["name"]
        if len(name) > 63:
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{name}": must be no more than 63 characters'))
        template = spec.get("template")
        if not isinstance(template, dict):
            return [*causes, ("spec.template", "FieldValueRequired", "Required value")]
        causes += self._validate_pod_spec(template.get("spec"), "spec.template.spec")
        rp = (template.get("spec") or {}).get("restartPolicy")
        if rp not in ("OnFailure", "Never"):
            if rp is None:
                causes.append(("spec.template.spec.restartPolicy", "FieldValueRequired",
                               'Required value: valid values: "OnFailure", "Never"'))
            else:
                causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                               f'Unsupported value: "{rp}": supported values: "OnFailure", "Never"'))
        for f in ("backoffLimit", "ttlSecondsAfterFinished", "parallelism", "completions"):
            v = spec.get(f)
            if v is not None and (not isinstance(v, int) or v < 0):
                causes.append((f"spec.{f}", "FieldValueInvalid",
                               f"Invalid value: {json.dumps(v)}: must be greater than or equal to 0"))
        ads = spec.get("activeDeadlineSeconds")
        if ads is not None and (not isinstance(ads, int) or ads <= 0):
            causes.append(("spec.activeDeadlineSeconds", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(ads)}: must be greater than or equal to 0"))
        if old is not None:
            ospec = old.get("spec") or {}
            if spec.get("selector") != ospec.get("selector"):
                causes.append(("spec.selector", "FieldValueInvalid", "Invalid value: field is immutable"))
            if spec.get("template") != ospec.get("template") and not ospec.get("suspend"):
                causes.append(("spec.template", "FieldValueInvalid",
                               "Invalid value: field is immutable"))
            if spec.get("completions") != ospec.get("completions"):
                causes.append(("spec.completions", "FieldValueInvalid", "Invalid value: field is immutable"))
        return causes

    @staticmethod
    def _validate_data(obj: Obj, kind: str) -> list[Cause]:
        """ValidateConfigMap / ValidateSecret: key syntax, and at most 1 MiB of data in all."""
        import base64

        causes: list[Cause] = []
        data = obj.get("data") or {}
        binary = (obj.get("binaryData") or {}) if kind == "ConfigMap" else {}
        total = 0
        for bag, values in (("data", data), ("binaryData", binary)):
            if not isinstance(values, dict):
                continue
            for key, value in values.items():
                for msg in _config_key_errors(str(key)):
                    causes.append((f"{bag}[{key}]", "FieldValueInvalid", f'Invalid value: "{key}": {msg}'))
                if bag == "data" and isinstance(binary, dict) and key in binary:
                    causes.append((f"data[{key}]", "FieldValueInvalid",
                                   f'Invalid value: "{key}": duplicate of key present in binaryData'))
                if not isinstance(value, str):
                    continue
                if kind == "Secret" or bag == "binaryData":
                    try:
                        total += len(base64.b64decode(value))
                    except ValueError:
                        total += len(value)
                else:
                    total += len(value.encode())
        if total > MAX_DATA_BYTES:
            # The real server reports the whole object ("") for ConfigMaps and `data` for Secrets.
            causes.append(("data" if kind == "Secret" else "", "FieldValueTooLong",
                           f"Too long: must have at most {MAX_DATA_BYTES} bytes"))
        return causes

    def _validate_pvc(self, obj: Obj, old: Obj | None) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        causes: list[Cause] = []
        modes = spec.get("accessModes")
        valid = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
        if not modes:
            causes.append(("spec.accessModes", "FieldValueRequired", "Required value: at least 1 access mode is required"))
        else:
            for m in modes:
                if m not in valid:
                    causes.append(("spec.accessModes", "FieldValueNotSupported",
                                   f'Unsupported value: "{m}": supported values: "ReadOnlyMany", "ReadWriteMany", '
                                   '"ReadWriteOnce", "ReadWriteOncePod"'))
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if not storage:
            causes.append(("spec.resources[storage]", "FieldValueRequired", "Required value"))
        elif not re.match(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$", str(storage)):
            causes.append(("spec.resources.requests[storage]", "FieldValueInvalid",
                           f'Invalid value: "{storage}": quantities must match the regular expression '
                           "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
        if old is not None:
            a, b = deep(spec), deep(old.get("spec") or {})
            for s in (a, b):
                s.pop("resources", None)
                s.pop("volumeName", None)
            if a != b:
                causes.append(("spec", "FieldValueForbidden",
                               "Forbidden: spec is immutable after creation except resources.requests and "
                               "volumeAttributesClassName for bound claims"))
        return causes

    def _validate_crd(self, obj: Obj, old: Obj | None) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        causes: list[Cause] = []
        group = spec.get("group") or ""
        names = spec.get("names") or {}
        if not group:
            causes.append(("spec.group", "FieldValueRequired", "Required value"))
        elif "." not in group:
            causes.append(("spec.group", "FieldValueInvalid", f'Invalid value: "{group}": should be a domain with at least one dot'))
        for f in ("plural", "kind"):
            if not names.get(f):
                causes.append((f"spec.names.{f}", "FieldValueRequired", "Required value"))
        if names.get("plural") and group and obj["metadata"]["name"] != f"{names['plural']}.{group}":
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural+"."+spec.group'))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(("spec.scope", "FieldValueNotSupported",
                           f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"'))
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            causes.append(("spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version"))
        else:
            if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
                causes.append(("spec.versions", "FieldValueInvalid",
                               "Invalid value: must have exactly one version marked as storage version"))
            for i, v in enumerate(versions):
                if not isinstance(v, dict) or not v.get("name"):
                    causes.append((f"spec.versions[{i}].name", "FieldValueRequired", "Required value"))
                    continue
                schema = ((v.get("schema") or {}).get("openAPIV3Schema"))
                if schema is None:
                    causes.append((f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueRequired",
                                   "Required value: schemas are required"))
                elif isinstance(schema, dict):
                    for msg in schemamod.check_structural(schema):
                        causes.append((f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueInvalid", msg))
        if old is not None:
            ospec = old.get("spec") or {}
            if ospec.get("group") != spec.get("group"):
                causes.append(("spec.group", "FieldValueInvalid", "Invalid value: field is immutable"))
            if (ospec.get("names") or {}).get("plural") != names.get("plural"):
                causes.append(("status.acceptedNames.plural", "FieldValueInvalid", "Invalid value: field is immutable"))
            if ospec.get("scope") != spec.get("scope"):
                causes.append(("spec.scope", "FieldValueInvalid", "Invalid value: field is immutable"))
        return causes

    # -- after a write: CRD registration, GC bookkeeping -------------------------------------

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        m = obj["metadata"]
        if rt.kind == "CustomResourceDefinition" and not rt.is_custom:
            spec = obj["spec"]
            self.registry.remove_group_resource(spec["group"], spec["names"]["plural"])
            for t in crd_resource_types(obj):
                self.registry.add(t)
        if m.get("deletionTimestamp"):
            self._gc_queue.put_nowait(("finalizers", m["uid"]))
        if m.get("ownerReferences"):
            self._gc_queue.put_nowait(("orphan-check", m["uid"]))

    def _index(self, ev: Event) -> None:
        m = ev.obj["metadata"]
        if ev.old is not None:
            for ref in ev.old["metadata"].get("ownerReferences") or []:
                deps = self._dependents.get(ref.get("uid", ""))
                if deps:
                    deps.discard((*ev.key, m.get("namespace", ""), m["name"]))
        if ev.type != DELETED:
            self._index_obj(ev.obj, ev.key)
        else:
            self._gc_queue.put_nowait(("deleted", (ev.key, ev.obj)))

    def _index_obj(self, obj: Obj, key: tuple[str, str] | None = None) -> None:
        m = obj["metadata"]
        if key is None:
            rt = self._rt_for(obj)
            if rt is None:
                return
            key = rt.key
        for ref in m.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add((*key, m.get("namespace", ""), m["name"]))

    def _rt_for(self, obj: Obj) -> ResourceType | None:
        group = obj.get("apiVersion", "").rpartition("/")[0]
        return self.registry.by_kind(group, obj.get("kind", ""))

    # -- garbage collection ------------------------------------------------------------------

    async def _gc_loop(self) -> None:
        while True:
            what, arg = await self._gc_queue.get()
            try:
                if what == "deleted":
                    key, obj = arg
                    self._gc_deleted(key, obj)
                elif what == "finalizers":
                    self._gc_finalizers(arg)
                elif what == "orphan-check":
                    self._gc_orphan_check(arg)
                elif what == "namespace":
                    self._gc_namespace(arg)
            except StatusError as e:
                log.debug("gc %s: %s", what, e.message)
            except Exception:
                log.exception("garbage collector step %s failed", what)

    def _locate(self, uid: str) -> tuple[ResourceType, Obj] | None:
        found = self.store.by_uid(uid)
        if found is None:
            return None
        rt = self.registry.by_key(*found[0])
        return (rt, found[1]) if rt is not None else None

    def _owner_exists(self, ref: Obj, ns: str) -> bool:
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        rt = self.registry.by_kind(group, str(ref.get("kind", "")))
        if rt is None:
            return True  # unknown kinds cannot be resolved; the real GC leaves such dependents alone too
        owner = self.store.get(rt.key, ns if rt.namespaced else "", str(ref.get("name", "")))
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    def dependents(self, uid: str, key: tuple[str, str]) -> list[Obj]:
        """The stored objects of one type whose ownerReferences name `uid`, by name: from the owner index, no scan."""
        return sorted((obj for rt, obj in self._dependents_of(uid) if rt.key == key),
                      key=lambda o: str(o["metadata"]["name"]))

    def _dependents_of(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        out = []
        for grp, res, ns, name in list(self._dependents.get(uid, ())):
            rt = self.registry.by_key(grp, res)
            obj = self.store.get((grp, res), ns, name) if rt else None
            if rt is not None and obj is not None:
                out.append((rt, obj))
        return out

    def _gc_deleted(self, key: tuple[str, str], obj: Obj) -> None:
        uid = obj["metadata"]["uid"]
        for rt, dep in self._dependents_of(uid):
            self._collect_dependent(rt, dep, uid, "Background")
        self._dependents.pop(uid, None)
        # An owner in foreground deletion may be waiting for this dependent.
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._gc_queue.put_nowait(("finalizers", ref.get("uid")))

    def _collect_dependent(self, rt: ResourceType, dep: Obj, owner_uid: str, propagation: str) -> None:
        m = dep["metadata"]
        ns = m.get("namespace", "")
        others = [r for r in m.get("ownerReferences") or [] if r.get("uid") != owner_uid]
        if any(self._owner_exists(r, ns) for r in others):
            self._strip_owner(rt, dep, owner_uid)
            return
        try:
            self.delete(rt, ns, m["name"], DeleteOptions(propagation=propagation))
        except StatusError as e:
            if e.code != 404:
                raise

    def _strip_owner(self, rt: ResourceType, dep: Obj, owner_uid: str) -> None:
        new = deep(dep)
        new["metadata"]["ownerReferences"] = [
            r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
        ]
        if not new["metadata"]["ownerReferences"]:
            del new["metadata"]["ownerReferences"]
        self._write_update(rt, dep, new, INTERNAL, "")

    def _drop_finalizer(self, rt: ResourceType, obj: Obj, finalizer: str) -> None:
        new = deep(obj)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self._write_update(rt, obj, new, INTERNAL, "")

    def _gc_finalizers(self, uid: str | None) -> None:
        if not uid:
            return
        found = self._locate(uid)
        if found is None:
            return
        rt, obj = found
        m = obj["metadata"]
        if not m.get("deletionTimestamp"):
            return
        fins = m.get("finalizers") or []
        if ORPHAN in fins:
            for drt, dep in self._dependents_of(uid):
                self._strip_owner(drt, dep, uid)
            self._drop_finalizer(rt, obj, ORPHAN)
            return
        if FOREGROUND in fins:
            # Dependents are deleted (blocking ones in the foreground too); the owner goes once no
            # dependent with blockOwnerDeletion is left, as the real garbage collector does.
            for drt, dep in self._dependents_of(uid):
                if not dep["metadata"].get("deletionTimestamp"):
                    # As attemptToDeleteItem: a dependent that has dependents of its own goes in the
                    # foreground too (so the chain is waited for); a leaf goes in the background.
                    nested = bool(self._dependents_of(dep["metadata"]["uid"]))
                    self._collect_dependent(drt, dep, uid, "Foreground" if nested else "Background")
            if not any(_blocks(d, uid) for _, d in self._dependents_of(uid)):
                found = self._locate(uid)
                if found is not None:
                    self._drop_finalizer(found[0], found[1], FOREGROUND)
            return
        if rt.kind == "PersistentVolumeClaim" and PVC_PROTECTION in fins and not self._pvc_in_use(obj):
            self._drop_finalizer(rt, obj, PVC_PROTECTION)
            return
        if rt.kind == "CustomResourceDefinition" and CRD_CLEANUP in fins:
            spec = obj["spec"]
            crt = self.registry.by_key(spec["group"], spec["names"]["plural"])
            if crt is not None:
                for cr in self.store.select(crt.key):
                    if not cr["metadata"].get("deletionTimestamp"):
                        self.delete(crt, cr["metadata"].get("namespace", ""), cr["metadata"]["name"], DeleteOptions())
                if self.store.count(crt.key):
                    return  # custom resources with finalizers of their own hold the CRD
            self.registry.remove_group_resource(spec["group"], spec["names"]["plural"])
            self.store.drop_type((spec["group"], spec["names"]["plural"]))
            self._drop_finalizer(rt, obj, CRD_CLEANUP)

    def _pvc_in_use(self, pvc: Obj) -> bool:
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        for pod in self.store.select(("", "pods"), ns):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for v in (pod.get("spec") or {}).get("volumes") or []:
                if ((v.get("persistentVolumeClaim") or {}).get("claimName")) == name:
                    return True
        return False

    def recheck_pvcs(self, ns: str) -> None:
        """Pods finishing may release protected PVCs that are being deleted."""
        for pvc in self.store.select(("", "persistentvolumeclaims"), ns):
            if pvc["metadata"].get("deletionTimestamp"):
                self._gc_queue.put_nowait(("finalizers", pvc["metadata"]["uid"]))

    def _gc_orphan_check(self, uid: str) -> None:
        found = self._locate(uid)
        if found is None:
            return
        rt, obj = found
        m = obj["metadata"]
        refs = m.get("ownerReferences") or []
        if not refs or m.get("deletionTimestamp"):
            return
        ns = m.get("namespace", "")
        if all(not self._owner_exists(r, ns) for r in refs):
            try:
                self.delete(rt, ns, m["name"], DeleteOptions(propagation="Background"))
            except StatusError as e:
                if e.code != 404:
                    raise

    def _gc_namespace(self, ns: str) -> None:
        remaining = 0
        for rt in self.registry.all():
            if not rt.namespaced or rt.version not in rt.served_versions[:1]:
                continue
            for obj in self.store.select(rt.key, ns):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        self.delete(rt, ns, obj["metadata"]["name"], DeleteOptions(grace_period=None))
                    except StatusError:
                        pass
        nsobj = self.store.get(("", "namespaces"), "", ns)
        if nsobj is None:
            return
        if remaining:
            loop = asyncio.get_running_loop()
            loop.call_later(0.2, self._gc_queue.put_nowait, ("namespace", ns))
            return
        self.store.remove(("", "namespaces"), nsobj)
