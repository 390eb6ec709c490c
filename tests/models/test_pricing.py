"""What a run's tokens cost (SPEC §12): genai-prices' table, a platform team's ConfigMap override (longest prefix
wins), local providers at 0, a sum over attempts fixed when the run ends, and nothing the agent claims."""

from __future__ import annotations

from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from activities.results import agent_outcome
from models.pricing import PriceTable, PriceTableError, price, priced, text, total
from models.steps import Metrics, ModelTokens
from workflows.attempts import Attempts

M = "__SYMPOZIUM_RESULT__{}__SYMPOZIUM_END__"

TABLE = """
version: 1
entries:
  - {provider: openai, match: gpt-4o, inputPerMTokMicro: 1000000, outputPerMTokMicro: 4000000}
  - {provider: openai, match: gpt-4o-mini, inputPerMTokMicro: 100000, outputPerMTokMicro: 400000,
     cachedInputPerMTokMicro: 50000}
  - {provider: "*", match: my-, inputPerMTokMicro: 7, outputPerMTokMicro: 9}
"""


def usage(model: str, inp: int, out: int, cached: int = 0) -> ModelTokens:
    return ModelTokens(model=model, calls=1, input_tokens=inp, output_tokens=out, cached_input_tokens=cached)


def test_a_priced_model_costs_its_tokens_times_the_maintained_tables_prices() -> None:
    """gpt-4o's rates read from genai-prices' own table, multiplied out here: input (cached ones at their rate)."""
    ref = calc_price(Usage(input_tokens=1, output_tokens=1), model_ref="gpt-4o", provider_id="openai").model_price
    assert ref.input_mtok and ref.output_mtok and ref.cache_read_mtok
    expected = (Decimal(800) * Decimal(str(ref.input_mtok)) + Decimal(200) * Decimal(str(ref.cache_read_mtok))
                + Decimal(500) * Decimal(str(ref.output_mtok))) / Decimal(1_000_000)
    got = price("openai", usage("gpt-4o", 1000, 500, cached=200), None)
    assert got is not None and got.source == "genai-prices"
    assert got.cost == expected and expected > 0


def test_a_configmap_entry_wins_over_the_maintained_table_and_the_longest_prefix_wins() -> None:
    table = PriceTable.parse(TABLE)
    mini = price("openai", usage("gpt-4o-mini-2024-07-18", 2_000_000, 1_000_000, cached=1_000_000), table)
    assert mini is not None and mini.source == "table:openai/gpt-4o-mini"
    # 1M uncached input at $0.10, 1M cached at $0.05, 1M output at $0.40
    assert mini.cost == Decimal("0.55")
    big = price("openai", usage("gpt-4o", 1_000_000, 1_000_000), table)
    assert big is not None and big.cost == Decimal("5") and big.source == "table:openai/gpt-4o"
    # Another provider's model of the same name is not the openai entry's; "*" matches any provider.
    assert price("groq", usage("gpt-4o", 10, 10), table) is None
    anyone = price("ollama", usage("my-model", 1_000_000, 1_000_000), table)
    assert anyone is not None and anyone.cost == Decimal("0.000016")


def test_a_later_entry_wins_a_tie() -> None:
    table = PriceTable.parse(TABLE + "  - {provider: openai, match: gpt-4o, inputPerMTokMicro: 1, "
                                     "outputPerMTokMicro: 1}\n")
    got = price("openai", usage("gpt-4o", 1_000_000, 0), table)
    assert got is not None and got.cost == Decimal("0.000001")


@pytest.mark.parametrize("provider", ["ollama", "lm-studio", "vllm", "llama-server", "llamacpp", "echo"])
def test_a_local_provider_costs_nothing(provider: str) -> None:
    got = price(provider, usage("gpt-4o", 1_000_000, 1_000_000), None)
    assert got is not None and got.cost == 0 and got.source == "local"


