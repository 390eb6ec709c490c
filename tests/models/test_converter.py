"""The payload converter: the same bytes as temporalio.contrib.pydantic's, with one TypeAdapter cache per process.

The SDK builds a converter for every workflow instance it caches; each used to build and hold its own adapters."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from models.converter import _ADAPTERS, DATA_CONVERTER, PayloadConverter
from models.gate import GateView, Verdict
from models.resolve import RunRef
from models.run import Phase, RunResult
from models.steps import JobFinished, StartRun

VALUES: list[tuple[Any, Any]] = [
    (Verdict(action="approve", response="", reason="<ok>", decided_by="alice@example.com", source="api"), Verdict),
    (GateView(state="approved", decided_by="alice@example.com"), GateView),
    (RunResult(phase=Phase.SUCCEEDED, result="done ✓"), RunResult),
    (StartRun(ref=RunRef(namespace="ns", name="r", uid="u-1"), resource_version="7", finalizers=[]), StartRun),
    (JobFinished(name="r-agent", uid="j-1", succeeded=False, reason="DeadlineExceeded"), JobFinished),
    ({"plain": [1, "two", None]}, dict[str, Any]),
    ("text", str),
    (None, type(None)),
]


@pytest.mark.parametrize(("value", "hint"), VALUES, ids=[type(v).__name__ for v, _ in VALUES])
def test_payloads_are_the_bytes_the_sdks_pydantic_converter_writes_and_each_reads_the_others(value: Any,
                                                                                            hint: Any) -> None:
    ours, theirs = DATA_CONVERTER.payload_converter, pydantic_data_converter.payload_converter
    [mine] = ours.to_payloads([value])
    [sdk] = theirs.to_payloads([value])
    assert mine.data == sdk.data and dict(mine.metadata) == dict(sdk.metadata)
    assert theirs.from_payloads([mine], [hint]) == [value]
    assert ours.from_payloads([sdk], [hint]) == [value]


def test_converters_made_for_each_workflow_share_one_cache_of_type_adapters() -> None:
    # As the worker does for each workflow instance it caches: a converter from the data converter's class.
    first, second = DATA_CONVERTER.payload_converter_class(), DATA_CONVERTER.payload_converter_class()
    assert isinstance(first, PayloadConverter) and first is not second
    verdict = Verdict(action="reject", response="no", reason="", decided_by="bob", source="annotation")
    [payload] = first.to_payloads([verdict])
    assert first.from_payloads([payload], [Verdict]) == [verdict]
    before = _ADAPTERS.cache_info()
    assert second.from_payloads([payload], [Verdict]) == [verdict]
    after = _ADAPTERS.cache_info()
    # The second instance took the first one's adapter from the shared cache and built none of its own.
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
