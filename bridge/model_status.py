"""Model ⇒ a status that says it is not served here.

Sympozium's controller downloads and serves a Model; agentrun does not (models/model.py). A Model applied from
Sympozium YAML would otherwise sit without a status, and whoever waits for its endpoint would wait forever: the
leading bridge writes `phase: Failed` with a `Ready=False, NotOffered` condition on each one, once per generation.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from kube import Kube, NotFound
from kube.resources import sympozium
from models.model import MODELS, NOT_OFFERED, not_offered_status
from models.timestamps import rfc3339

log = logging.getLogger("agentrun.bridge.models")


class ModelStatusSync:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def on_model(self, typ: str, obj: dict[str, Any]) -> None:
        m = obj.get("metadata") or {}
        if typ == "DELETED" or m.get("deletionTimestamp") or not (m.get("namespace") and m.get("name")):
            return
        generation = int(m.get("generation") or 1)
        current = obj.get("status") or {}
        said = next((c for c in current.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"),
                    None)
        if current.get("phase") == "Failed" and said is not None and said.get("message") == NOT_OFFERED \
                and said.get("observedGeneration") == generation:
            return  # said already, for this generation: writing it again would only wake this watch
        since = said.get("lastTransitionTime") if said is not None and said.get("status") == "False" else None
        status = not_offered_status(generation, since or rfc3339(datetime.now(UTC)))
        try:
            await sympozium(self.kube, MODELS).patch_status(
                m["namespace"], m["name"], {"status": status.wire()},
                action=f"write status of Model {m['namespace']}/{m['name']}")
        except NotFound:
            pass  # deleted meanwhile
        log.info("Model %s/%s: marked as not offered here", m["namespace"], m["name"])
