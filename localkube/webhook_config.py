"""The Validating- and MutatingWebhookConfiguration kinds: their typed decoding, defaults and validation.

kube-apiserver decodes admissionregistration/v1 objects into typed structs (a value of the wrong JSON
type is a 400 before anything else), applies the v1 defaults, and then validates them (422 naming
each field). This module does the same for localkube; `webhooks.py` uses stored configurations.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import urlsplit

from .errors import StatusError, bad_request
from .selectors import SelectorError, label_selector_from_dict
from .store import Obj
from .util import DNS1123_SUBDOMAIN, go_kind

GROUP = "admissionregistration.k8s.io"
CONFIG_KIND = "ValidatingWebhookConfiguration"
CONFIG_KEY = (GROUP, "validatingwebhookconfigurations")
MUTATING_KIND = "MutatingWebhookConfiguration"
MUTATING_KEY = (GROUP, "mutatingwebhookconfigurations")
# The configuration kinds by storage key.
KINDS = {CONFIG_KEY: CONFIG_KIND, MUTATING_KEY: MUTATING_KIND}
REINVOCATION_POLICIES = ("IfNeeded", "Never")
DEFAULT_TIMEOUT_SECONDS = 10
MAX_TIMEOUT_SECONDS = 30
# The AdmissionReview versions the real server speaks, in its order of preference.
REVIEW_VERSIONS = ("v1", "v1beta1")
SIDE_EFFECTS = ("None", "NoneOnDryRun")  # the only classes admissionregistration/v1 accepts
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")

Cause = tuple[str, str, str]


def _decode_error(detail: str, kind: str = CONFIG_KIND) -> StatusError:
    return bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {detail}')


def _type_error(value: Any, path: str, go_type: str, kind: str = CONFIG_KIND) -> StatusError:
    # The Go struct of a webhook is the configuration kind without "Configuration" (ValidatingWebhook).
    path = path.replace("ValidatingWebhook", kind.removesuffix("Configuration"))
    go_type = go_type.replace("ValidatingWebhook", kind.removesuffix("Configuration"))
    return _decode_error(f"json: cannot unmarshal {go_kind(value)} into Go struct field {path} of type {go_type}",
                         kind)


def _base64_error(text: str) -> str | None:
    """Go's encoding/base64 error for a `[]byte` field, or None when `text` decodes."""
    try:
        base64.b64decode(text, validate=True)
        return None
    except (binascii.Error, ValueError):
        alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        stripped = text.rstrip("=")
        bad = next((i for i, ch in enumerate(stripped) if ch not in alphabet), len(stripped))
        return f"illegal base64 data at input byte {bad}"


def check_types(obj: Obj, kind: str = CONFIG_KIND) -> None:
    """The real server decodes into typed structs first: a value of the wrong JSON type is a 400."""
    try:
        _check_types(obj, kind == MUTATING_KIND)
    except _TypeMismatch as e:
        if len(e.args) == 1:
            raise _decode_error(e.args[0], kind) from None
        value, path, go_type = e.args
        raise _type_error(value, path, go_type, kind) from None


class _TypeMismatch(Exception):
    """(value, Go struct field path, Go type) of a value that cannot be decoded."""


