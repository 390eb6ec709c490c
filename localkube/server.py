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
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar, cast
from urllib.parse import parse_qs

import yaml

from . import discovery, tables
from .apiserver import INTERNAL, APIServer, Ctx, DeleteOptions
from .errors import StatusError, bad_request, conflict, invalid, not_found
from .faults import FaultInjector
from .rbac import Attributes, UserInfo, authorize, forbidden_message
from .registry import ResourceType
from .selectors import (
    SelectorError,
    object_fields,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)
from .store import ADDED, DELETED, Event, Expired, Obj, object_rv
from .util import rfc3339, rfc3339_micro
from .webhooks import MAX_ADMISSION_ATTEMPTS, Pending

log = logging.getLogger("localkube.server")

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's limit for JSON request bodies
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
T = TypeVar("T")


# -- protobuf request bodies ---------------------------------------------------------------------
# kubectl's generators (`kubectl create namespace|configmap|secret|serviceaccount|role|rolebinding|job`,
# `kubectl auth can-i`) send built-in objects as application/vnd.kubernetes.protobuf, and client-go
# does not fall back to JSON on a 415. This decodes the kinds those commands send into the JSON form the
# API layer works on. Field numbers are those of k8s.io/api's generated.proto. gogo-protobuf writes every
# non-pointer field, zero or not, so zero scalars are dropped as `omitempty` would drop them; pointer
# fields ("*" types) keep an explicit zero. A non-empty field this table does not know is refused
# rather than silently lost.

