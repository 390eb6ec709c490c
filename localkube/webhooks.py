"""Admission webhooks: what kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook
plug-ins do.

A `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration` (the kinds themselves are
`webhook_config.py`) names HTTPS endpoints that may change (mutating) or must approve (validating) writes
before they are stored. This module decides which webhooks a write must be sent to (`rules`,
`namespaceSelector`, `objectSelector`, the exemption of the configurations themselves) and calls them
(an `AdmissionReview` v1 over HTTPS verified with `caBundle`, `timeoutSeconds`, `failurePolicy`,
warnings, and the real server's Status for a denial or a failed call). Mutating webhooks are called one
after another (configurations in name order, webhooks in order), each shown the object as the ones
before it left it, and their JSONPatch answers are applied; `reinvocationPolicy: IfNeeded` calls a
webhook once more when a later one changed the object. Validating webhooks are called concurrently.

`APIServer` computes a write synchronously; when a webhook must see it, it raises `Pending`
instead of storing, so that the HTTP layer can await the calls without blocking the event loop
and then commit (or recompute, if the stored object changed while the webhooks were deciding).
A mutating `Pending` carries `resume`, which computes the write again from the mutated object
(defaults and validation again, then the validating webhooks), as the real server decodes, defaults
and validates what its mutating webhooks returned.
With no configuration stored, `WebhookIndex.configured` is False and nothing here runs at all.

What cannot be honoured locally (documented in README.md):
`matchPolicy: Equivalent` (requests match by their own group/version only), `matchConditions`
(CEL; not evaluated, so the webhook is called), and writes made by localkube's own controllers
(Job pods, garbage collection, kubelet status) are not sent to webhooks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import ssl
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import patch as patchmod
from .admission_config import Credentials, WebhookCredentials
from .errors import StatusError, bad_request, not_found
from .rbac import UserInfo
from .registry import ResourceType
from .selectors import LabelSelector, SelectorError, label_selector_from_dict
from .store import Event, Obj, Store
from .webhook_config import (
    CONFIG_KEY,
    DEFAULT_TIMEOUT_SECONDS,
    GROUP,
    KINDS,
    MUTATING_KEY,
    REVIEW_VERSIONS,
    SIDE_EFFECTS,
    go_kind,
)

SERVICES = ("", "services")
log = logging.getLogger("localkube.webhooks")

# Admission never intercepts the objects that configure admission (rules.IsExemptAdmissionConfigurationResource),
# so a broken webhook can always be removed.
EXEMPT_RESOURCES = frozenset({
    "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
    "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
})
# A request whose object keeps changing while its webhooks decide is recomputed this many times.
MAX_ADMISSION_ATTEMPTS = 5


# -- matching -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdmissionRequest:
    """One write as admission sees it (admission.Attributes)."""

    operation: str  # CREATE | UPDATE | DELETE
    rt: ResourceType
    subresource: str
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    user: UserInfo
    dry_run: bool
    options: Obj


@dataclass
class Webhook:
    """One entry of a stored configuration, its selectors parsed once per configuration change."""

    configuration: str
    spec: Obj
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    mutating: bool = False
    _tls: ssl.SSLContext | str | None = field(default=None, repr=False)
    _tls_credentials: Credentials | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def ignore_failures(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"

    @property
    def reinvoke(self) -> bool:
        return self.mutating and self.spec.get("reinvocationPolicy") == "IfNeeded"

    @property
    def timeout(self) -> int:
        return int(self.spec.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)

    def tls(self, credentials: Credentials | None = None) -> ssl.SSLContext | str:
        """The client TLS context trusting `caBundle` (the host's roots without one), presenting the client certificate
        of `credentials` (the admission configuration's for this webhook's server), or why there is none."""
        if self._tls is None or credentials != self._tls_credentials:
            bundle = (self.spec.get("clientConfig") or {}).get("caBundle") or ""
            self._tls_credentials = credentials
            try:
                pem = base64.b64decode(bundle).decode("utf-8", "replace") if bundle else None
                self._tls = ssl.create_default_context(cadata=pem) if pem else ssl.create_default_context()
            except (ssl.SSLError, ValueError):
                self._tls = "unable to load root certificates: unable to parse bytes as PEM block"
                return self._tls
            if credentials is not None:
                try:
                    credentials.load_into(self._tls)
                except (ssl.SSLError, OSError) as e:
                    self._tls = f"unable to load the client certificate of the admission configuration: {e}"
        return self._tls


def _rule_matches(rule: Obj, req: AdmissionRequest) -> bool:
    """rules.Matcher: scope, operation, group, version and resource[/subresource]."""
    rt = req.rt
    scope = rule.get("scope") or "*"
    is_namespace = rt.group == "" and rt.resource == "namespaces"
    if scope == "Namespaced" and (is_namespace or not req.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not req.namespace):
        return False
    ops = rule.get("operations") or []
    if "*" not in ops and req.operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and rt.version not in versions:
        return False
    for res_sub in rule.get("resources") or []:
        res, _, sub = res_sub.partition("/")
        if (res == "*" or res == rt.resource) and (sub == "*" or sub == req.subresource):
            return True
    return False


class WebhookIndex:
    """The stored configurations, parsed once and re-read only when one of them changes."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._hooks: dict[tuple[str, str], list[Webhook]] = {}
        # What to present to each webhook server (--admission-control-config-file; admission_config.py).
        self.credentials = WebhookCredentials.none()
        self.configured = self._count() > 0
        store.add_listener(self._on_commit)

    def _count(self) -> int:
        return sum(self._store.count(key) for key in KINDS)

    def _on_commit(self, ev: Event) -> None:
        if ev.key in KINDS:
            self._hooks.pop(ev.key, None)
            self.configured = self._count() > 0

    def hooks(self, mutating: bool = False) -> list[Webhook]:
        key = MUTATING_KEY if mutating else CONFIG_KEY
        hooks = self._hooks.get(key)
        if hooks is None:
            hooks = []
            # Configurations in name order, webhooks in their order, as the real configuration manager sorts them.
            for cfg in self._store.select(key):
                for spec in cfg.get("webhooks") or []:
                    try:
                        ns_sel = label_selector_from_dict(spec.get("namespaceSelector") or {})
                        obj_sel = label_selector_from_dict(spec.get("objectSelector") or {})
                    except SelectorError:
                        continue  # validation refuses these; a persisted one from an older build is skipped
                    hooks.append(Webhook(cfg["metadata"]["name"], spec, ns_sel, obj_sel, mutating))
            self._hooks[key] = hooks
        return hooks

    def matching(self, req: AdmissionRequest, mutating: bool = False) -> list[Webhook]:
        """The webhooks `req` must be sent to (generic.Webhook.ShouldCallHook)."""
        if req.rt.group == GROUP and req.rt.resource in EXEMPT_RESOURCES:
            return []
        labels: list[dict[str, str] | None] = []  # the namespace's labels, looked up once if needed
        return [hook for hook in self.hooks(mutating) if self._should_call(hook, req, labels)]

    def _should_call(self, hook: Webhook, req: AdmissionRequest, ns_labels: list[dict[str, str] | None]) -> bool:
        if not any(isinstance(r, dict) and _rule_matches(r, req) for r in hook.spec.get("rules") or []):
            return False
        if not hook.namespace_selector.is_empty():
            if not ns_labels:
                ns_labels.append(self._namespace_labels(req))
            if ns_labels[0] is not None and not hook.namespace_selector.matches(ns_labels[0]):
                return False
        return hook.object_selector.is_empty() or any(
            o is not None and hook.object_selector.matches(o.get("metadata", {}).get("labels") or {})
            for o in (req.obj, req.old)
        )

    def _namespace_labels(self, req: AdmissionRequest) -> dict[str, str] | None:
        """None: the request is cluster-scoped and no namespace selector applies to it."""
        is_namespace = req.rt.resource == "namespaces"
        if not req.namespace and not is_namespace:
            return None
        if is_namespace and not req.subresource and req.operation in ("CREATE", "UPDATE") and req.obj is not None:
            # The namespace being written is not stored yet: its labels are those of the request.
            return dict(req.obj.get("metadata", {}).get("labels") or {})
        ns = self._store.get(("", "namespaces"), "", req.namespace or req.name)
        if ns is None:
            raise not_found("namespaces", req.namespace or req.name)
        return dict(ns["metadata"].get("labels") or {})

    # -- calling ----------------------------------------------------------------------------

    async def dispatch(self, req: AdmissionRequest, hooks: list[Webhook], warnings: list[str]) -> None:
        """Call `hooks` concurrently; raise the first refusal (in configuration order), as a Status."""
        results = await asyncio.gather(*(self._call(hook, req, warnings) for hook in hooks))
        for err in results:
            if err is not None:
                raise err

    async def _call(self, hook: Webhook, req: AdmissionRequest, warnings: list[str]) -> StatusError | None:
        try:
            allowed, status, _ = await self._exchange(hook, req, warnings)
        except _CallError as e:
            return _failed(hook, e)
        except StatusError as e:
            return e
        if allowed:
            return None
        return _denial(hook.name, status)

    async def mutate(self, req: AdmissionRequest, hooks: list[Webhook], warnings: list[str]) -> Obj | None:
        """Call the mutating `hooks` one after another, each shown the object as mutated so far; return it.

        Raises the first refusal or failed call (under `failurePolicy: Fail`) as a Status. A webhook with
        `reinvocationPolicy: IfNeeded` is called once more if a webhook after it changed the object
        (mutating.reinvokeContext), as the real server reinvokes it.
        """
        obj = req.obj
        last_change = -1
        for i, hook in enumerate(hooks):
            if i > 0 and not self._should_call(hook, dataclasses.replace(req, obj=obj), []):
                continue  # the object as mutated so far no longer matches its objectSelector
            new = await self._mutate_one(hook, dataclasses.replace(req, obj=obj), warnings)
            if new is not None and new != obj:
                obj, last_change = new, i
        for hook in [h for i, h in enumerate(hooks) if h.reinvoke and i < last_change]:
            new = await self._mutate_one(hook, dataclasses.replace(req, obj=obj), warnings)
            if new is not None:
                obj = new
        return obj

    async def _mutate_one(self, hook: Webhook, req: AdmissionRequest, warnings: list[str]) -> Obj | None:
        """One mutating webhook: the object its patch makes, or None when it allowed without one."""
        try:
            allowed, status, patch = await self._exchange(hook, req, warnings)
        except _CallError as e:
            err = _failed(hook, e)
            if err is not None:
                raise err from e
            return None
        if not allowed:
            raise _denial(hook.name, status)
        if patch is None:
            return None
        try:
            operations = json.loads(patch)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _internal_error(str(e)) from e
        if not operations:
            return None
        if req.obj is None:
            raise _internal_error(f'admission webhook "{hook.name}" attempted to modify the object, which is not '
                                  "supported for this operation")
        try:
            new = patchmod.json_patch(req.obj, operations)
        except patchmod.PatchError as e:
            raise _internal_error(str(e)) from e
        if not isinstance(new, dict):
            raise _internal_error(f"json: cannot unmarshal {go_kind(new)} into Go value of type "
                                  f"{req.rt.kind}")
        return new

    async def _exchange(self, hook: Webhook, req: AdmissionRequest,
                        warnings: list[str]) -> tuple[bool, Obj, bytes | None]:
        """One AdmissionReview round trip: (allowed, status, JSONPatch). Raises _CallError for failed calls."""
        spec = hook.spec
        if req.dry_run:
            effects = spec.get("sideEffects")
            if effects is None:
                raise _CallError("Webhook SideEffects is nil")
            if effects not in SIDE_EFFECTS:
                raise bad_request(f'admission webhook "{hook.name}" does not support dry run')
        version = next((v for v in REVIEW_VERSIONS if v in (spec.get("admissionReviewVersions") or [])), None)
        if version is None:
            raise _CallError("could not create admission objects: webhook does not accept known AdmissionReview "
                             f"versions {list(REVIEW_VERSIONS)}")
        uid = str(uuid.uuid4())
        review = {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}",
                  "request": review_request(req, uid)}
        cc = spec.get("clientConfig") or {}
        url = cc.get("url")
        credentials = self.credentials.for_server(*_server_of(cc))
        tls = hook.tls(credentials)
        if isinstance(tls, str):
            raise _CallError(f"could not get REST client: {tls}")
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*"}
        if credentials is not None and credentials.token:
            headers["Authorization"] = f"Bearer {credentials.token}"
        extensions: dict[str, Any] = {}
        # The deadline travels to the webhook as `?timeout=`, as client-go's request.Timeout sends it.
        if url is None:
            # As kube-apiserver's service resolver: to the Service (here its cluster IP, which localkube's proxy
            # forwards to a ready endpoint), the certificate checked against `<name>.<namespace>.svc`.
            svc = cc.get("service") or {}
            host = f"{svc.get('name')}.{svc.get('namespace')}.svc"
            port = svc.get("port", 443)
            path = svc.get("path") or ""
            target = f"https://{host}:{port}{path}?timeout={hook.timeout}s"
            obj = self._store.get(SERVICES, str(svc.get("namespace")), str(svc.get("name")))
            ip = ((obj or {}).get("spec") or {}).get("clusterIP")
            if not ip or ip == "None":
                raise _CallError(f'failed to call webhook: Post "{target}": dial tcp: lookup {host}: no such host')
            url = f"https://{ip}:{port}{path}"
            extensions["sni_hostname"] = host
        else:
            target = f"{url}?timeout={hook.timeout}s"
        try:
            async with asyncio.timeout(hook.timeout):
                # A client per call: no pooled connection outlives a webhook server that restarted.
                async with httpx.AsyncClient(verify=tls, trust_env=False, timeout=None) as client:
                    resp = await client.post(f"{url}?timeout={hook.timeout}s", content=json.dumps(review).encode(),
                                             headers=headers, extensions=extensions)
        except TimeoutError as e:
            raise _CallError(f'failed to call webhook: Post "{target}": context deadline exceeded') from e
        except (httpx.HTTPError, OSError) as e:
            # OSError too: under TLS 1.3 a server that refuses the client's certificate says so after the handshake,
            # and the alert surfaces as an ssl.SSLError from the first read, which httpcore does not map to httpx's.
            raise _CallError(f'failed to call webhook: Post "{target}": {_transport_error(e, url)}') from e
        if not 200 <= resp.status_code < 300:
            raise _CallError(f"failed to call webhook: {_http_error(resp)}")
        try:
            body = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _CallError(f"failed to call webhook: couldn't get version/kind; json parse error: {e}") from e
        return _verify_response(body, uid, version, warnings, hook.mutating)


