"""`agentrun apply -f FILE`: kubectl's apply for the objects an agentrun user writes.

Every object but an AgentRun is applied with server-side apply under its own field manager (`agentrun`), so an edit
of an Agent, a policy, a schedule or a pack reaches the cluster, and a field another manager owns is a conflict that
is reported (and taken over with `--force-conflicts`, as `kubectl apply --server-side --force-conflicts` does).
Every write asks for strict field validation, as kubectl does by default: a misspelt field (`taks:`) is refused,
naming it, and nothing of that object is written. The admission webhooks' warnings are printed as kubectl prints
them (`Warning: ...` on stderr).

An AgentRun is different: it executes once, with the spec it had when it started (SPEC §1.2), so `apply` creates it
when it is absent, says `unchanged` when the file asks for what is stored, and refuses to change an existing run's
spec (saying to delete it or to use another name); nothing is silently ignored.

Each document is one line of outcome, and a bad document — no apiVersion, a kind the cluster does not serve, a
refusal — is one line on stderr that does not stop the documents after it; the exit code is 1 when any failed.
Which resource serves a kind is asked of the cluster (its discovery documents, once per apiVersion), as kubectl does.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from kube import Conflict, KubeError, NotFound, kube_error

from .errors import CliError
from .runs import Session

FIELD_MANAGER = "agentrun"
# A warning header: `299 - "text"` (RFC 7234 warn-code, agent, quoted text), as the API server sends them.
WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')


class Refused(Exception):
    """A document that is not applied: the one line that says why."""


@dataclass(frozen=True)
class Resource:
    """Where a kind is served: the REST path of its collection and whether it lives in a namespace."""

    api_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str, name: str = "") -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        where = f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}" if self.namespaced \
            else f"{base}/{self.plural}"
        return f"{where}/{quote(name, safe='')}" if name else where


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    warnings: list[str]


@dataclass
class Cluster:
    """Raw requests (the typed client has no server-side apply for custom objects, nor its warnings) and the
    cluster's discovery documents, read once per apiVersion."""

    s: Session
    served: dict[str, dict[str, Resource] | None] = field(default_factory=dict)

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                content_type: str = "application/json") -> Answer:
        action = f"{method} {path}"
        api = self.s.api
        try:
            _m, url, headers, data, _p = api.param_serialize(
                method, path, query_params=list((query or {}).items()),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                # The client serialises a JSON body itself; an apply patch (YAML, of which JSON is a part) goes as text.
                body=json.dumps(body) if body is not None and "yaml" in content_type else body,
                auth_settings=["BearerToken"])
            resp: Any = api.call_api(method, url, header_params=headers, body=data)
            resp.read()
        except (HTTPError, OSError, TimeoutError) as e:  # no answer: the typed error says where
            raise kube_error(e, action=action) from e
        warnings = _warnings(resp.headers)
        if not 200 <= resp.status < 300:
            _warn(warnings)  # kubectl prints them with a refusal too (a webhook may warn, then deny)
            raise kube_error(ApiException(http_resp=resp), action=action)
        return Answer(resp.status, json.loads(resp.data) if resp.data else {}, warnings)

    def resource(self, api_version: str, kind: str) -> Resource:
        if api_version not in self.served:
            self.served[api_version] = self._discover(api_version)
        kinds = self.served[api_version]
        if kinds is None:
            raise Refused(f"the cluster serves no API {api_version} (are its CRDs installed?)")
        if kind not in kinds:
            raise Refused(f'the cluster serves no kind "{kind}" in {api_version} (it serves: '
                          f"{', '.join(sorted(kinds)) or 'none'})")
        return kinds[kind]

    def _discover(self, api_version: str) -> dict[str, Resource] | None:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            listed = self.request("GET", path).body
        except NotFound:
            return None
        return {r["kind"]: Resource(api_version, r["name"], bool(r.get("namespaced")))
                for r in listed.get("resources") or [] if "/" not in r.get("name", "")}


def _warnings(headers: Any) -> list[str]:
    """The texts of a response's Warning headers (each once, in order)."""
    if headers is None:
        return []
    values = headers.getlist("Warning") if hasattr(headers, "getlist") else [headers.get("Warning") or ""]
    out: list[str] = []
    for value in values:
        for m in WARNING.finditer(value or ""):
            text = re.sub(r"\\(.)", r"\1", m.group(1))
            if text not in out:
                out.append(text)
    return out


def _warn(texts: list[str]) -> None:
    for text in texts:
        print(f"Warning: {text}", file=sys.stderr, flush=True)


# -- documents -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Document:
    where: str  # FILE, or FILE (document N) when the file holds several
    obj: dict[str, Any]


def documents(files: list[Path]) -> tuple[list[Document], list[str]]:
    """The objects of the files, and one line per document that is not one (a file that is not YAML is one)."""
    docs: list[Document] = []
    problems: list[str] = []
    for f in files:
        try:
            found = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
        except OSError as e:
            raise CliError(f"cannot read {f}: {e}") from e
        except yaml.YAMLError as e:
            problems.append(f"{f}: not YAML: {' '.join(str(e).split())}")
            continue
        for i, d in enumerate(found, 1):
            where = f"{f} (document {i})" if len(found) > 1 else str(f)
            if not isinstance(d, dict):
                problems.append(f"{where}: not an object (a {type(d).__name__})")
            else:
                docs.append(Document(where, d))
    return docs, problems