PROTOBUF = "application/vnd.kubernetes.protobuf"
_PB_MAGIC = b"k8s\x00"
_META = ("metadata", "ObjectMeta")
_NAME = ("name", "s")
_PB_TYPES: dict[str, dict[int, tuple[str, str]]] = {
    "ObjectMeta": {1: _NAME, 2: ("generateName", "s"), 3: ("namespace", "s"), 4: ("selfLink", "s"),
                   5: ("uid", "s"), 6: ("resourceVersion", "s"), 7: ("generation", "i"),
                   8: ("creationTimestamp", "Time"), 9: ("deletionTimestamp", "Time"),
                   10: ("deletionGracePeriodSeconds", "*i"), 11: ("labels", "{s"), 12: ("annotations", "{s"),
                   13: ("ownerReferences", "[OwnerReference"), 14: ("finalizers", "[s")},
    "OwnerReference": {1: ("kind", "s"), 3: _NAME, 4: ("uid", "s"), 5: ("apiVersion", "s"),
                       6: ("controller", "*b"), 7: ("blockOwnerDeletion", "*b")},
    "LabelSelector": {1: ("matchLabels", "{s"), 2: ("matchExpressions", "[LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", "s"), 2: ("operator", "s"), 3: ("values", "[s")},
    "ObjectReference": {1: ("kind", "s"), 2: ("namespace", "s"), 3: _NAME, 4: ("uid", "s"),
                        5: ("apiVersion", "s"), 6: ("resourceVersion", "s"), 7: ("fieldPath", "s")},
    "LocalObjectReference": {1: _NAME},
    "Namespace": {1: _META, 2: ("spec", "NamespaceSpec"), 3: ("status", "NamespaceStatus")},
    "NamespaceSpec": {1: ("finalizers", "[s")},
    "NamespaceStatus": {1: ("phase", "s")},
    "ConfigMap": {1: _META, 2: ("data", "{s"), 3: ("binaryData", "{y"), 4: ("immutable", "*b")},
    "Secret": {1: _META, 2: ("data", "{y"), 3: ("type", "s"), 4: ("stringData", "{s"), 5: ("immutable", "*b")},
    "ServiceAccount": {1: _META, 2: ("secrets", "[ObjectReference"),
                       3: ("imagePullSecrets", "[LocalObjectReference"),
                       4: ("automountServiceAccountToken", "*b")},
    "Role": {1: _META, 2: ("rules", "[PolicyRule")},
    "ClusterRole": {1: _META, 2: ("rules", "[PolicyRule"), 3: ("aggregationRule", "AggregationRule")},
    "AggregationRule": {1: ("clusterRoleSelectors", "[LabelSelector")},
    "PolicyRule": {1: ("verbs", "[s"), 2: ("apiGroups", "[s"), 3: ("resources", "[s"), 4: ("resourceNames", "[s"),
                   5: ("nonResourceURLs", "[s")},
    "RoleBinding": {1: _META, 2: ("subjects", "[Subject"), 3: ("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: _META, 2: ("subjects", "[Subject"), 3: ("roleRef", "RoleRef")},
    "Subject": {1: ("kind", "s"), 2: ("apiGroup", "s"), 3: _NAME, 4: ("namespace", "s")},
    "RoleRef": {1: ("apiGroup", "s"), 2: ("kind", "s"), 3: _NAME},
    "SelfSubjectAccessReview": {1: _META, 2: ("spec", "SelfSubjectAccessReviewSpec"),
                                3: ("status", "SubjectAccessReviewStatus")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "ResourceAttributes": {1: ("namespace", "s"), 2: ("verb", "s"), 3: ("group", "s"), 4: ("version", "s"),
                           5: ("resource", "s"), 6: ("subresource", "s"), 7: _NAME},
    "NonResourceAttributes": {1: ("path", "s"), 2: ("verb", "s")},
    "SubjectAccessReviewStatus": {1: ("allowed", "b"), 2: ("reason", "s"), 3: ("evaluationError", "s"),
                                  4: ("denied", "b")},
    "TokenRequest": {1: _META, 2: ("spec", "TokenRequestSpec"), 3: ("status", "TokenRequestStatus")},
    "TokenRequestSpec": {1: ("audiences", "[s"), 3: ("boundObjectRef", "BoundObjectReference"),
                         4: ("expirationSeconds", "*i")},
    "TokenRequestStatus": {1: ("token", "s"), 2: ("expirationTimestamp", "Time")},
    "BoundObjectReference": {1: ("kind", "s"), 2: ("apiVersion", "s"), 3: _NAME, 4: ("uid", "s")},
    "Job": {1: _META, 2: ("spec", "JobSpec"), 3: ("status", "JobStatus")},
    "JobSpec": {1: ("parallelism", "*i"), 2: ("completions", "*i"), 3: ("activeDeadlineSeconds", "*i"),
                4: ("selector", "LabelSelector"), 5: ("manualSelector", "*b"), 6: ("template", "PodTemplateSpec"),
                7: ("backoffLimit", "*i"), 8: ("ttlSecondsAfterFinished", "*i"), 9: ("completionMode", "*s"),
                10: ("suspend", "*b")},
    "JobStatus": {4: ("active", "i"), 5: ("succeeded", "i"), 6: ("failed", "i"), 7: ("completedIndexes", "s")},
    "PodTemplateSpec": {1: _META, 2: ("spec", "PodSpec")},
    "PodSpec": {2: ("containers", "[Container"), 3: ("restartPolicy", "s"),
                4: ("terminationGracePeriodSeconds", "*i"), 5: ("activeDeadlineSeconds", "*i"),
                6: ("dnsPolicy", "s"), 7: ("nodeSelector", "{s"), 8: ("serviceAccountName", "s"),
                9: ("serviceAccount", "s"), 10: ("nodeName", "s"), 11: ("hostNetwork", "b"), 12: ("hostPID", "b"),
                13: ("hostIPC", "b"), 15: ("imagePullSecrets", "[LocalObjectReference"), 16: ("hostname", "s"),
                17: ("subdomain", "s"), 19: ("schedulerName", "s"), 20: ("initContainers", "[Container"),
                21: ("automountServiceAccountToken", "*b"), 24: ("priorityClassName", "s")},
    "Container": {1: _NAME, 2: ("image", "s"), 3: ("command", "[s"), 4: ("args", "[s"), 5: ("workingDir", "s"),
                  6: ("ports", "[ContainerPort"), 7: ("env", "[EnvVar"), 8: ("resources", "ResourceRequirements"),
                  9: ("volumeMounts", "[VolumeMount"), 13: ("terminationMessagePath", "s"),
                  14: ("imagePullPolicy", "s"), 16: ("stdin", "b"), 17: ("stdinOnce", "b"), 18: ("tty", "b"),
                  20: ("terminationMessagePolicy", "s")},
    "ContainerPort": {1: _NAME, 2: ("hostPort", "i"), 3: ("containerPort", "i"), 4: ("protocol", "s"),
                      5: ("hostIP", "s")},
    "EnvVar": {1: _NAME, 2: ("value", "s")},
    "ResourceRequirements": {1: ("limits", "{q"), 2: ("requests", "{q")},
    "VolumeMount": {1: _NAME, 2: ("readOnly", "b"), 3: ("mountPath", "s"), 4: ("subPath", "s"),
                    5: ("mountPropagation", "*s"), 6: ("subPathExpr", "s")},
}


class _PBError(ValueError):
    pass


def _pb_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, varint value or length-delimited bytes) of one message."""
    i, n = 0, len(data)

    def varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= n or shift > 63:
                raise _PBError("truncated varint")
            b = data[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while i < n:
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            yield num, wire, varint()
        elif wire == 2:
            size = varint()
            if i + size > n:
                raise _PBError("truncated field")
            yield num, wire, data[i:i + size]
            i += size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield num, wire, data[i:i + size]
            i += size
        else:
            raise _PBError(f"unsupported wire type {wire}")


def _pb_value(typ: str, raw: int | bytes) -> Any:
    """One field's value: "s" string, "y" bytes (base64 in JSON), "b" bool, "i" int, or an embedded message."""
    if typ in ("b", "i"):
        if not isinstance(raw, int):
            raise _PBError("expected a varint field")
        return bool(raw) if typ == "b" else raw - (1 << 64) if raw >= 1 << 63 else raw
    if not isinstance(raw, bytes):
        raise _PBError(f"expected a length-delimited {typ} field")
    if typ == "s":
        return raw.decode()
    if typ == "y":
        return base64.b64encode(raw).decode()
    fields = {num: v for num, _, v in _pb_fields(raw)}
    if typ == "Time":  # metav1.Time: seconds and nanos; JSON carries whole seconds, and null for zero
        seconds = fields.get(1, 0)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds))) if seconds else None
    if typ == "Quantity":  # resource.Quantity: its canonical string
        text = fields.get(1, b"")
        return text.decode() if isinstance(text, bytes) else ""
    return _pb_message(typ, raw)