def _server_of(client_config: Obj) -> tuple[str, int]:
    """The webhook server's name and port, as the admission configuration's kubeconfig names servers: a URL's host,
    or a Service's `<name>.<namespace>.svc`."""
    url = client_config.get("url")
    if url:
        parts = urlsplit(str(url))
        return parts.hostname or "", parts.port or 443
    svc = client_config.get("service") or {}
    return f"{svc.get('name')}.{svc.get('namespace')}.svc", int(svc.get("port") or 443)


class _CallError(Exception):
    """The webhook could not be asked or did not answer properly: its failurePolicy decides."""


def _failed(hook: Webhook, e: _CallError) -> StatusError | None:
    """A failed call: None under `failurePolicy: Ignore`, else the real server's 500."""
    message = f'failed calling webhook "{hook.name}": {e}'
    if hook.ignore_failures:
        log.warning("Failed calling webhook, failing open %s: %s", hook.name, message)
        return None
    log.warning("Failed calling webhook, failing closed %s: %s", hook.name, message)
    return _internal_error(message)


def _internal_error(message: str) -> StatusError:
    """apierrors.NewInternalError."""
    return StatusError(500, f"Internal error occurred: {message}", reason="InternalError",
                       details={"causes": [{"message": message}]})


def review_request(req: AdmissionRequest, uid: str) -> Obj:
    """admission/v1 AdmissionRequest, with Go's omitempty for the optional strings."""
    rt = req.rt
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.resource}
    out: Obj = {"uid": uid, "kind": kind, "resource": resource}
    if req.subresource:
        out["subResource"] = req.subresource
    out["requestKind"] = dict(kind)
    out["requestResource"] = dict(resource)
    if req.subresource:
        out["requestSubResource"] = req.subresource
    if req.name:
        out["name"] = req.name
    if req.namespace:
        out["namespace"] = req.namespace
    out["operation"] = req.operation
    user: Obj = {"username": req.user.name}
    if req.user.uid:
        user["uid"] = req.user.uid
    user["groups"] = list(req.user.groups)
    out["userInfo"] = user
    out["object"] = req.obj
    out["oldObject"] = req.old
    out["dryRun"] = req.dry_run
    out["options"] = req.options
    return out