def _check_types(obj: Obj, mutating: bool) -> None:
    hooks = obj.get("webhooks")
    if hooks is None:
        return
    if not isinstance(hooks, list):
        raise _TypeMismatch(hooks, "ValidatingWebhookConfiguration.webhooks", "[]v1.ValidatingWebhook")
    lists = ("admissionReviewVersions", "rules")
    strings = ("name", "failurePolicy", "matchPolicy", "sideEffects") + (("reinvocationPolicy",) if mutating else ())
    for hook in hooks:
        if not isinstance(hook, dict):
            raise _TypeMismatch(hook, "ValidatingWebhookConfiguration.webhooks", "v1.ValidatingWebhook")
        for f in strings:
            if hook.get(f) is not None and not isinstance(hook[f], str):
                raise _TypeMismatch(hook[f], f"ValidatingWebhook.webhooks.{f}", "string")
        for f in lists:
            if hook.get(f) is not None and not isinstance(hook[f], list):
                raise _TypeMismatch(hook[f], f"ValidatingWebhook.webhooks.{f}", "[]string" if f != "rules" else
                                  "[]v1.RuleWithOperations")
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
            raise _TypeMismatch(timeout, "ValidatingWebhook.webhooks.timeoutSeconds", "int32")
        for v in hook.get("admissionReviewVersions") or []:
            if not isinstance(v, str):
                raise _TypeMismatch(v, "ValidatingWebhook.webhooks.admissionReviewVersions", "string")
        for sel in ("namespaceSelector", "objectSelector"):
            _check_selector_types(hook.get(sel), f"webhooks.{sel}")
        for rule in hook.get("rules") or []:
            if not isinstance(rule, dict):
                raise _TypeMismatch(rule, "ValidatingWebhook.webhooks.rules", "v1.RuleWithOperations")
            for f in ("apiGroups", "apiVersions", "operations", "resources"):
                values = rule.get(f)
                if values is not None and (not isinstance(values, list) or
                                           not all(isinstance(v, str) for v in values)):
                    raise _TypeMismatch(values, f"RuleWithOperations.webhooks.rules.{f}", "[]string")
        cc = hook.get("clientConfig")
        if cc is None:
            continue
        if not isinstance(cc, dict):
            raise _TypeMismatch(cc, "ValidatingWebhook.webhooks.clientConfig", "v1.WebhookClientConfig")
        bundle = cc.get("caBundle")
        if bundle is not None:
            if not isinstance(bundle, str):
                raise _TypeMismatch(bundle, "WebhookClientConfig.webhooks.clientConfig.caBundle", "[]uint8")
            err = _base64_error(bundle)
            if err:
                raise _TypeMismatch(err)
        url = cc.get("url")
        if url is not None and not isinstance(url, str):
            raise _TypeMismatch(url, "WebhookClientConfig.webhooks.clientConfig.url", "string")
        svc = cc.get("service")
        if svc is None:
            continue
        if not isinstance(svc, dict):
            raise _TypeMismatch(svc, "WebhookClientConfig.webhooks.clientConfig.service", "v1.ServiceReference")
        for f in ("name", "namespace", "path"):
            if svc.get(f) is not None and not isinstance(svc[f], str):
                raise _TypeMismatch(svc[f], f"ServiceReference.webhooks.clientConfig.service.{f}", "string")
        port = svc.get("port")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
            raise _TypeMismatch(port, "ServiceReference.webhooks.clientConfig.service.port", "int32")


def _check_selector_types(sel: Any, path: str) -> None:
    if sel is None:
        return
    if not isinstance(sel, dict):
        raise _TypeMismatch(sel, f"ValidatingWebhook.{path}", "v1.LabelSelector")
    labels = sel.get("matchLabels")
    if labels is not None and (not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values())):
        raise _TypeMismatch(labels, f"LabelSelector.{path}.matchLabels", "map[string]string")
    exprs = sel.get("matchExpressions")
    if exprs is None:
        return
    if not isinstance(exprs, list):
        raise _TypeMismatch(exprs, f"LabelSelector.{path}.matchExpressions", "[]v1.LabelSelectorRequirement")
    for expr in exprs:
        if not isinstance(expr, dict):
            raise _TypeMismatch(expr, f"LabelSelector.{path}.matchExpressions", "v1.LabelSelectorRequirement")
        for f in ("key", "operator"):
            if expr.get(f) is not None and not isinstance(expr[f], str):
                raise _TypeMismatch(expr[f], f"LabelSelectorRequirement.{path}.matchExpressions.{f}", "string")
        values = expr.get("values")
        if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
            raise _TypeMismatch(values, f"LabelSelectorRequirement.{path}.matchExpressions.values", "[]string")


def set_defaults(obj: Obj, kind: str = CONFIG_KIND) -> None:
    """SetDefaults_{Validating,Mutating}Webhook, SetDefaults_Rule and SetDefaults_ServiceReference of
    admissionregistration/v1."""
    for hook in obj.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        if kind == MUTATING_KIND:
            hook.setdefault("reinvocationPolicy", "Never")
        hook.setdefault("matchPolicy", "Equivalent")
        for sel in ("namespaceSelector", "objectSelector"):
            if hook.get(sel) is None:
                hook[sel] = {}
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"
        svc = (hook.get("clientConfig") or {}).get("service")
        if isinstance(svc, dict) and svc.get("port") is None:
            svc["port"] = 443