def describe(obj: dict[str, Any]) -> tuple[str, str, str]:
    """apiVersion, kind and name of a document, or Refused saying which is missing."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    meta = obj.get("metadata")
    if not isinstance(api_version, str) or not api_version:
        raise Refused("no apiVersion (every object needs apiVersion and kind, e.g. apiVersion: sympozium.ai/v1alpha1)")
    if not isinstance(kind, str) or not kind:
        raise Refused(f"no kind (every object needs apiVersion and kind; apiVersion is {api_version})")
    if meta is not None and not isinstance(meta, dict):
        raise Refused("metadata is not an object")
    name = (meta or {}).get("name")
    return api_version, kind, str(name) if isinstance(name, str) else ""


# -- applying ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Applied:
    kind: str
    namespace: str
    name: str
    outcome: str  # created, configured, unchanged

    @property
    def line(self) -> str:
        return f"{self.kind.lower()}/{self.name} {self.outcome}"


def apply_one(cluster: Cluster, obj: dict[str, Any], namespace: str, *, force_conflicts: bool) -> Applied:
    api_version, kind, name = describe(obj)
    resource = cluster.resource(api_version, kind)
    meta = dict(obj.get("metadata") or {})
    ns = str(meta.get("namespace") or namespace) if resource.namespaced else ""
    if resource.namespaced:
        meta["namespace"] = ns
    body = {**obj, "metadata": meta}
    label = f"{kind.lower()}/{name or meta.get('generateName') or '?'}"
    try:
        if kind == "AgentRun":
            return _apply_run(cluster, resource, body, ns, name)
        if not name:
            raise Refused("no metadata.name (apply needs one; a generateName object is created with kubectl create)")
        return _server_side_apply(cluster, resource, body, ns, name, force=force_conflicts)
    except Conflict as e:
        hint = "" if force_conflicts else (" (--force-conflicts takes these fields over, as kubectl apply "
                                           "--server-side --force-conflicts does)")
        raise Refused(f"{label}: {e.message}{hint}") from e
    except KubeError as e:
        if e.status == 0:
            raise  # the cluster cannot be reached: one line from the command line, and no more documents
        raise Refused(f"{label}: {e.message}") from e


def _server_side_apply(cluster: Cluster, resource: Resource, body: dict[str, Any], ns: str, name: str, *,
                       force: bool) -> Applied:
    before = _read(cluster, resource, ns, name)
    query = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
    if force:
        query["force"] = "true"
    answer = cluster.request("PATCH", resource.path(ns, name), query=query, body=body,
                             content_type="application/apply-patch+yaml")
    _warn(answer.warnings)
    if before is None:
        outcome = "created"
    else:
        outcome = "unchanged" if _content(answer.body) == _content(before) else "configured"
    return Applied(body["kind"], ns, name, outcome)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as its writers made it: not its status, nor the bookkeeping of its metadata (a controller's status
    write between the read and the apply changes the resourceVersion, not what was applied)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def _read(cluster: Cluster, resource: Resource, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return cluster.request("GET", resource.path(ns, name)).body
    except NotFound:
        return None


def _apply_run(cluster: Cluster, resource: Resource, body: dict[str, Any], ns: str, name: str) -> Applied:
    """Create the run, or say that the stored one is what the file asks for; a different spec is refused."""
    stored = _read(cluster, resource, ns, name) if name else None
    if stored is None:
        answer = cluster.request("POST", resource.path(ns), body=body,
                                 query={"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"})
        _warn(answer.warnings)
        return Applied("AgentRun", ns, str(answer.body["metadata"]["name"]), "created")
    differs = first_difference(body.get("spec"), stored.get("spec"), "spec")
    if differs is not None:
        raise Refused(f"agentrun/{name}: exists with another {differs}: a run executes once, with the spec it was "
                      f"created with, so apply does not change it; delete it first (agentrun delete {name}) or give "
                      "the new run another name")
    return Applied("AgentRun", ns, name, "unchanged")


def first_difference(wanted: Any, stored: Any, path: str) -> str | None:
    """The first field the file sets to something else than what is stored (fields the file leaves out, such as
    the cluster's defaults, are not compared); None when every field it sets is stored as it says."""
    if isinstance(wanted, dict) and isinstance(stored, dict):
        for key, value in wanted.items():
            found = first_difference(value, stored.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(wanted, list) and isinstance(stored, list) and len(wanted) == len(stored):
        for i, (w, s) in enumerate(zip(wanted, stored, strict=True)):
            found = first_difference(w, s, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if wanted == stored or wanted is None else path


def apply(s: Session, files: list[Path], namespace: str, *, force_conflicts: bool = False) -> tuple[list[Applied], int]:
    """Apply every document of `files` in order: what was applied, and 1 if any document was not (else 0)."""
    docs, problems = documents(files)
    for line in problems:
        print(line, file=sys.stderr, flush=True)
    cluster = Cluster(s)
    applied: list[Applied] = []
    failed = bool(problems)
    for doc in docs:
        try:
            done = apply_one(cluster, doc.obj, namespace, force_conflicts=force_conflicts)
        except Refused as e:
            failed = True
            print(f"{doc.where}: {e}", file=sys.stderr, flush=True)
            continue
        print(done.line, flush=True)
        applied.append(done)
    return applied, 1 if failed else 0


__all__ = ["FIELD_MANAGER", "Applied", "Cluster", "Refused", "apply", "apply_one", "documents", "first_difference"]
