"""The HTTP face of localkube: an ASGI app speaking the Kubernetes REST protocol.

It turns URLs into (group, version, resource, namespace, name, subresource, verb) the way
kube-apiserver's RequestInfo does, authenticates bearer tokens, honours impersonation headers
(`kubectl --as`), authorizes ServiceAccounts through RBAC, applies injected faults, decodes the
request body (JSON, YAML, or the protobuf kubectl's generators send), and then calls `APIServer`.
Watches and log follows are chunked streams; errors are `kind: Status` bodies.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol, TypeVar, cast
from urllib.parse import parse_qs

import yaml

from . import discovery, protobuf, reviews, tables, watch
from .apiserver import APIServer
from .authn import ADMIN, Auth, impersonate
from .errors import StatusError, bad_request, conflict, not_found
from .faults import FaultInjector
from .rbac import Attributes, StoreRBAC, UserInfo, authorize, forbidden_message
from .registry import ResourceType
from .request import INTERNAL, Ctx, DeleteOptions
from .selectors import (
    SelectorError,
    object_fields,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)
from .store import Obj
from .util import rfc3339, rfc3339_micro
from .webhooks import MAX_ADMISSION_ATTEMPTS, Pending

log = logging.getLogger("localkube.server")

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's limit for JSON request bodies
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

T = TypeVar("T")

__all__ = ["ADMIN", "App", "Auth", "LogSource"]  # ADMIN and Auth: where callers have always found them


class LogSource(Protocol):
    """What the kubelet offers the /log endpoint."""

    def stream(self, pod: Obj, container: str, *, follow: bool, tail: int | None, timestamps: bool,
               since_seconds: int | None, limit_bytes: int | None,
               disconnected: asyncio.Event, previous: bool = False) -> AsyncIterator[bytes]: ...

    def check(self, pod: Obj, container: str, previous: bool) -> None: ...


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    user: UserInfo | None = None
    raw_headers: list[tuple[str, str]] = field(default_factory=list)

    def accept(self) -> str:
        return self.headers.get("accept", "application/json")

    def header_values(self, name: str) -> list[str]:
        """Every value of a header that may repeat (Impersonate-Group)."""
        return [v for k, v in self.raw_headers if k == name]


@dataclass
class Route:
    rt: ResourceType | None
    group: str
    version: str
    resource: str
    namespace: str
    name: str
    subresource: str
    watch_path: bool = False


class App:
    def __init__(self, api: APIServer, auth: Auth, *, logs: LogSource | None = None,
                 bookmark_interval: float = 5.0) -> None:
        self.api = api
        self.auth = auth
        self.logs = logs
        self.faults = FaultInjector()
        self.rbac = StoreRBAC(api.store)
        self.bookmark_interval = bookmark_interval
        self.stats: Counter[str] = Counter()
        self.host = "127.0.0.1"
        self._stopping = asyncio.Event()
        # --audit-log: one JSON line per request (who, with what client, what, and the answer's code).
        self.audit: IO[str] | None = None

    def stop_streams(self) -> None:
        self._stopping.set()

    # -- ASGI entry --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        raw_headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        headers = dict(raw_headers)
        query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True).items()}
        req: Request | None = None
        code = 0
        if self.audit is not None:
            inner = send

            async def send(msg: Any) -> None:
                nonlocal code
                if msg.get("type") == "http.response.start":
                    code = int(msg["status"])
                await inner(msg)
        try:
            body = await self._read_body(receive, headers)
            req = Request(scope["method"], scope["path"], query, headers, body, raw_headers=raw_headers)
            await self._handle(req, send, receive)
        except StatusError as e:
            await self._send_json(send, e.code, e.status(), e.headers)
        except Exception as e:  # a bug must still answer with a Status, never drop the connection
            log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            await self._send_json(send, 500, StatusError(500, f"Internal error occurred: {e}").status())
        finally:
            if self.audit is not None:
                user = getattr(req, "user", None)
                self.audit.write(json.dumps({
                    "ts": rfc3339_micro(), "user": user.name if user is not None else "",
                    "groups": list(user.groups) if user is not None else [],
                    "userAgent": headers.get("user-agent", ""), "method": scope["method"], "path": scope["path"],
                    "watch": query.get("watch") in ("1", "true"), "code": code}) + "\n")

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        length = headers.get("content-length")
        if length and length.isdigit() and int(length) > MAX_BODY:
            raise StatusError(413, f"Request entity too large: limit is {MAX_BODY}")
        chunks = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                raise StatusError(413, f"Request entity too large: limit is {MAX_BODY}")
            chunks.append(chunk)
            if not msg.get("more_body"):
                break
        return b"".join(chunks)

    async def _send_json(self, send: Send, code: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        if extra:
            headers += extra
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    # -- routing -----------------------------------------------------------------------------

    async def _handle(self, req: Request, send: Send, receive: Receive) -> None:
        path = req.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            await self._send_text(send, 200, b"ok")
            return
        req.user = impersonate(self.auth.authenticate(req.headers.get("authorization", ""), self.api.store),
                                    req.raw_headers, self.rbac)
        if path.startswith("/localkube/"):
            await self._admin(req, send, path)
            return
        resource_route = self._parse_resource_path(path)
        if resource_route is None:
            self._authorize_path(req, path)
            await self._non_resource(req, send, path)
            return
        await self._resource(req, send, receive, resource_route)

    def _authorize_path(self, req: Request, path: str) -> None:
        user = req.user
        assert user is not None
        if user is ADMIN:
            return
        attrs = Attributes(verb=req.method.lower(), resource_request=False, path=path)
        allowed, reason = authorize(user, attrs, self.rbac)
        if not allowed:
            raise StatusError(403, forbidden_message(user, attrs, reason))

    def _parse_resource_path(self, path: str) -> Route | None:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return None
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        watch_path = False
        if rest[0] == "watch":
            watch_path = True
            rest = rest[1:]
        ns = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns = rest[1]
            rest = rest[2:]
        if not rest:
            return None
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise not_found("", path)
        rt = self.api.registry.lookup(group, version, resource)
        return Route(rt, group, version, resource, ns, name, sub, watch_path)

    # -- non-resource endpoints --------------------------------------------------------------

    async def _send_text(self, send: Send, code: int, data: bytes, ctype: bytes = b"text/plain; charset=utf-8") -> None:
        await send({"type": "http.response.start", "status": code,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    async def _non_resource(self, req: Request, send: Send, path: str) -> None:
        reg = self.api.registry
        self.stats[f"GET {path.split('/')[1] if '/' in path else path}"] += 1
        if req.method != "GET":
            raise StatusError(405, f"the server does not allow this method on the requested resource ({req.method} {path})")
        if path == "/version":
            await self._send_json(send, 200, discovery.VERSION_INFO)
        elif path == "/api":
            await self._send_json(send, 200, discovery.api_versions(self.host))
        elif path == "/apis":
            await self._send_json(send, 200, discovery.api_group_list(reg))
        elif path == "/api/v1":
            await self._send_json(send, 200, discovery.resource_list(reg, "", "v1"))
        elif path.startswith("/apis/"):
            parts = path.split("/")[2:]
            if len(parts) == 1:
                doc = discovery.api_group(reg, parts[0])
            elif len(parts) == 2:
                doc = discovery.resource_list(reg, parts[0], parts[1])
            else:
                doc = None
            if doc is None:
                raise StatusError(404, "the server could not find the requested resource")
            await self._send_json(send, 200, doc)
        elif path == "/openapi/v3":
            await self._send_json(send, 200, discovery.openapi_v3_index(reg))
        elif path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/"):].split("/")
            doc = None
            if parts[0] == "api" and len(parts) == 2:
                doc = discovery.openapi_v3_gv(reg, "", parts[1])
            elif parts[0] == "apis" and len(parts) == 3:
                doc = discovery.openapi_v3_gv(reg, parts[1], parts[2])
            if doc is None:
                raise StatusError(404, "the server could not find the requested resource")
            await self._send_json(send, 200, doc)
        elif path == "/openapi/v2":
            if "protobuf" in req.accept() and "json" not in req.accept():
                await self._send_text(send, 200, discovery.openapi_v2_protobuf(), discovery.OPENAPI_V2_PROTOBUF.encode())
            else:
                await self._send_json(send, 200, discovery.openapi_v2(reg))
        else:
            raise StatusError(404, "the server could not find the requested resource")

    # -- admin endpoints (fault injection, statistics) ---------------------------------------

    async def _admin(self, req: Request, send: Send, path: str) -> None:
        if req.user is not ADMIN:
            raise StatusError(403, f'forbidden: User "{req.user.name if req.user else ""}" cannot {req.method.lower()} path "{path}"')
        if path == "/localkube/faults":
            if req.method == "POST":
                spec = self._json_body(req)
                try:
                    fid = self.faults.add(spec)
                except ValueError as e:
                    raise bad_request(str(e)) from e
                await self._send_json(send, 201, {"id": fid})
            elif req.method == "DELETE":
                self.faults.clear()
                await self._send_json(send, 200, {"cleared": True})
            else:
                await self._send_json(send, 200, {"faults": self.faults.describe()})
        elif path == "/localkube/stats":
            if req.method == "DELETE":
                self.stats.clear()
            await self._send_json(send, 200, {"requests": dict(self.stats), "resourceVersion": self.api.store.rv,
                                              "watches": self.api.store.watcher_count})
        else:
            raise StatusError(404, "the server could not find the requested resource")

    # -- resource endpoints ------------------------------------------------------------------

    def _verb(self, req: Request, route: Route) -> str:
        m = req.method
        if m == "GET":
            if route.name and not route.watch_path:
                return "get"
            if route.watch_path or req.query.get("watch") in ("1", "true", "True"):
                return "watch"
            return "list"
        if m == "POST":
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "patch"
        if m == "DELETE":
            return "delete" if route.name else "deletecollection"
        raise StatusError(405, "the server does not allow this method on the requested resource")

    async def _resource(self, req: Request, send: Send, receive: Receive, route: Route) -> None:
        rt = route.rt
        if rt is None:
            raise StatusError(404, "the server could not find the requested resource")
        verb = self._verb(req, route)
        self.stats[f"{verb} {rt.resource}{'/' + route.subresource if route.subresource else ''}"] += 1
        if route.subresource and route.subresource not in rt.subresources:
            raise StatusError(404, "the server could not find the requested resource")
        if route.namespace and not rt.namespaced:
            raise StatusError(404, "the server could not find the requested resource")
        if verb not in rt.verbs and not route.subresource:
            raise StatusError(405, "the server does not allow this method on the requested resource")
        if route.name and verb == "create" and not route.subresource:
            raise StatusError(405, "the server does not allow this method on the requested resource")
        user = req.user
        assert user is not None
        if user is not ADMIN:
            attrs = Attributes(verb=verb, resource_request=True, api_group=rt.group, resource=rt.resource,
                               subresource=route.subresource, namespace=route.namespace, name=route.name)
            allowed, reason = authorize(user, attrs, self.rbac)
            if not allowed:
                raise StatusError(403, forbidden_message(user, attrs, reason),
                                  details={"name": route.name, "group": rt.group, "kind": rt.resource})
        await self.faults.apply(verb, rt, route.namespace, route.name, route.subresource)
        ctx = Ctx(user=user, dry_run=req.query.get("dryRun") == "All",
                  field_validation=self._field_validation(req), webhooks=True,
                  options={k: req.query[k] for k in ("fieldManager", "fieldValidation") if req.query.get(k)})
        if ctx.dry_run:
            ctx.options["dryRun"] = ["All"]
        if ctx.dry_run is False and req.query.get("dryRun") not in (None, "", "All"):
            raise self._invalid_options(req, "dryRun", f'Unsupported value: []string{{"{req.query["dryRun"]}"}}: '
                                                       'supported values: "All"')
        ns = route.namespace if rt.namespaced else ""
        extra: list[tuple[bytes, bytes]] = []
        if route.subresource == "token":
            if verb != "create":
                raise StatusError(405, "the server does not allow this method on the requested resource")
            await self._send_json(send, 201, reviews.token_request(ns, route.name, self._decode_body(req, kind="TokenRequest"),
                                                                 self.auth, self.api.store))
            return
        if route.subresource == "log":
            await self._pod_log(req, send, receive, rt, ns, route.name)
            return
        if route.subresource == "eviction":
            if verb != "create":
                raise StatusError(405, "the server does not allow this method on the requested resource")
            await self._send_json(send, 201, await self._evict(ctx, rt, ns, route.name,
                                                               self._decode_body(req, kind="Eviction")))
            return
        if rt.kind == "SelfSubjectAccessReview":
            await self._send_json(send, 201, reviews.self_subject_access_review(
                user, self._decode_body(req, kind=rt.kind), self.rbac))
            return
        if rt.group == "authorization.k8s.io" and rt.kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
            await self._send_json(send, 201, reviews.subject_access_review(
                self._decode_body(req, kind=rt.kind), rt, ns, self.rbac, self.api.decode))
            return
        if rt.kind == "TokenReview":
            await self._send_json(send, 201, reviews.token_review(self._decode_body(req, kind=rt.kind), self.auth,
                                                                  self.api.store))
            return
        if verb == "get":
            obj = self.api.get(rt, ns, route.name)
            await self._send_obj(send, req, rt, 200, obj)
        elif verb == "list":
            await self._list(req, send, rt, ns)
        elif verb == "watch":
            await self._watch(req, send, receive, rt, ns if rt.namespaced and ns else None, route)
        elif verb == "create":
            body = self._decode_body(req, kind="" if rt.is_custom else rt.kind)
            if route.subresource:
                raise StatusError(405, "the server does not allow this method on the requested resource")
            obj = await self._admitted(ctx, lambda: self.api.create(rt, ns, body, ctx))
            await self._send_obj(send, req, rt, 201, obj, self._warnings(ctx))
        elif verb == "update":
            body = self._decode_body(req, kind="" if rt.is_custom else rt.kind)
            sub = route.subresource if route.subresource in ("status", "finalize") else ""
            obj = await self._admitted(ctx, lambda: self.api.update(rt, ns, route.name, body, ctx, sub))
            await self._send_obj(send, req, rt, 200, obj, self._warnings(ctx))
        elif verb == "patch":
            ctype = req.headers.get("content-type", "")
            if ctype.startswith("application/apply-patch"):
                # 201 when the apply creates the object. The write itself answers only the object: with admission
                # webhooks to call, _admitted stores what the write left pending and answers that.
                created = self.api.find(rt, ns, route.name) is None
                obj = await self._admitted(ctx, lambda: self._server_side_apply(req, rt, ns, route, ctx))
                await self._send_obj(send, req, rt, 201 if created else 200, obj, self._warnings(ctx))
                return
            obj = await self._admitted(
                ctx, lambda: self.api.patch(rt, ns, route.name, ctype, req.body, ctx, route.subresource))
            await self._send_obj(send, req, rt, 200, obj, self._warnings(ctx))
        elif verb == "delete":
            body = self._decode_body(req, allow_empty=True)
            opts = DeleteOptions.parse(body, req.query)
            if rt.kind == "Job" and opts.propagation is None and rt.version == "v1":
                extra.append((b"warning", b'299 - "child pods are preserved by default when jobs are deleted; set '
                                          b'propagationPolicy=Background to remove them or set propagationPolicy=Orphan '
                                          b'to suppress this warning"'))
            obj, removed = await self._admitted(ctx, lambda: self.api.delete(rt, ns, route.name, opts, ctx))
            # kube-apiserver answers 202 only for a pending deletion the client asked to cascade
            # with orphanDependents=false (a compatibility rule); otherwise 200 with the object.
            cascade = isinstance(body, dict) and body.get("orphanDependents") is False
            await self._send_obj(send, req, rt, 202 if not removed and cascade else 200, obj, extra)
        elif verb == "deletecollection":
            body = self._decode_body(req, allow_empty=True)
            opts = DeleteOptions.parse(body, req.query)
            match = self._matcher(req, rt)
            items = await self._delete_collection(rt, ns, match, opts, ctx)
            await self._send_json(send, 200, self._list_body(rt, items, None))

    async def _admitted(self, ctx: Ctx, write: Callable[[], T]) -> T:
        """Run a write; when admission webhooks must see it first, await them, then store it.

        Webhooks are called while other requests proceed, so the object may change meanwhile: then the
        write is computed again from the new state and sent again, as kube-apiserver retries a conflicting
        update together with its admission. Errors carry the warnings collected so far.
        """
        try:
            for _ in range(MAX_ADMISSION_ATTEMPTS):
                try:
                    return write()
                except Pending as pending:
                    request = pending.request
                    done, result = await self._admit(pending, ctx)
                    if done:
                        return cast(T, result)
            raise conflict(request.rt.qualified, request.name)
        except StatusError as e:
            e.headers = self._warnings(ctx)
            raise

    async def _admit(self, pending: Pending, ctx: Ctx) -> tuple[bool, Any]:
        """Mutating webhooks (then the write computed again from their result), validating webhooks, commit.

        (False, None) when the stored object changed meanwhile and the write must be computed again."""
        webhooks = self.api.webhooks
        if pending.resume is not None:
            obj = await webhooks.mutate(pending.request, pending.hooks, ctx.warnings)
            if pending.stale():
                return False, None
            try:
                return True, pending.resume(obj)
            except Pending as validating:
                pending = validating
        await webhooks.dispatch(pending.request, pending.hooks, ctx.warnings)
        if pending.stale():
            return False, None
        return True, pending.commit()

    async def _delete_collection(self, rt: ResourceType, ns: str, match: Callable[[Obj], bool],
                                 opts: DeleteOptions, ctx: Ctx) -> list[Obj]:
        """deletecollection deletes item by item, each one admitted on its own."""
        out = []
        # Matched on the stored objects (read only): copying every object of the kind for each call made
        # a run's cleanup cost grow with the number of objects in the namespace.
        for obj in self.api.store.select(rt.key, (ns or None) if rt.namespaced else None):
            if not match(obj):
                continue
            m = obj["metadata"]
            try:
                gone, _ = await self._admitted(
                    ctx, functools.partial(self.api.delete, rt, m.get("namespace", ""), m["name"], opts, ctx))
            except StatusError as e:
                if e.code != 404:
                    raise
                continue
            out.append(gone)
        return out

    def _field_validation(self, req: Request) -> str:
        fv = req.query.get("fieldValidation", "Warn") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise self._invalid_options(req, "fieldValidation", f'Unsupported value: "{fv}": supported values: '
                                                                '"Ignore", "Strict", "Warn"')
        return fv

    @staticmethod
    def _invalid_options(req: Request, field: str, message: str) -> StatusError:
        """422 for bad request options, as ValidateCreateOptions/ValidateUpdateOptions report them."""
        kind = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions",
                "DELETE": "DeleteOptions"}.get(req.method, "CreateOptions")
        return StatusError(422, f'{kind}.meta.k8s.io "" is invalid: {field}: {message}',
                           details={"group": "meta.k8s.io", "kind": kind,
                                    "causes": [{"reason": "FieldValueNotSupported", "message": message,
                                                "field": field}]})

    @staticmethod
    def _warnings(ctx: Ctx) -> list[tuple[bytes, bytes]]:
        """RFC 7234 warn-text is a quoted string: escape quotes and backslashes, and replace
        anything that may not appear in a header value (warnings can quote client input)."""
        out = []
        for w in dict.fromkeys(ctx.warnings):  # each text once, as the real warning recorder dedupes
            text = w.replace("\\", "\\\\").replace('"', '\\"')
            text = "".join(ch if 0x20 <= ord(ch) < 0x7F else "?" for ch in text)
            out.append((b"warning", f'299 - "{text}"'.encode()))
        return out

    def _json_body(self, req: Request) -> Any:
        try:
            return json.loads(req.body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise bad_request(f"couldn't get version/kind; json parse error: {e}") from e

    def _decode_body(self, req: Request, allow_empty: bool = False, *, kind: str = "") -> Any:
        if not req.body.strip():
            if allow_empty:
                return None
            raise bad_request("the body of the request was empty")
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip()
        if ctype == protobuf.PROTOBUF and kind:
            try:
                decoded = protobuf.decode_protobuf(req.body, kind)
            except (protobuf.ProtobufError, UnicodeDecodeError) as e:
                raise bad_request(f"unable to decode the protobuf body: {e}") from e
            if decoded is not None:  # otherwise answered below as a format this server does not read
                return decoded
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return yaml.safe_load(req.body)
            except yaml.YAMLError as e:
                raise bad_request(f"error converting YAML to JSON: {e}") from e
        if ctype not in ("application/json", "", "*/*"):
            raise StatusError(415, "the body of the request was in an unknown format - accepted media types include: "
                                   "application/json, application/yaml")
        try:
            return json.loads(req.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise bad_request(f"couldn't get version/kind; json parse error: {e}") from e

    def _server_side_apply(self, req: Request, rt: ResourceType, ns: str, route: Route, ctx: Ctx) -> Obj:
        """Apply without field ownership: creates when absent, otherwise merges (see README)."""
        try:
            body = yaml.safe_load(req.body)
        except yaml.YAMLError as e:
            raise bad_request(f"error decoding YAML: {e}") from e
        if not isinstance(body, dict):
            raise bad_request("apply patch body must be an object")
        if not req.query.get("fieldManager"):
            raise bad_request("PATCH requests with apply content type must specify a fieldManager")
        if self.api.find(rt, ns, route.name) is None:
            body.setdefault("metadata", {})["name"] = route.name
            return self.api.create(rt, ns, body, ctx)
        ctype = "application/merge-patch+json" if rt.is_custom else "application/strategic-merge-patch+json"
        return self.api.patch(rt, ns, route.name, ctype, json.dumps(body).encode(), ctx, route.subresource)

    def _wants_table(self, req: Request) -> bool:
        return "as=Table" in req.accept()

    async def _send_obj(self, send: Send, req: Request, rt: ResourceType, code: int, obj: Obj,
                        extra: list[tuple[bytes, bytes]] | None = None) -> None:
        if self._wants_table(req) and req.method == "GET":
            body = tables.to_table(rt, [obj], include=req.query.get("includeObject", "Metadata"),
                                   resource_version=obj["metadata"].get("resourceVersion", ""))
            await self._send_json(send, code, body, extra)
            return
        await self._send_json(send, code, obj, extra)

    # -- list --------------------------------------------------------------------------------

    def _matcher(self, req: Request, rt: ResourceType) -> Callable[[Obj], bool]:
        try:
            lsel = parse_label_selector(req.query.get("labelSelector", ""))
            fsel = parse_field_selector(req.query.get("fieldSelector", ""), supported_fields(rt.kind))
        except SelectorError as e:
            raise bad_request(str(e)) from e
        kind = rt.kind

        def match(obj: Obj) -> bool:
            if not lsel.matches(obj.get("metadata", {}).get("labels") or {}):
                return False
            return fsel.matches(object_fields(obj, kind))

        return match

    def _list_body(self, rt: ResourceType, items: list[Obj], cont: str | None, remaining: int | None = None) -> Obj:
        md: Obj = {"resourceVersion": str(self.api.store.rv)}
        if cont:
            md["continue"] = cont
        if remaining:
            md["remainingItemCount"] = remaining
        return {"kind": rt.kind + "List", "apiVersion": rt.group_version, "metadata": md, "items": items}

    async def _list(self, req: Request, send: Send, rt: ResourceType, ns: str) -> None:
        match = self._matcher(req, rt)
        # Select on the stored objects, then copy only what is served.
        items = [self.api.present(rt, o) for o in self.api.store.select(rt.key, (ns or None) if rt.namespaced else None)
                 if match(o)]
        limit_s = req.query.get("limit", "")
        cont_in = req.query.get("continue", "")
        start_after: tuple[str, str] | None = None
        if cont_in:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont_in + "=" * (-len(cont_in) % 4)))
                start_after = (tok["ns"], tok["name"])
            except Exception as e:
                raise bad_request(f"continue key is not valid: {e}") from e
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start_after]
        cont = None
        remaining = None
        if limit_s:
            try:
                limit = int(limit_s)
            except ValueError as e:
                raise bad_request(f"invalid limit {limit_s!r}") from e
            if limit > 0 and len(items) > limit:
                remaining = len(items) - limit
                items = items[:limit]
                last = items[-1]["metadata"]
                cont = base64.urlsafe_b64encode(json.dumps(
                    {"ns": last.get("namespace", ""), "name": last["name"], "rv": self.api.store.rv}).encode()
                ).decode().rstrip("=")
        if self._wants_table(req):
            body = tables.to_table(rt, items, include=req.query.get("includeObject", "Metadata"),
                                   resource_version=str(self.api.store.rv), cont=cont)
            await self._send_json(send, 200, body)
            return
        await self._send_json(send, 200, self._list_body(rt, items, cont, remaining))

    # -- watch -------------------------------------------------------------------------------

    async def _watch(self, req: Request, send: Send, receive: Receive, rt: ResourceType, ns: str | None,
                     route: Route) -> None:
        match = self._matcher(req, rt)
        if route.name:  # /watch/namespaces/x/pods/name (deprecated form)
            name = route.name
            inner = match

            def match(obj: Obj) -> bool:
                return obj["metadata"]["name"] == name and inner(obj)

        await watch.serve(send, receive, api=self.api, rt=rt, ns=ns, match=match, query=req.query,
                          table=self._wants_table(req), bookmark_interval=self.bookmark_interval,
                          stopping=self._stopping)

    # -- pod logs ----------------------------------------------------------------------------

    async def _pod_log(self, req: Request, send: Send, receive: Receive, rt: ResourceType, ns: str, name: str) -> None:
        if req.method != "GET":
            raise StatusError(405, "the server does not allow this method on the requested resource")
        pod = self.api.get(rt, ns, name)
        spec = pod.get("spec") or {}
        containers = [c["name"] for c in spec.get("containers") or []]
        inits = [c["name"] for c in spec.get("initContainers") or []]
        container = req.query.get("container", "")
        if not container:
            if len(containers) == 1:
                container = containers[0]
            else:
                msg = (f"a container name must be specified for pod {name}, choose one of: "
                       f"[{' '.join(containers)}]")
                if inits:
                    msg += f" or one of the init containers: [{' '.join(inits)}]"
                raise bad_request(msg)
        if container not in containers + inits:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if self.logs is None:
            raise StatusError(503, "no kubelet is running")
        previous = req.query.get("previous") in ("true", "1")
        self.logs.check(pod, container, previous)

        def int_param(key: str) -> int | None:
            v = req.query.get(key)
            if v in (None, ""):
                return None
            try:
                return int(v)
            except ValueError as e:
                raise bad_request(f"invalid {key}: {v!r}") from e

        follow = req.query.get("follow") in ("true", "1")
        disconnected = asyncio.Event()
        task = asyncio.create_task(watch.watch_disconnect(receive, disconnected))
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"transfer-encoding", b"chunked")]})
            async for chunk in self.logs.stream(
                pod, container, follow=follow, tail=int_param("tailLines"),
                timestamps=req.query.get("timestamps") in ("true", "1"),
                since_seconds=int_param("sinceSeconds"), limit_bytes=int_param("limitBytes"),
                disconnected=disconnected, previous=previous,
            ):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            task.cancel()

    # -- eviction -----------------------------------------------------------------------------

    async def _evict(self, ctx: Ctx, rt: ResourceType, ns: str, name: str, body: Any) -> Obj:
        """POST pods/<name>/eviction, as kube-apiserver's EvictionREST answers it: a pod that still runs gets the
        DisruptionTarget condition (reason EvictionByEvictionAPI), then it is deleted with the Eviction's
        deleteOptions (its grace period, preconditions). PodDisruptionBudgets are not consulted: localkube has no
        disruption controller to compute what they allow, so an eviction is never refused with 429."""
        if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction") \
                or body.get("apiVersion") not in (None, "policy/v1", "policy/v1beta1"):
            raise bad_request("the object provided is unrecognized (expected kind Eviction in policy/v1)")
        md = body.get("metadata") or {}
        if isinstance(md, dict) and md.get("name") not in (None, name):
            raise bad_request("name in URL does not match name in Eviction object")
        opts = DeleteOptions.parse(body.get("deleteOptions") or {}, {})
        pod = self.api.get(rt, ns, name)
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not ctx.dry_run:
            new = json.loads(json.dumps(pod))
            conds = [c for c in (new.setdefault("status", {}).get("conditions") or [])
                     if c.get("type") != "DisruptionTarget"]
            conds.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                          "message": "Eviction API: evicting", "lastTransitionTime": rfc3339()})
            new["status"]["conditions"] = conds
            self.api.update(rt, ns, name, new, INTERNAL, "status")
        await self._admitted(ctx, lambda: self.api.delete(rt, ns, name, opts, ctx))
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
