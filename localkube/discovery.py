"""Discovery and OpenAPI documents, derived from the registry.

kubectl decides how to talk to a resource from these: which group/version serves a kind,
whether a verb exists, whether the server validates fields itself (`fieldValidation` on
PATCH in OpenAPI v3 tells kubectl it may skip client-side schema validation), and whether
strategic merge patch is accepted (only for built-in kinds).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any

from . import patch as patchmod
from .registry import Registry, ResourceType

VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "emulationMajor": "1",
    "emulationMinor": "34",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.0-localkube",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(host: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _group_entry(registry: Registry, group: str) -> dict[str, Any]:
    versions = registry.group_versions()[group]
    return {
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
        "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(registry, g) for g in registry.groups_ordered()],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    if group not in registry.group_versions() or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(registry, group)}


def _sub_verbs(sub: str) -> list[str]:
    if sub == "log":
        return ["get"]
    if sub == "token":
        return ["create"]
    if sub == "finalize":
        return ["update"]
    return ["get", "patch", "update"]


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.types_in(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.resource,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = rt.storage_version_hash()
        resources.append(entry)
        for sub in rt.subresources:
            sub_kind = {"log": "Pod", "scale": "Scale", "token": "TokenRequest"}.get(sub, rt.kind)
            sub_entry: dict[str, Any] = {
                "name": f"{rt.resource}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
            }
            if sub == "token":  # a subresource of another group's kind says which
                sub_entry.update(group="authentication.k8s.io", version="v1")
            resources.append({**sub_entry, "kind": sub_kind, "verbs": _sub_verbs(sub)})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# -- OpenAPI v3 ----------------------------------------------------------------------------------

def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _gvk_ext(rt: ResourceType) -> list[dict[str, str]]:
    return [{"group": rt.group, "version": rt.version, "kind": rt.kind}]


def _param(name: str, where: str = "query", required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": {"type": "string", "uniqueItems": True}}


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


def _ops(rt: ResourceType, ref: str, item: bool) -> dict[str, Any]:
    # Operations carry one GVK object; schemas carry a list of them (as the real documents do).
    gvk = _gvk_ext(rt)[0]
    body = {"content": {"application/json": {"schema": {"$ref": ref}}}}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}}
    writes = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
    ops: dict[str, Any] = {}
    if item:
        ops["get"] = {"operationId": f"read{rt.kind}", "responses": ok,
                      "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk}
        ops["put"] = {"operationId": f"replace{rt.kind}", "requestBody": body, "responses": ok,
                      "parameters": writes, "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk}
        patch_types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        if not rt.is_custom:
            patch_types.insert(2, "application/strategic-merge-patch+json")
        ops["patch"] = {
            "operationId": f"patch{rt.kind}",
            "requestBody": {"content": {t: {"schema": {"type": "object"}} for t in patch_types}, "required": True},
            "responses": ok,
            "parameters": [*writes, _param("force")],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        ops["delete"] = {"operationId": f"delete{rt.kind}", "responses": ok,
                         "x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk}
    else:
        ops["get"] = {"operationId": f"list{rt.kind}", "responses": ok,
                      "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk}
        ops["post"] = {"operationId": f"create{rt.kind}", "requestBody": body, "responses": ok,
                       "parameters": writes, "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk}
    return ops


_META_MODELS = frozenset({
    "V1ObjectMeta", "V1ListMeta", "V1OwnerReference", "V1ManagedFieldsEntry", "V1LabelSelector",
    "V1LabelSelectorRequirement", "V1Condition", "V1Status", "V1StatusDetails", "V1StatusCause",
})


def _model_package(group: str, version: str) -> str:
    if group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}"
    return f"io.k8s.api.{group.split('.')[0] if group else 'core'}.{version}"


def _patch_extensions(owner: str, field_name: str) -> dict[str, str]:
    """x-kubernetes-patch-strategy/-merge-key, from the same field tables the server's own SMP uses."""
    if field_name == "ports":
        return ({"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "containerPort"}
                if owner in ("V1Container", "V1EphemeralContainer") else {})
    if field_name in patchmod.MERGE_KEYS:
        return {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": patchmod.MERGE_KEYS[field_name]}
    if field_name in patchmod.PRIMITIVE_MERGE_LISTS:
        return {"x-kubernetes-patch-strategy": "merge"}
    return {}


@functools.cache
def _builtin_schemas(group: str, version: str, kind: str) -> tuple[str, dict[str, Any]] | None:
    """The OpenAPI v3 schemas of a built-in kind (its name and every schema it references).

    They are derived from the kubernetes client's generated models, themselves generated from the real
    server's OpenAPI document: properties, descriptions, required fields, and the patch strategies
    kubectl needs to compute a strategic merge patch for `kubectl apply`.
    """
    try:
        from kubernetes.client import models
    except ImportError:  # pragma: no cover - the client is a dependency of the project
        return None
    ver = version[:1].upper() + version[1:]
    prefix = "Core" if not group else group.split(".")[0].capitalize()
    root = next((n for n in (f"{ver}{kind}", f"{prefix}{ver}{kind}") if hasattr(getattr(models, n, None),
                                                                                  "openapi_types")), None)
    if root is None:
        return None
    package = _model_package(group, version)
    names: dict[str, str] = {}
    schemas: dict[str, Any] = {}

    def schema_name(model: str) -> str:
        if model not in names:
            short = re.sub(r"^(?:[A-Z][a-z]+)*V\d+(?:(?:alpha|beta)\d+)?", "", model) or model
            pkg = "io.k8s.apimachinery.pkg.apis.meta.v1" if model in _META_MODELS else package
            name = f"{pkg}.{short}"
            names[model] = name if name not in names.values() else f"{pkg}.{model}"
        return names[model]

    def type_schema(typ: str) -> dict[str, Any]:
        typ = typ.strip()
        if typ.startswith("List[") and typ.endswith("]"):
            return {"type": "array", "items": type_schema(typ[5:-1])}
        if typ.startswith("Dict[") and typ.endswith("]"):
            return {"type": "object", "additionalProperties": type_schema(typ[5:-1].split(",", 1)[1])}
        basic = {"str": {"type": "string"}, "int": {"type": "integer", "format": "int64"},
                 "bool": {"type": "boolean"}, "float": {"type": "number", "format": "double"},
                 "datetime": {"type": "string", "format": "date-time"}, "date": {"type": "string", "format": "date"},
                 "bytes": {"type": "string", "format": "byte"}, "object": {}}
        if typ in basic:
            return dict(basic[typ])
        if hasattr(getattr(models, typ, None), "openapi_types"):
            visit(typ)
            return {"allOf": [{"$ref": f"#/components/schemas/{schema_name(typ)}"}], "default": {}}
        return {}

    def visit(model: str) -> None:
        name = schema_name(model)
        if name in schemas:
            return
        cls = getattr(models, model)
        schemas[name] = {}  # claimed before recursing, for self-referencing types
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].strip()
        props: dict[str, Any] = {}
        required: list[str] = []
        fields = getattr(cls, "model_fields", {})
        for attr, typ in cls.openapi_types.items():
            json_name = cls.attribute_map.get(attr, attr)
            prop = type_schema(typ)
            info = fields.get(attr)
            if info is not None and info.description:
                prop["description"] = info.description
            if info is not None and info.is_required():
                required.append(json_name)
            prop.update(_patch_extensions(model, json_name))
            props[json_name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if doc and not doc.startswith("Attributes:"):
            schema["description"] = " ".join(doc.split())
        if required:
            schema["required"] = required
        schemas[name] = schema

    visit(root)
    return schema_name(root), schemas


def openapi_v3_gv(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.types_in(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    prefix = "/" + _gv_path(group, version)
    for rt in types:
        name = _schema_name(rt)
        builtin = None if rt.is_custom else _builtin_schemas(rt.group, rt.version, rt.kind)
        crd_schema = rt.schema_for(version)
        if builtin is not None:
            name, referenced = builtin
            schemas.update(json.loads(json.dumps(referenced)))
            schema = schemas[name]
            schema["x-kubernetes-group-version-kind"] = _gvk_ext(rt)
        elif crd_schema:
            schema = {**json.loads(json.dumps(crd_schema)), "x-kubernetes-group-version-kind": _gvk_ext(rt)}
            props = schema.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props["metadata"] = {"type": "object"}
        else:
            schema = {"type": "object", "x-kubernetes-group-version-kind": _gvk_ext(rt),
                      "x-kubernetes-preserve-unknown-fields": True}
        schemas[name] = schema
        ref = f"#/components/schemas/{name}"
        base = f"{prefix}/namespaces/{{namespace}}/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
        paths[base] = _ops(rt, ref, item=False)
        paths[base + "/{name}"] = _ops(rt, ref, item=True)
        for sub in rt.subresources:
            if sub in ("log", "token"):
                continue
            paths[base + "/{name}/" + sub] = _ops(rt, ref, item=True)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


# (group, version) -> (what the document was built from, its hash); kubectl asks for the index often.
_DIGESTS: dict[tuple[str, str], tuple[str, str]] = {}


def _gv_signature(registry: Registry, group: str, version: str) -> str:
    return json.dumps([(rt.resource, rt.kind, rt.namespaced, rt.verbs, rt.subresources, rt.crd)
                       for rt in registry.types_in(group, version)], sort_keys=True, default=str)


def openapi_v3_index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in registry.group_versions().items():
        for v in versions:
            signature = _gv_signature(registry, group, v)
            cached = _DIGESTS.get((group, v))
            if cached is not None and cached[0] == signature:
                digest = cached[1]
            else:
                doc = openapi_v3_gv(registry, group, v)
                digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
                _DIGESTS[(group, v)] = (signature, digest)
            path = _gv_path(group, v)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


# The Content-Type kube-openapi answers with (clients ask with "...spec.v2@v1.0+protobuf", which is no valid media type).
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _pb_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2); lengths here are < 2**14, so a varint of <= 2 bytes."""
    n, size = len(payload), b""
    while True:
        byte, n = n & 0x7F, n >> 7
        size += bytes([byte | (0x80 if n else 0)])
        if not n:
            break
    return bytes([number << 3 | 2]) + size + payload


def openapi_v2_protobuf() -> bytes:
    """The Swagger 2.0 document as kubectl asks for it (gnostic's openapi_v2.Document), with no definitions.

    kubectl reads it only to validate kinds the OpenAPI v3 documents do not describe, which here are exactly the
    kinds no CRD defines: with no schema for them it skips its own check, then answers from discovery "no matches
    for kind ... in version ..." as it does against a real API server (whose document does not describe them either).
    """
    info = _pb_field(1, b"Kubernetes") + _pb_field(2, str(VERSION_INFO["gitVersion"]).encode())
    return _pb_field(1, b"2.0") + _pb_field(2, info)


def openapi_v2(registry: Registry) -> dict[str, Any]:
    """A Swagger 2.0 document with one definition per kind (schemas of custom resources included)."""
    definitions: dict[str, Any] = {}
    for rt in registry.all():
        d: dict[str, Any] = {"type": "object", "x-kubernetes-group-version-kind": _gvk_ext(rt)}
        s = rt.schema_for(rt.version)
        if s:
            d = {**json.loads(json.dumps(s)), "x-kubernetes-group-version-kind": _gvk_ext(rt)}
        definitions[_schema_name(rt)] = d
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": {},
        "definitions": definitions,
    }
