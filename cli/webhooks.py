"""The admission webhooks' registrations for an API reached by URL: the embedded stack's (`agentrun up`), and tests'.

The Helm chart registers the same pair through the API's Service (`deploy/chart/agentrun/templates/webhook.yaml`,
by hand `deploy/webhook.yaml`); this module builds them for an API listening on the host, so the embedded stack is
protected as a cluster is: policy rules and verdict authority refused at admission, the creator and each verdict's
writer stamped (api/admission.py). Both configurations carry the name the bridge looks for
(`models.names.WEBHOOK_CONFIGURATION`), the validating and the mutating kind being separate objects.
"""

from __future__ import annotations

import base64
from typing import Any

from kubernetes import client

from kube import Conflict, typed_errors
from models.names import (
    ADMISSION_AGENTS_PATH,
    ADMISSION_AUTHORS_MUTATE_PATH,
    ADMISSION_DEFINITIONS_PATH,
    ADMISSION_MUTATE_PATH,
    ADMISSION_PACKS_PATH,
    ADMISSION_SCHEDULES_PATH,
    ADMISSION_VALIDATE_PATH,
    DEFINITION_KINDS,
    GROUP,
    VERSION,
    WEBHOOK_CONFIGURATION,
)

# The kinds whose writers hand runs something (api/grants.py): their author is stamped, their grants checked.
AUTHORED = ("agents", "sympoziuminstances", "skillpacks", "sympoziumschedules", "ensembles", "personapacks")
PACKS = ("skillpacks", "ensembles", "personapacks")

# The verdict stamp's webhook is called only for writes that change the verdict annotations (on servers that
# evaluate matchConditions; localkube calls it for every update and the webhook decides).
VERDICT_CHANGES = (
    "['sympozium.ai/gate-verdict', 'sympozium.ai/gate-verdict-by', 'sympozium.ai/tool-verdict', 'sympozium.ai/tool-verdict-by'].exists(k, "
    "(has(object.metadata.annotations) && k in object.metadata.annotations ? object.metadata.annotations[k] : '<none>') "
    "!= (has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations ? "
    "oldObject.metadata.annotations[k] : '<none>'))")


def _hook(name: str, url: str, ca_pem: str, operations: list[str], failure_policy: str,
          namespace_selector: dict[str, Any] | None, resources: tuple[str, ...] = ("agentruns",),
          **extra: Any) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name, "admissionReviewVersions": ["v1"], "timeoutSeconds": 10, "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem.encode()).decode()},
        "rules": [{"apiGroups": [GROUP], "apiVersions": [VERSION], "resources": list(resources),
                   "operations": operations, "scope": "Namespaced"}], **extra}
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    return hook


def configurations(base_url: str, ca_pem: str, *, name: str = WEBHOOK_CONFIGURATION,
                   namespace_selector: dict[str, Any] | None = None,
                   failure_policy: str = "Fail", verdict_failure_policy: str = "Fail") -> list[dict[str, Any]]:
    """The ValidatingWebhookConfiguration and the MutatingWebhookConfiguration for the API at `base_url` (HTTPS,
    its certificate signed by `ca_pem`), with the chart's failure policies by default; and the configurations of the
    kinds whose writers hand runs something (`<name>-agents`: Agents' lifecycle RBAC and Secrets, packs' and
    schedules' grants, the warnings for packs and Models; `<name>-authors`: who wrote each, models/authorship.py)."""
    meta = {"name": name, "labels": {"app.kubernetes.io/part-of": "agentrun"}}
    validate, mutate = base_url + ADMISSION_VALIDATE_PATH, base_url + ADMISSION_MUTATE_PATH
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": meta,
         "webhooks": [_hook("agentruns.policy.agentrun.dev", validate, ca_pem, ["CREATE", "UPDATE"], failure_policy,
                            namespace_selector, sideEffects="NoneOnDryRun")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": meta,
         "webhooks": [
             _hook("created-by.agentrun.dev", mutate, ca_pem, ["CREATE"], failure_policy, namespace_selector,
                   sideEffects="None", reinvocationPolicy="Never"),
             _hook("verdicts.agentrun.dev", mutate, ca_pem, ["UPDATE"], verdict_failure_policy, namespace_selector,
                   sideEffects="None", reinvocationPolicy="Never",
                   matchConditions=[{"name": "verdict-annotations-change", "expression": VERDICT_CHANGES}]),
         ]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {**meta, "name": f"{name}-agents"},
         "webhooks": [_hook("agents.escalation.agentrun.dev", base_url + ADMISSION_AGENTS_PATH, ca_pem,
                            ["CREATE", "UPDATE"], failure_policy, namespace_selector,
                            resources=("agents", "sympoziuminstances"), sideEffects="None"),
                      _hook("packs.grants.agentrun.dev", base_url + ADMISSION_PACKS_PATH, ca_pem,
                            ["CREATE", "UPDATE"], failure_policy, namespace_selector, resources=PACKS,
                            sideEffects="None"),
                      _hook("schedules.grants.agentrun.dev", base_url + ADMISSION_SCHEDULES_PATH, ca_pem,
                            ["CREATE", "UPDATE"], failure_policy, namespace_selector,
                            resources=("sympoziumschedules",), sideEffects="None"),
                      # Warnings only, so never Fail: a webhook that cannot warn must not block a write.
                      _hook("definitions.warnings.agentrun.dev", base_url + ADMISSION_DEFINITIONS_PATH, ca_pem,
                            ["CREATE", "UPDATE"], "Ignore", namespace_selector,
                            resources=tuple(DEFINITION_KINDS), sideEffects="None")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {**meta, "name": f"{name}-authors"},
         "webhooks": [_hook("authors.agentrun.dev", base_url + ADMISSION_AUTHORS_MUTATE_PATH, ca_pem,
                            ["CREATE", "UPDATE"], failure_policy, namespace_selector, resources=AUTHORED,
                            sideEffects="None", reinvocationPolicy="Never")]},
    ]


def register(api: client.ApiClient, configs: list[dict[str, Any]]) -> None:
    """Create each configuration, or replace the one of the same name (a restarted stack has a new port and CA)."""
    admission: Any = client.AdmissionregistrationV1Api(api)
    for cfg in configs:
        kind, name = cfg["kind"], cfg["metadata"]["name"]
        suffix = "validating_webhook_configuration" if kind.startswith("Validating") else "mutating_webhook_configuration"
        try:
            with typed_errors(f"create {kind} {name}"):
                getattr(admission, f"create_{suffix}")(cfg)
        except Conflict:
            with typed_errors(f"replace {kind} {name}"):
                current = getattr(admission, f"read_{suffix}")(name)
                body = {**cfg, "metadata": {**cfg["metadata"], "resourceVersion": current.metadata.resource_version}}
                getattr(admission, f"replace_{suffix}")(name, body)


def unregister(api: client.ApiClient, configs: list[dict[str, Any]]) -> None:
    admission: Any = client.AdmissionregistrationV1Api(api)
    for cfg in configs:
        suffix = ("validating_webhook_configuration" if cfg["kind"].startswith("Validating")
                  else "mutating_webhook_configuration")
        getattr(admission, f"delete_{suffix}")(cfg["metadata"]["name"])