def _pb_message(name: str, data: bytes) -> Obj:
    schema = _PB_TYPES[name]
    out: Obj = {}
    for num, _, raw in _pb_fields(data):
        field_def = schema.get(num)
        if field_def is None:
            if raw in (0, b""):
                continue  # a zero value the table does not name: nothing is lost
            raise _PBError(f"field {num} of {name} is not supported in protobuf by localkube; send JSON")
        key, typ = field_def
        if typ.startswith("["):
            out.setdefault(key, []).append(_pb_value(typ[1:], raw))
        elif typ.startswith("{"):  # a map: repeated entries of key (1) and value (2)
            if not isinstance(raw, bytes):
                raise _PBError(f"malformed map entry in {key}")
            entry = {n: v for n, _, v in _pb_fields(raw)}
            k, v = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(k, bytes) or not isinstance(v, bytes):
                raise _PBError(f"malformed map entry in {key}")
            out.setdefault(key, {})[k.decode()] = _pb_value({"{q": "Quantity"}.get(typ, typ[1:]), v)
        elif typ.startswith("*"):
            out[key] = _pb_value(typ[1:], raw)
        else:
            value = _pb_value(typ, raw)
            # Scalars are dropped at their zero value (0 also matches False); embedded structs stay, even
            # empty, as they do in the JSON a client would have sent ("resources": {}).
            if value is None or (not isinstance(value, dict) and value in ("", 0)):
                out.pop(key, None)
            else:
                out[key] = value
    return out