def _verify_response(body: Any, uid: str, version: str, warnings: list[str],
                     mutating: bool) -> tuple[bool, Obj, bytes | None]:
    """webhookrequest.VerifyAdmissionResponse: (allowed, status, the JSONPatch of a mutating webhook)."""

    def invalid(detail: str) -> _CallError:
        return _CallError(f"received invalid webhook response: {detail}")

    if not isinstance(body, dict):
        raise _CallError("failed to call webhook: couldn't get version/kind; json parse error: "
                         f"expected an object, got {go_kind(body)}")
    response = body.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if version == "v1":
        # v1beta1 never checked the uid or the kind; v1 does.
        got_uid = response.get("uid") or ""
        if got_uid != uid:
            raise invalid(f'expected response.uid="{uid}", got "{got_uid}"')
        api_version, kind = str(body.get("apiVersion") or ""), str(body.get("kind") or "")
        if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview"):
            group, _, ver = api_version.rpartition("/")
            raise invalid(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
                          f"got {group}/{ver}, Kind={kind}")
    patch: bytes | None = None
    if response.get("patch"):
        if not mutating:
            raise invalid("validating webhook may not return a patch")
        patch_type = response.get("patchType")
        if patch_type is None:
            raise invalid("webhook returned response.patch but not response.patchType")
        if patch_type != "JSONPatch":
            raise invalid(f'webhook returned invalid response.patchType of "{patch_type}"')
        encoded = response["patch"]
        try:
            patch = base64.b64decode(encoded if isinstance(encoded, str) else "!", validate=True)
        except (binascii.Error, ValueError) as e:
            raise _CallError("failed to call webhook: illegal base64 data in response.patch") from e
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        raise _CallError("failed to call webhook: json: cannot unmarshal "
                         f"{go_kind(allowed) if allowed is not None else 'null'} into Go struct field "
                         "AdmissionResponse.response.allowed of type bool")
    for w in response.get("warnings") or []:
        if isinstance(w, str) and w not in warnings:
            warnings.append(w)
    status = response.get("status")
    return allowed, status if isinstance(status, dict) else {}, patch


