"""Reading /metrics as Prometheus does: with prometheus_client's own parser of the text format."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a text exposition by (name, labels); parsing fails loudly on anything malformed."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(text: str, name: str, **labels: str) -> float | None:
    """One sample's value (None when the exposition has no such series)."""
    return samples(text).get((name, frozenset(labels.items())))
