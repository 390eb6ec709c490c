"""The worker's price table (activities/pricing.py): the platform team's ConfigMap read from the session's localkube,
its override winning over genai-prices, a broken table pricing nothing (never a silent fallback), and the cache."""

from __future__ import annotations

from kubernetes import client

from activities.pricing import PriceSource
from kube import Kube
from models.pricing import DATA_KEY
from models.steps import Metrics, ModelTokens, Pricing

OPENAI = Pricing(provider="openai", model="gpt-4o")
MILLION_IN = Metrics(input_tokens=1_000_000, models=[ModelTokens(model="gpt-4o-2024-08-06", calls=1,
                                                                 input_tokens=1_000_000)])


def put(kube: client.ApiClient, namespace: str, text: str) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="prices"), data={DATA_KEY: text})
    core = client.CoreV1Api(kube)
    try:
        core.replace_namespaced_config_map("prices", namespace, body)
    except client.ApiException as e:
        if e.status != 404:
            raise
        core.create_namespaced_config_map(namespace, body)


async def test_the_configmaps_price_wins_and_is_reread_after_its_ttl(kube: client.ApiClient, namespace: str) -> None:
    source = PriceSource(Kube(kube), f"{namespace}/prices", ttl=0.0)
    genai = await source.price(MILLION_IN, OPENAI)  # no ConfigMap yet: genai-prices' rate
    assert genai.cost_usd is not None and genai.cost_usd != "9"
    put(kube, namespace, "version: 1\nentries:\n  - {provider: openai, match: gpt-4o, inputPerMTokMicro: 9000000, "
                         "outputPerMTokMicro: 1}\n")
    assert (await source.price(MILLION_IN, OPENAI)).cost_usd == "9"
    cached = PriceSource(Kube(kube), f"{namespace}/prices", ttl=3600.0)
    assert (await cached.price(MILLION_IN, OPENAI)).cost_usd == "9"
    put(kube, namespace, "version: 1\nentries:\n  - {provider: openai, match: gpt-4o, inputPerMTokMicro: 1000000, "
                         "outputPerMTokMicro: 1}\n")
    assert (await cached.price(MILLION_IN, OPENAI)).cost_usd == "9", "read at most once per TTL"
    assert (await source.price(MILLION_IN, OPENAI)).cost_usd == "1"


async def test_a_broken_table_prices_nothing_rather_than_falling_back(kube: client.ApiClient,
                                                                      namespace: str) -> None:
    put(kube, namespace, "version: 1\nentries:\n  - {match: gpt-4o, inputPerMTokMicro: lots}\n")
    source = PriceSource(Kube(kube), f"{namespace}/prices", ttl=0.0)
    out = await source.price(MILLION_IN, OPENAI)
    assert out.cost_usd is None
    table, broken = await source.table()
    assert table is None and "inputPerMTokMicro" in broken