def _denial(name: str, status: Obj) -> StatusError:
    """webhookerrors.ToStatusErr: the webhook's own Status, its message prefixed with who denied."""
    denied_by = f'admission webhook "{name}" denied the request'
    message, reason = str(status.get("message") or ""), str(status.get("reason") or "")
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    try:
        code = int(status.get("code") or 0)
    except (TypeError, ValueError):
        code = 0
    # A rejection is never reported as a success: codes below 400 become 400 (kubernetes#77022).
    code = max(code, 400)
    details = status.get("details")
    return StatusError(code, text, reason=reason, details=details if isinstance(details, dict) else None)


def _transport_error(e: BaseException, url: str) -> str:
    """Go's net/http wording for the common failures, else Python's own."""
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"tls: failed to verify certificate: x509: {cause.verify_message or cause.reason}"
        if isinstance(cause, ssl.SSLError) and cause.reason and "ALERT_CERTIFICATE_REQUIRED" in cause.reason:
            return "remote error: tls: certificate required"
        if isinstance(cause, ConnectionRefusedError):
            parts = urlsplit(url)
            return f"dial tcp {parts.hostname}:{parts.port or 443}: connect: connection refused"
        cause = cause.__cause__ or cause.__context__
    return str(e) or type(e).__name__


def _http_error(resp: httpx.Response) -> str:
    """client-go's error for a non-2xx answer that is not a Status object."""
    try:
        body = resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("message"):
        return str(body["message"])
    text = resp.text.strip()[:200]
    if resp.status_code == 500 and text:
        return f'an error on the server ("{text}") has prevented the request from succeeding'
    if resp.status_code == 400:
        return "the server rejected our request for an unknown reason"
    return f"the server responded with the status code {resp.status_code} but did not return more information"


class Pending(Exception):
    """Raised by APIServer instead of storing a write that webhooks must see first.

    `commit` performs the write as computed; `stale` tells whether the stored object changed since
    (then the whole request is computed again, as GuaranteedUpdate retries with admission).
    With `resume`, the hooks are mutating: `resume(object)` computes the write again from what they
    made of the object and returns its result, or raises the validating webhooks' `Pending`.
    """

    def __init__(self, request: AdmissionRequest, hooks: list[Webhook], commit: Callable[[], Any],
                 stale: Callable[[], bool], resume: Callable[[Obj | None], Any] | None = None) -> None:
        stage = "mutating" if resume is not None else "validating"
        super().__init__(f"{request.operation} {request.rt.qualified} awaits {stage} admission webhooks")
        self.request = request
        self.hooks = hooks
        self.commit = commit
        self.stale = stale
        self.resume = resume