def test_a_model_without_a_price_has_no_estimate_and_neither_has_its_run() -> None:
    assert price("openai", usage("no-such-model-xyz", 10, 10), None) is None
    # An OpenAI-compatible server of unknown kind is not OpenAI, whatever it calls its model.
    assert price("custom-gateway", usage("gpt-4o", 10, 10), None) is None
    m = Metrics(input_tokens=20, output_tokens=20, models=[usage("gpt-4o", 10, 10), usage("no-such-model", 10, 10)])
    out = priced(m, provider="openai", model="gpt-4o", table=None)
    assert out.cost_usd is None
    assert out.models[0].cost_usd is not None and out.models[1].cost_usd is None


def test_tokens_an_agent_did_not_attribute_are_its_runs_model() -> None:
    out = priced(Metrics(input_tokens=1_000_000, output_tokens=0), provider="openai", model="gpt-4o",
                 table=PriceTable.parse(TABLE))
    assert [m.model for m in out.models] == ["gpt-4o"] and out.cost_usd == "1"


def test_a_cost_the_agents_marker_claims_is_ignored() -> None:
    out = agent_outcome(M.format(
        '{"status":"success","response":"ok","estimatedCostUSD":"0","costUSD":0,'
        '"metrics":{"inputTokens":1000000,"outputTokens":0,"estimatedCostUSD":"0","costUsd":0,'
        '"models":[{"model":"gpt-4o","calls":1,"inputTokens":1000000,"outputTokens":0,"estimatedCostUSD":"0",'
        '"costUSD":"0"}]}}'), 0)
    assert out.metrics.cost_usd is None and out.metrics.models[0].cost_usd is None
    got = priced(out.metrics, provider="openai", model="gpt-4o", table=PriceTable.parse(TABLE))
    assert got.cost_usd == "1" and got.models[0].cost_usd == "1"


def test_a_runs_cost_is_the_sum_of_its_attempts_priced_as_each_ended() -> None:
    table = PriceTable.parse(TABLE)
    attempts = Attempts()
    first = priced(Metrics(input_tokens=1_000_000, models=[usage("gpt-4o", 1_000_000, 0)]), provider="openai",
                   model="gpt-4o", table=table)
    second = priced(Metrics(input_tokens=500_000, models=[usage("gpt-4o", 500_000, 0)]), provider="openai",
                    model="gpt-4o", table=table)
    attempts.ran(first)
    attempts.ran(second)
    u = attempts.usage(second)
    assert u.estimated_cost_usd == "1.5" and u.input_tokens == 1_500_000
    assert u.models is not None and [(m.model, m.calls, m.estimated_cost_usd) for m in u.models] == [
        ("gpt-4o", 2, "1.5")]


@pytest.mark.parametrize(("yaml_text", "where"), [
    ("version: 2\nentries: []", "version"),
    ("version: 1\nentries:\n  - {match: x, inputPerMTokMicro: -1, outputPerMTokMicro: 1}", "entries.0.inputPerMTokMicro"),
    ("version: 1\nentries:\n  - {match: '', inputPerMTokMicro: 1, outputPerMTokMicro: 1}", "entries.0.match"),
    ("version: 1\nentries:\n  - {match: x, inputPerMTokMicro: 1}", "entries.0.outputPerMTokMicro"),
    ("[1, 2]", "mapping"),
    ("version: 1\ncurrency: EUR", "currency"),
])
def test_a_broken_table_names_what_is_wrong(yaml_text: str, where: str) -> None:
    with pytest.raises(PriceTableError, match=where.replace(".", r"\.")):
        PriceTable.parse(yaml_text)


def test_amounts_are_exact_decimal_strings() -> None:
    assert text(Decimal("0.000100")) == "0.0001" and text(Decimal("1E+1")) == "10" and text(Decimal(0)) == "0"
    assert total(["0.1", "0.2"]) == "0.3" and total(["0.1", None]) is None and total([]) is None