def decode_protobuf(data: bytes, kind: str) -> Obj | None:
    """The JSON form of a `k8s\\x00`-framed runtime.Unknown carrying a built-in object of `kind`.

    None when this server cannot decode that kind from protobuf (or the body holds another kind).
    """
    if not data.startswith(_PB_MAGIC):
        raise _PBError("the protobuf body does not start with the k8s magic prefix")
    envelope = {num: v for num, _, v in _pb_fields(data[len(_PB_MAGIC):])}
    type_meta, raw = envelope.get(1, b""), envelope.get(2, b"")
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise _PBError("malformed runtime.Unknown envelope")
    tm = {num: v.decode() for num, _, v in _pb_fields(type_meta) if isinstance(v, bytes)}
    if (tm.get(2) or kind) != kind or kind not in _PB_TYPES:
        return None
    return {"apiVersion": tm.get(1, ""), "kind": kind, **_pb_message(kind, raw)}


def _drain(queue: asyncio.Queue[Event | None]) -> tuple[list[Event], bool]:
    """What a watch's queue holds now, taken without waiting; True when the watch was closed (None queued)."""
    out: list[Event] = []
    while True:
        try:
            ev = queue.get_nowait()
        except asyncio.QueueEmpty:
            return out, False
        if ev is None:
            return out, True
        out.append(ev)


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


def _line(obj: Obj) -> bytes:
    """One line of a watch stream."""
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


