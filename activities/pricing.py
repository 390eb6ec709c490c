"""The price table the worker prices agents' tokens with (models/pricing.py): the platform team's ConfigMap, read
through the API with a short cache, so pricing a run costs at most one request per `ttl` seconds (and usually none).

The worker may read that one ConfigMap (`get` by name in the chart's RBAC), no other. A table that is missing is
no table (genai-prices and the local providers' 0 still price); one that cannot be parsed prices nothing, so that a
broken override never silently falls back to other prices: the run gets no estimate and the worker logs why.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kube import Kube, KubeError, NotFound
from models.pricing import DATA_KEY, PriceTable, PriceTableError, priced
from models.steps import Metrics, Pricing

log = logging.getLogger("agentrun.pricing")

DEFAULT_TTL_SECONDS = 30.0


@dataclass
class _Read:
    table: PriceTable | None
    broken: str  # why the table cannot be used ("" : it can, or there is none)
    at: float


class PriceSource:
    def __init__(self, kube: Kube | None, config_map: str = "", *, ttl: float = DEFAULT_TTL_SECONDS) -> None:
        """`config_map`: "namespace/name" of the table ("" : none: genai-prices and local providers only)."""
        self.kube = kube
        self.namespace, _, self.name = config_map.rpartition("/")
        self.ttl = ttl
        self._read: _Read | None = None

    async def table(self) -> tuple[PriceTable | None, str]:
        """(the table, why it is broken): the cached read while it is younger than the TTL."""
        if not self.name or self.kube is None:
            return None, ""
        now = time.monotonic()
        if self._read is not None and now - self._read.at < self.ttl:
            return self._read.table, self._read.broken
        table, broken = None, ""
        try:
            cm = await self.kube.call(self.kube.core.read_namespaced_config_map, self.name, self.namespace or "default",
                                      action=f"read ConfigMap {self.namespace}/{self.name} (prices)")
            text = (cm.data or {}).get(DATA_KEY)
            if text is None:
                broken = f"ConfigMap {self.namespace}/{self.name} has no key {DATA_KEY}"
            else:
                table = PriceTable.parse(text)
        except NotFound:
            log.info("no price ConfigMap %s/%s: prices from genai-prices", self.namespace, self.name)
        except PriceTableError as e:
            broken = f"ConfigMap {self.namespace}/{self.name}: {e}"
        except KubeError as e:
            # Unreadable now (the API server down, no RBAC): the last good read is better than none, for a while.
            if self._read is not None:
                log.warning("the price ConfigMap could not be read (%s): the last read is used", e)
                return self._read.table, self._read.broken
            broken = f"ConfigMap {self.namespace}/{self.name} could not be read: {e}"
        if broken:
            log.warning("prices: %s; runs priced meanwhile get no estimate", broken)
        self._read = _Read(table, broken, now)
        return table, broken

    async def price(self, metrics: Metrics, pricing: Pricing) -> Metrics:
        """`metrics` with their cost (models/pricing.py `priced`); with a broken table, none."""
        table, broken = await self.table()
        if broken:
            return metrics.model_copy(update={"cost_usd": None})
        return priced(metrics, provider=pricing.provider, model=pricing.model, table=table)
