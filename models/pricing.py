"""What a run's tokens cost (SPEC §12): `status.tokenUsage.estimatedCostUSD`, priced by the control plane.

The agent reports tokens per model (its result's `metrics.models`); the worker prices them when it reads the
agent's outcome, with, in this order:

1. the price table of the platform team's ConfigMap (after Sympozium's, PR #291, `pricing.yaml`: `version: 1`, `entries`
   of `{provider, match, inputPerMTokMicro, outputPerMTokMicro}`, integer micro-USD per million tokens, the longest
   `match` prefix of the model name winning, a later entry winning a tie), plus `cachedInputPerMTokMicro` (ours:
   cached input tokens; the input rate when absent) and `provider: "*"` (ours: any provider);
2. else local providers (ollama, lm-studio, vllm, llama-server, llamacpp, ..., and echo) cost 0;
3. else the maintained table of `genai-prices` (Pydantic's; `calc_price`), for the providers it knows.

A model none of them prices has no estimate (absent, never a made-up 0), and neither has the run: an estimate of
part of its tokens would understate it. A cost the agent claims is never read: only its tokens are. Amounts are
`Decimal`, exact, summed over a run's attempts by the workflow and written as a decimal string.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrunner.config import ECHO, LOCAL_PROVIDERS

from .steps import Metrics, ModelTokens

DATA_KEY = "pricing.yaml"  # the ConfigMap key holding the table (Sympozium's)
ANY_PROVIDER = "*"
MICRO_PER_MTOK = Decimal(10) ** 12  # micro-USD per million tokens -> USD per token
# Sympozium's bound on a table's rates ($1000 per million tokens), so a typo cannot price a run in millions.
MAX_RATE_MICRO = 1_000_000_000
MODELS_KEPT = 10  # per-model usage kept in a run's status (the agent reports one model, rarely a few)
MODEL_NAME_MAX = 200
FREE = frozenset(LOCAL_PROVIDERS | {ECHO})
# Our provider names as genai-prices names its providers; a name it does not know is not guessed at (an
# OpenAI-compatible server serving a model called gpt-4o is not OpenAI).
GENAI_PROVIDERS = {"openai": "openai", "azure-openai": "azure", "anthropic": "anthropic", "bedrock": "aws",
                   "groq": "groq", "deepseek": "deepseek", "mistral": "mistral", "google": "google",
                   "openrouter": "openrouter", "together": "together", "fireworks": "fireworks", "x-ai": "x-ai"}


class PriceTableError(ValueError):
    """A price table that cannot be used; the message names the field."""


class PriceEntry(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    provider: str = ""
    match: str = Field(min_length=1)
    input_per_mtok_micro: int = Field(alias="inputPerMTokMicro", ge=0, le=MAX_RATE_MICRO)
    output_per_mtok_micro: int = Field(alias="outputPerMTokMicro", ge=0, le=MAX_RATE_MICRO)
    cached_input_per_mtok_micro: int | None = Field(None, alias="cachedInputPerMTokMicro", ge=0, le=MAX_RATE_MICRO)

    def cost(self, u: ModelTokens) -> Decimal:
        cached = min(u.cached_input_tokens, u.input_tokens)
        cached_rate = self.cached_input_per_mtok_micro
        micro = ((u.input_tokens - cached) * self.input_per_mtok_micro
                 + cached * (self.input_per_mtok_micro if cached_rate is None else cached_rate)
                 + u.output_tokens * self.output_per_mtok_micro)
        return Decimal(micro) / MICRO_PER_MTOK

    @property
    def key(self) -> str:
        return f"{(self.provider or ANY_PROVIDER).lower()}/{self.match}"


class PriceTable(BaseModel):
    version: int
    currency: str = "USD"
    entries: list[PriceEntry] = Field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> PriceTable:
        """The table of a ConfigMap's `pricing.yaml`; PriceTableError naming what is wrong."""
        try:
            data = yaml.safe_load(text or "")
        except yaml.YAMLError as e:
            raise PriceTableError(f"{DATA_KEY} is not YAML: {e}") from None
        if not isinstance(data, dict):
            raise PriceTableError(f"{DATA_KEY} must be a mapping with version and entries")
        try:
            table = cls.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise PriceTableError(f"{DATA_KEY}: {where}: {err['msg']}") from None
        if table.version != 1:
            raise PriceTableError(f"{DATA_KEY}: version {table.version} is not supported (1 is)")
        if table.currency != "USD":
            raise PriceTableError(f"{DATA_KEY}: currency {table.currency!r} is not supported (USD is)")
        return table

    def lookup(self, provider: str, model: str) -> PriceEntry | None:
        """The entry of `provider` (case-insensitive; `*` or empty: any) whose `match` is the longest prefix of
        `model`; a later entry wins a tie, so appended overrides beat shipped defaults."""
        p = provider.strip().lower()
        best: PriceEntry | None = None
        for e in self.entries:
            if (e.provider or ANY_PROVIDER).lower() not in (p, ANY_PROVIDER) or not model.startswith(e.match):
                continue
            if best is None or len(e.match) >= len(best.match):
                best = e
        return best


