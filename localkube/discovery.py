"""Discovery and OpenAPI documents, derived from the registry.

kubectl decides how to talk to a resource from these: which group/version serves a kind,
whether a verb exists, whether the server validates fields itself (`fieldValidation` on
PATCH in OpenAPI v3 tells kubectl it may skip client-side schema validation), and whether
strategic merge patch is accepted (only for built-in kinds).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

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
            sub_kind = {"log": "Pod", "scale": "Scale"}.get(sub, rt.kind)
            resources.append({
                "name": f"{rt.resource}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": sub_kind,
                "verbs": _sub_verbs(sub),
            })
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


def openapi_v3_gv(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.types_in(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    prefix = "/" + _gv_path(group, version)
    for rt in types:
        name = _schema_name(rt)
        ref = f"#/components/schemas/{name}"
        schema: dict[str, Any] = {"type": "object", "x-kubernetes-group-version-kind": _gvk_ext(rt)}
        crd_schema = rt.schema_for(version)
        if crd_schema:
            schema = {**json.loads(json.dumps(crd_schema)), "x-kubernetes-group-version-kind": _gvk_ext(rt)}
            props = schema.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props["metadata"] = {"type": "object"}
        else:
            schema["x-kubernetes-preserve-unknown-fields"] = True
        schemas[name] = schema
        base = f"{prefix}/namespaces/{{namespace}}/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
        paths[base] = _ops(rt, ref, item=False)
        paths[base + "/{name}"] = _ops(rt, ref, item=True)
        for sub in rt.subresources:
            if sub == "log":
                continue
            paths[base + "/{name}/" + sub] = _ops(rt, ref, item=True)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def openapi_v3_index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in registry.group_versions().items():
        for v in versions:
            doc = openapi_v3_gv(registry, group, v)
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
            path = _gv_path(group, v)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


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