async def _watch_disconnect(receive: Receive, disconnected: asyncio.Event) -> None:
    """Set `disconnected` when the client goes away during a streamed response."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            disconnected.set()
            return


class LogSource:
    """What the kubelet offers the /log endpoint."""

    def stream(self, pod: Obj, container: str, *, follow: bool, tail: int | None, timestamps: bool,
               since_seconds: int | None, limit_bytes: int | None,
               disconnected: asyncio.Event, previous: bool = False) -> AsyncIterator[bytes]:
        raise NotImplementedError

    def check(self, pod: Obj, container: str, previous: bool) -> None:
        raise NotImplementedError


@dataclass
class TokenInfo:
    """A ServiceAccount token: a pod's (valid while that pod lives) or a TokenRequest's (valid until it
    expires, while its ServiceAccount and the object it is bound to exist, and for the API server's audience)."""

    namespace: str
    service_account: str
    pod_name: str = ""
    pod_uid: str = ""
    sa_uid: str = ""
    expires: float | None = None  # time.time() of expiry
    bound: tuple[str, str, str] | None = None  # (resource, name, uid) in the token's namespace
    audiences: tuple[str, ...] = ()


# The audience kube-apiserver accepts tokens for (its --api-audiences, by default its issuer's).
API_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
TOKEN_REQUEST_GROUP = "authentication.k8s.io"
MIN_TOKEN_SECONDS = 600  # authenticationvalidation.MinTokenAgeSec
MAX_TOKEN_SECONDS = 1 << 32


@dataclass
class Auth:
    admin_token: str = field(default_factory=lambda: "lk-admin-" + secrets.token_hex(16))
    tokens: dict[str, TokenInfo] = field(default_factory=dict)

    def issue(self, namespace: str, sa: str, pod_name: str, pod_uid: str) -> str:
        token = "lk-sa-" + secrets.token_hex(20)
        self.tokens[token] = TokenInfo(namespace, sa, pod_name, pod_uid)
        return token

    def request(self, info: TokenInfo) -> str:
        """A TokenRequest's token; tokens that expired are forgotten meanwhile."""
        now = time.time()
        for t in [t for t, i in self.tokens.items() if i.expires is not None and i.expires <= now]:
            del self.tokens[t]
        token = "lk-sa-" + secrets.token_hex(20)
        self.tokens[token] = info
        return token

    def revoke_pod(self, pod_uid: str) -> None:
        for t in [t for t, i in self.tokens.items() if i.pod_uid == pod_uid]:
            del self.tokens[t]


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


class _RBACView:
    def __init__(self, api: APIServer) -> None:
        self.store = api.store

    def get_role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.store.get(("rbac.authorization.k8s.io", "roles"), namespace, name)

    def get_cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.store.get(("rbac.authorization.k8s.io", "clusterroles"), "", name)

    def list_role_bindings(self, namespace: str) -> list[Obj]:
        return self.store.select(("rbac.authorization.k8s.io", "rolebindings"), namespace)

    def list_cluster_role_bindings(self) -> list[Obj]:
        return self.store.select(("rbac.authorization.k8s.io", "clusterrolebindings"))


class App:
    def __init__(self, api: APIServer, auth: Auth, *, logs: LogSource | None = None,
                 bookmark_interval: float = 5.0) -> None:
        self.api = api
        self.auth = auth
        self.logs = logs
        self.faults = FaultInjector()
        self.rbac = _RBACView(api)
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
        req.user = self._impersonate(req, self._authenticate(req))
        if path.startswith("/localkube/"):
            await self._admin(req, send, path)
            return
        resource_route = self._parse_resource_path(path)
        if resource_route is None:
            self._authorize_path(req, path)
            await self._non_resource(req, send, path)
            return
        await self._resource(req, send, receive, resource_route)

    def _authenticate(self, req: Request) -> UserInfo:
        authz = req.headers.get("authorization", "")
        if not authz.lower().startswith("bearer "):
            raise StatusError(401, "Unauthorized")
        token = authz[7:].strip()
        if secrets.compare_digest(token, self.auth.admin_token):
            return ADMIN
        info = self.auth.tokens.get(token)
        user = self._token_user(info) if info is not None else None
        if user is None:
            raise StatusError(401, "Unauthorized")
        return user

    def _token_user(self, info: TokenInfo) -> UserInfo | None:
        """Who a ServiceAccount token authenticates as, or None when it is no longer valid."""
        store = self.api.store
        sa = store.get(("", "serviceaccounts"), info.namespace, info.service_account)
        if info.sa_uid:  # a TokenRequest's
            if info.expires is not None and time.time() >= info.expires:
                return None
            if sa is None or sa["metadata"]["uid"] != info.sa_uid:
                return None
            if not set(info.audiences) & set(API_AUDIENCES):
                return None
            if info.bound is not None:
                resource, name, uid = info.bound
                obj = store.get(("", resource), info.namespace, name)
                if obj is None or obj["metadata"]["uid"] != uid:
                    return None
        else:
            pod = store.get(("", "pods"), info.namespace, info.pod_name)
            if pod is None or pod["metadata"]["uid"] != info.pod_uid:
                return None
        return UserInfo.service_account(info.namespace, info.service_account, sa["metadata"]["uid"] if sa else "")

    def _impersonate(self, req: Request, user: UserInfo) -> UserInfo:
        """Impersonate-User/-Group (kubectl --as, --as-group), each allowed only by the `impersonate` verb."""
        name = req.headers.get("impersonate-user", "")
        groups = req.header_values("impersonate-group")
        if not name:
            if groups or any(k.startswith("impersonate-") for k, _ in req.raw_headers):
                raise StatusError(500, "Internal error occurred: requested impersonation of groups or extras "
                                       "without impersonating a user")
            return user
        checks = [Attributes(verb="impersonate", resource_request=True, resource="groups", name=g) for g in groups]
        sa = name.split(":")
        if name.startswith("system:serviceaccount:") and len(sa) == 4:
            checks.insert(0, Attributes(verb="impersonate", resource_request=True, resource="serviceaccounts",
                                        namespace=sa[2], name=sa[3]))
            if not groups:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa[2]}"]
        else:
            checks.insert(0, Attributes(verb="impersonate", resource_request=True, resource="users", name=name))
        if user is not ADMIN:
            for attrs in checks:
                allowed, reason = authorize(user, attrs, self.rbac)
                if not allowed:
                    raise StatusError(403, forbidden_message(user, attrs, reason),
                                      details={"name": attrs.name, "kind": attrs.resource})
        if name != "system:anonymous" and not {"system:authenticated", "system:unauthenticated"} & set(groups):
            groups.append("system:authenticated")
        return UserInfo(name, tuple(groups))

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
            await self._send_json(send, 201, self._token_request(ns, route.name, self._decode_body(req, kind="TokenRequest")))
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
            await self._send_json(send, 201, self._access_review(user, self._decode_body(req, kind=rt.kind)))
            return
        if rt.group == "authorization.k8s.io" and rt.kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
            await self._send_json(send, 201, self._subject_access_review(rt, ns, self._decode_body(req, kind=rt.kind)))
            return
        if rt.kind == "TokenReview":
            await self._send_json(send, 201, self._token_review(self._decode_body(req, kind=rt.kind)))
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
        if ctype == PROTOBUF and kind:
            try:
                decoded = decode_protobuf(req.body, kind)
            except (_PBError, UnicodeDecodeError) as e:
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
        items = [self.api._present(rt, o) for o in self.api.store.select(rt.key, (ns or None) if rt.namespaced else None)
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

        rv_s = req.query.get("resourceVersion", "")
        try:
            timeout = float(req.query.get("timeoutSeconds") or 1800)
        except ValueError as e:
            raise bad_request("invalid timeoutSeconds") from e
        bookmarks = req.query.get("allowWatchBookmarks") in ("true", "1")
        send_initial = req.query.get("sendInitialEvents") == "true"
        table = self._wants_table(req)
        include = req.query.get("includeObject", "Metadata")
        store = self.api.store
        initial: list[Event] = []
        if rv_s in ("", "0") or send_initial:
            since = store.rv
            watcher, backlog = store.open_watch(rt.key, ns, since)
            initial = [Event(object_rv(o), ADDED, rt.key, o) for o in store.select(rt.key, ns)]
        else:
            try:
                since = int(rv_s)
            except ValueError as e:
                raise bad_request(f"invalid resource version: {rv_s!r}") from e
            try:
                watcher, backlog = store.open_watch(rt.key, ns, since)
            except Expired as e:
                await self._stream_start(send)
                status = StatusError(410, f"too old resource version: {e.requested} ({e.oldest})", reason="Expired")
                await self._stream_send(send, {"type": "ERROR", "object": status.status()})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
        disconnected = asyncio.Event()
        watcher_task = asyncio.create_task(_watch_disconnect(receive, disconnected))
        try:
            await self._stream_start(send)
            for ev in initial:
                if match(ev.obj):
                    await self._stream_send(send, self._event_body(rt, ev.type, ev.obj, table, include))
            if send_initial and bookmarks:
                await self._stream_send(send, self._bookmark(rt, str(since), initial_end=True))
            for ev in backlog:
                await self._deliver(send, rt, ev, match, table, include)
            deadline = time.monotonic() + timeout
            while not disconnected.is_set() and not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
                try:
                    item = await asyncio.wait_for(watcher.queue.get(), timeout=min(wait, 1.0))
                except TimeoutError:
                    if bookmarks and time.monotonic() - getattr(watcher, "_last", 0) >= self.bookmark_interval:
                        watcher._last = time.monotonic()  # type: ignore[attr-defined]
                        await self._stream_send(send, self._bookmark(rt, str(store.rv)))
                    continue
                if item is None:
                    break
                # Everything else already queued goes out with it, in one write: one event per turn of
                # the event loop cannot keep up with a busy kind (pods) when the loop is loaded.
                more, closed = _drain(watcher.queue)
                lines = [line for ev in [item, *more] if (line := self._render(rt, ev, match, table, include))]
                if lines:
                    await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
                if closed:
                    break
            if bookmarks and not disconnected.is_set():
                # Events still queued for this watch are sent before the closing bookmark: a client
                # resuming from the bookmark's resourceVersion must not skip them. The queue is drained
                # and store.rv read with no await in between, so every event up to that rv is in `lines`.
                queued, _ = _drain(watcher.queue)
                lines = [line for ev in queued if (line := self._render(rt, ev, match, table, include))]
                lines.append(_line(self._bookmark(rt, str(store.rv))))
                await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass
        finally:
            store.close_watch(watcher)
            watcher_task.cancel()

    async def _deliver(self, send: Send, rt: ResourceType, ev: Event, match: Callable[[Obj], bool],
                       table: bool, include: str) -> None:
        line = self._render(rt, ev, match, table, include)
        if line is not None:
            await send({"type": "http.response.body", "body": line, "more_body": True})

    def _render(self, rt: ResourceType, ev: Event, match: Callable[[Obj], bool], table: bool,
                include: str) -> bytes | None:
        """The watch event line this watch sees for `ev` (None: not one of its objects before or after)."""
        now_match = match(ev.obj)
        was_match = ev.old is not None and match(ev.old)
        if ev.type == DELETED:
            typ = DELETED if now_match or was_match else ""
        elif ev.type == ADDED or ev.old is None:
            typ = ADDED if now_match else ""
        elif now_match and was_match:
            typ = "MODIFIED"
        elif now_match:
            typ = ADDED
        elif was_match:
            typ = DELETED
        else:
            typ = ""
        if not typ:
            return None
        return _line(self._event_body(rt, typ, ev.obj, table, include))

    def _event_body(self, rt: ResourceType, typ: str, obj: Obj, table: bool, include: str) -> Obj:
        o = self.api._present(rt, obj)
        if table:
            return {"type": typ, "object": tables.to_table(rt, [o], include=include,
                                                           resource_version=o["metadata"]["resourceVersion"])}
        return {"type": typ, "object": o}

    def _bookmark(self, rt: ResourceType, rv: str, initial_end: bool = False) -> Obj:
        md: Obj = {"resourceVersion": rv}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": md}}

    async def _stream_start(self, send: Send, ctype: bytes = b"application/json") -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", ctype), (b"transfer-encoding", b"chunked"),
                                (b"cache-control", b"no-cache, private")]})

    async def _stream_send(self, send: Send, obj: Obj) -> None:
        await send({"type": "http.response.body", "body": _line(obj), "more_body": True})

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
        task = asyncio.create_task(_watch_disconnect(receive, disconnected))
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

    # -- authorization reviews ----------------------------------------------------------------

    def _access_review(self, user: UserInfo, body: Any) -> Obj:
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
        allowed, reason = (True, "admin") if user is ADMIN else authorize(user, attrs, self.rbac)
        return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec,
                "status": {"allowed": allowed, **({"reason": reason} if reason else {})}}

    def _subject_access_review(self, rt: ResourceType, ns: str, body: Any) -> Obj:
        """SubjectAccessReview and LocalSubjectAccessReview: RBAC's decision for the user and groups of the spec
        (not for the caller, who needed `create` on the review kind), as their REST storage answers it."""
        local = rt.kind == "LocalSubjectAccessReview"
        if local and not ns:
            raise StatusError(404, "the server could not find the requested resource")
        review = self.api._decode(rt, body)
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
        allowed, reason = authorize(subject, attrs, self.rbac)
        review["metadata"] = {"creationTimestamp": None, **review.get("metadata", {})}
        review["spec"] = spec
        review["status"] = {"allowed": allowed, **({"reason": reason} if reason else {})}
        return review


    def _token_review(self, body: Any) -> Obj:
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
        user: UserInfo | None = None
        audiences: tuple[str, ...] = API_AUDIENCES
        if secrets.compare_digest(token, self.auth.admin_token):
            user = ADMIN
        elif (info := self.auth.tokens.get(token)) is not None:
            user = self._token_user(info)
            audiences = info.audiences or API_AUDIENCES  # a pod's token is the API server's
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

    # -- TokenRequest --------------------------------------------------------------------------

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

    def _token_request(self, ns: str, name: str, body: Any) -> Obj:
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
        sa = self.api.store.get(("", "serviceaccounts"), ns, name)
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
        bound = self._bound_object(ns, spec)
        now = time.time()
        token = self.auth.request(TokenInfo(ns, name, sa_uid=sa["metadata"]["uid"], expires=now + seconds,
                                            bound=bound, audiences=tuple(spec["audiences"])))
        return {"kind": "TokenRequest", "apiVersion": f"{TOKEN_REQUEST_GROUP}/v1",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339()},
                "spec": spec,
                "status": {"token": token,
                           "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + seconds))}}

    def _bound_object(self, ns: str, spec: Obj) -> tuple[str, str, str] | None:
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
        obj = self.api.store.get(("", resource), ns, name)
        if obj is None:
            raise not_found(resource, name)
        uid = obj["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise StatusError(409, f'Operation cannot be fulfilled on {kind} "{name}": the UID in the bound object '
                                   f"reference ({ref['uid']}) does not match the UID in record. The object might have "
                                   "been deleted and then recreated", details={"name": name, "kind": kind})
        spec["boundObjectRef"] = {**ref, "uid": uid}
        return resource, name, uid