@dataclass(frozen=True)
class Priced:
    cost: Decimal
    source: str  # "table:<provider>/<match>", "local", "genai-prices"


def _genai_prices(provider: str, u: ModelTokens) -> Decimal | None:
    from genai_prices import Usage, calc_price

    provider_id = GENAI_PROVIDERS.get(provider)
    if provider_id is None:
        return None
    cached = min(u.cached_input_tokens, u.input_tokens)
    try:
        calc = calc_price(Usage(input_tokens=u.input_tokens, cache_read_tokens=cached, output_tokens=u.output_tokens),
                          model_ref=u.model, provider_id=provider_id)
    except LookupError:
        return None
    return Decimal(calc.total_price)


def price(provider: str, u: ModelTokens, table: PriceTable | None) -> Priced | None:
    """What one model's tokens cost (None: no price is known for it)."""
    p = (provider or "").strip().lower()
    entry = table.lookup(p, u.model) if table is not None else None
    if entry is not None:
        return Priced(entry.cost(u), f"table:{entry.key}")
    if p in FREE:
        return Priced(Decimal(0), "local")
    cost = _genai_prices(p, u)
    return Priced(cost, "genai-prices") if cost is not None else None


def usage_by_model(metrics: Metrics, fallback_model: str) -> list[ModelTokens]:
    """The agent's tokens per model; tokens it did not attribute to a model (an agent that reports totals only) are
    its run's model's."""
    models = [m for m in metrics.models if m.input_tokens or m.output_tokens]
    if models:
        return models
    if not (metrics.input_tokens or metrics.output_tokens):
        return []
    return [ModelTokens(model=fallback_model or "unknown", input_tokens=metrics.input_tokens,
                        output_tokens=metrics.output_tokens,
                        cached_input_tokens=min(metrics.cached_input_tokens, metrics.input_tokens))]


def priced(metrics: Metrics, *, provider: str, model: str, table: PriceTable | None) -> Metrics:
    """`metrics` with each model's cost and their sum (None when any model has no price)."""
    models = usage_by_model(metrics, model)
    total: Decimal | None = Decimal(0)
    out: list[ModelTokens] = []
    for u in models:
        p = price(provider, u, table)
        out.append(u.model_copy(update={"cost_usd": text(p.cost) if p is not None else None}))
        total = total + p.cost if total is not None and p is not None else None
    return metrics.model_copy(update={"models": out, "cost_usd": text(total) if total is not None else None})


def text(amount: Decimal) -> str:
    """A decimal string without exponent or trailing zeros: "0.000195", "12.5", "0"."""
    if amount == 0:
        return "0"
    return format(amount.normalize(), "f")


def total(costs: list[str | None]) -> str | None:
    """The sum of decimal strings (None if any is None, or there are none)."""
    if not costs or any(c is None for c in costs):
        return None
    return text(sum((Decimal(c) for c in costs if c is not None), Decimal(0)))


def model_name(raw: Any) -> str:
    """A model name as the agent reported it, bounded (it becomes a Prometheus label and a status field)."""
    return " ".join(str(raw or "").split())[:MODEL_NAME_MAX] or "unknown"


def warm() -> None:
    """Load genai-prices' table now (about a second), so the first run's pricing does not pay for it."""
    from genai_prices import data  # noqa: F401