def _go_value(value: Any) -> str:
    """How field.Invalid prints a bad value (%#v for strings and string slices)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[]string{" + ", ".join(json.dumps(v) for v in value) + "}"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {_go_value(value)}: {detail}")


def _required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def _not_supported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(json.dumps(s) for s in supported)
    return (path, "FieldValueNotSupported", f"Unsupported value: {json.dumps(value)}: supported values: {values}")


def _validate_resources(resources: list[str], path: str) -> list[Cause]:
    """validateResources: subresource wildcards may not overlap with what they already cover."""
    causes: list[Cause] = []
    if not resources:
        causes.append(_required(path))
    wildcard_subs: set[str] = set()  # x/*
    wildcard_res: set[str] = set()  # */x
    single = double = plain = False
    for i, res_sub in enumerate(resources):
        if not res_sub:
            causes.append(_required(f"{path}[{i}]"))
            continue
        double = double or res_sub == "*/*"
        single = single or res_sub == "*"
        res, slash, sub = res_sub.partition("/")
        if not slash:
            plain = plain or res_sub != "*"
            continue
        if res in wildcard_subs:
            causes.append(_invalid(f"{path}[{i}]", res_sub, f"if '{res}/*' is present, must not specify {res_sub}"))
        if sub in wildcard_res:
            causes.append(_invalid(f"{path}[{i}]", res_sub, f"if '*/{sub}' is present, must not specify {res_sub}"))
        if sub == "*":
            wildcard_subs.add(res)
        if res == "*":
            wildcard_res.add(sub)
    if len(resources) > 1 and double:
        causes.append(_invalid(path, resources, "if '*/*' is present, must not specify other resources"))
    if single and plain:
        causes.append(_invalid(path, resources, "if '*' is present, must not specify other resources without "
                                                "subresources"))
    return causes


def _validate_rule(rule: Obj, path: str) -> list[Cause]:
    causes: list[Cause] = []
    ops = rule.get("operations") or []
    if not ops:
        causes.append(_required(f"{path}.operations"))
    if len(ops) > 1 and "*" in ops:
        causes.append(_invalid(f"{path}.operations", ops, "if '*' is present, must not specify other operations"))
    for i, op in enumerate(ops):
        if op not in OPERATIONS:
            causes.append(_not_supported(f"{path}.operations[{i}]", op, OPERATIONS))
    for f, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = rule.get(f) or []
        if not values:
            causes.append(_required(f"{path}.{f}"))
        if len(values) > 1 and "*" in values:
            causes.append(_invalid(f"{path}.{f}", values, f"if '*' is present, must not specify other {what}"))
    for i, v in enumerate(rule.get("apiVersions") or []):
        if not v:
            causes.append(_required(f"{path}.apiVersions[{i}]"))
    causes += _validate_resources(list(rule.get("resources") or []), f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        causes.append(_not_supported(f"{path}.scope", scope, SCOPES))
    return causes


def _validate_selector(sel: Any, path: str) -> list[Cause]:
    if sel is None:
        return []
    causes: list[Cause] = []
    for i, expr in enumerate(sel.get("matchExpressions") or []):
        if not isinstance(expr, dict):
            continue
        op, values, p = expr.get("operator"), expr.get("values") or [], f"{path}.matchExpressions[{i}]"
        if op in ("In", "NotIn") and not values:
            causes.append(_required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            causes.append((f"{p}.values", "FieldValueForbidden",
                           "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            causes.append(_invalid(f"{p}.operator", op, "not a valid selector operator"))
    if causes:
        return causes
    try:
        label_selector_from_dict(sel)
    except SelectorError as e:
        return [_invalid(path, sel, str(e))]
    return []


def _validate_client_config(cc: Any, path: str) -> list[Cause]:
    cc = cc if isinstance(cc, dict) else {}
    url, svc = cc.get("url"), cc.get("service")
    if (url is None) == (svc is None):
        return [_required(path, "exactly one of url or service is required")]
    causes: list[Cause] = []
    if url is not None:
        p, form = f"{path}.url", "; desired format: https://host[/path]"
        try:
            parts = urlsplit(str(url))
        except ValueError as e:
            return [_required(p, f"url must be a valid URL: {e}{form}")]
        if parts.scheme != "https":
            causes.append(_invalid(p, parts.scheme, "'https' is the only allowed URL scheme" + form))
        if not parts.hostname:
            causes.append(_invalid(p, "", "host must be specified" + form))
        if parts.username is not None:
            causes.append(_invalid(p, parts.username, "user information is not permitted in the URL"))
        if parts.fragment:
            causes.append(_invalid(p, parts.fragment, "fragments are not permitted in the URL"))
        if parts.query:
            causes.append(_invalid(p, parts.query, "query parameters are not permitted in the URL"))
        return causes
    p = f"{path}.service"
    if not svc.get("name"):
        causes.append(_required(f"{p}.name", "service name is required"))
    if not svc.get("namespace"):
        causes.append(_required(f"{p}.namespace", "service namespace is required"))
    port = svc.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(_invalid(f"{p}.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    svc_path = svc.get("path")
    if svc_path not in (None, "", "/") and not str(svc_path).startswith("/"):
        causes.append(_invalid(f"{p}.path", svc_path, "must start with a '/'"))
    return causes


def validate_configuration(obj: Obj, kind: str = CONFIG_KIND) -> list[Cause]:
    """Validate{Validating,Mutating}WebhookConfiguration for admissionregistration/v1 (after defaulting)."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        p = f"webhooks[{i}]"
        name = str(hook.get("name") or "")
        if not name:
            causes.append(_required(f"{p}.name"))
        elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            causes.append(_invalid(f"{p}.name", name, "a lowercase RFC 1123 subdomain must consist of lower case "
                                   "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                                   "character (e.g. 'example.com', regex used for validation is "
                                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"))
        elif len(name.split(".")) < 3:
            causes.append(_invalid(f"{p}.name", name, "should be a domain with at least three segments separated "
                                                      "by dots"))
        if name and name in seen:
            causes.append((f"{p}.name", "FieldValueDuplicate", f"Duplicate value: {json.dumps(name)}"))
        seen.add(name)
        for j, rule in enumerate(hook.get("rules") or []):
            causes += _validate_rule(rule, f"{p}.rules[{j}]")
        policy = hook.get("failurePolicy")
        if policy not in ("Fail", "Ignore"):
            causes.append(_not_supported(f"{p}.failurePolicy", policy, ("Fail", "Ignore")))
        match_policy = hook.get("matchPolicy")
        if match_policy not in ("Equivalent", "Exact"):
            causes.append(_not_supported(f"{p}.matchPolicy", match_policy, ("Equivalent", "Exact")))
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            causes.append(_required(f"{p}.sideEffects", "must specify one of " + ", ".join(SIDE_EFFECTS)))
        elif side_effects not in SIDE_EFFECTS:
            causes.append(_not_supported(f"{p}.sideEffects", side_effects, SIDE_EFFECTS))
        reinvocation = hook.get("reinvocationPolicy")
        if kind == MUTATING_KIND and reinvocation not in REINVOCATION_POLICIES:
            causes.append(_not_supported(f"{p}.reinvocationPolicy", reinvocation, REINVOCATION_POLICIES))
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
            causes.append(_invalid(f"{p}.timeoutSeconds", timeout,
                                   f"the timeout value must be between 1 and {MAX_TIMEOUT_SECONDS} seconds"))
        causes += _validate_selector(hook.get("namespaceSelector"), f"{p}.namespaceSelector")
        causes += _validate_selector(hook.get("objectSelector"), f"{p}.objectSelector")
        causes += _validate_review_versions(hook.get("admissionReviewVersions") or [],
                                            f"{p}.admissionReviewVersions")
        causes += _validate_client_config(hook.get("clientConfig"), f"{p}.clientConfig")
    return causes


def _validate_review_versions(versions: list[str], path: str) -> list[Cause]:
    accepted = ", ".join(REVIEW_VERSIONS)
    if not versions:
        return [_required(path, f"must specify one of {accepted}")]
    causes: list[Cause] = []
    for i, v in enumerate(versions):
        if v in versions[:i]:
            causes.append(_invalid(f"{path}[{i}]", v, "duplicate version"))
    if not any(v in REVIEW_VERSIONS for v in versions):
        causes.append(_invalid(path, versions, f"must include at least one of {accepted}"))
    return causes
