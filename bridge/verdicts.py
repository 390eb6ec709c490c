"""Whether an annotation verdict's writer is known (SPEC §4: authentic verdicts).

The `sympozium.ai/gate-verdict-by` stamp means something only where the admission webhooks run: the mutating one
writes it (the writer's authenticated user name) and the validating one refuses it from anyone else. So the bridge
trusts the stamp only when the MutatingWebhookConfiguration named in its settings exists and covers the run: a
webhook that calls our `/admission/agentruns/mutate`, matches UPDATEs of agentruns, has no objectSelector and a
namespaceSelector the namespace's name alone decides (`kubernetes.io/metadata.name`; anything else could depend on
labels the bridge does not read, so it does not count). It is read at each new verdict: verdicts are rare (one per
gated run), and a cached answer could outlive a webhook's removal. The chart grants `get` on exactly that name.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlparse

from kubernetes import client

from kube import Forbidden, Kube, NotFound
from models.names import ADMISSION_MUTATE_PATH, GROUP

log = logging.getLogger("agentrun.bridge.verdicts")
NAME_LABEL = "kubernetes.io/metadata.name"


def _has(values: list[str] | None, wanted: str) -> bool:
    return wanted in (values or []) or "*" in (values or [])


def _matches_rule(rule: dict[str, Any]) -> bool:
    resources = rule.get("resources") or []
    return (_has(rule.get("apiGroups"), GROUP) and _has(rule.get("operations"), "UPDATE")
            and ("agentruns" in resources or "*" in resources or "*/*" in resources))


def selects_namespace(selector: dict[str, Any] | None, namespace: str) -> bool:
    """Whether a label selector picks the namespace from its name alone; a selector on any other label: False."""
    labels = {NAME_LABEL: namespace}
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if key != NAME_LABEL or labels[key] != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if key != NAME_LABEL:
            return False
        if not ((op == "In" and namespace in values) or (op == "NotIn" and namespace not in values)
                or op == "Exists"):
            return False
    return True


def covers(webhook: dict[str, Any], namespace: str) -> bool:
    cfg = webhook.get("clientConfig") or {}
    path = (cfg.get("service") or {}).get("path") or urlparse(cfg.get("url") or "").path
    return (path == ADMISSION_MUTATE_PATH and any(_matches_rule(r) for r in webhook.get("rules") or [])
            and not (webhook.get("objectSelector") or {}) and selects_namespace(webhook.get("namespaceSelector"),
                                                                                 namespace))


class WebhookCheck:
    def __init__(self, kube: Kube, name: str) -> None:
        self.kube, self.name = kube, name
        self.admission = client.AdmissionregistrationV1Api(kube.api)

    async def covers(self, namespace: str) -> bool:
        """The named MutatingWebhookConfiguration exists and stamps verdicts in `namespace`."""
        if not self.name:
            return False
        try:
            resp = await self.kube.call(self.admission.read_mutating_webhook_configuration, self.name,
                                        _preload_content=False,
                                        action=f"read MutatingWebhookConfiguration {self.name}")
        except NotFound:
            return False
        except Forbidden as e:
            log.warning("cannot tell whether the verdict webhook is installed, so verdicts are unverified: %s", e)
            return False
        cfg: dict[str, Any] = json.loads(resp.data)
        return any(covers(w, namespace) for w in cfg.get("webhooks") or [])
