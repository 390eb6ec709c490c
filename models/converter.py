"""The payload converter of every process: pydantic JSON, with one cache of TypeAdapters for the whole process.

The SDK builds a payload converter for each workflow instance it caches, and `temporalio.contrib.pydantic`'s
converter keeps a TypeAdapter cache of its own, so each cached workflow held its own adapters for the types its
history carries (about five; a worker with 500 cached workflows held some 2,500) and built them again on every
replay. Here every converter shares one bounded cache. The payloads are the same bytes as
`temporalio.contrib.pydantic.pydantic_data_converter` writes and reads, so histories written by either are read by
both.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

# TypeAdapters are immutable once built; lru_cache is thread-safe (the worker's activity threads convert too).
_ADAPTERS: functools._lru_cache_wrapper[TypeAdapter[Any]] = functools.lru_cache(maxsize=1024)(TypeAdapter)


class SharedAdaptersJSONConverter(PydanticJSONPlainPayloadConverter):
    """`PydanticJSONPlainPayloadConverter` with the process's TypeAdapter cache instead of one of its own."""

    def __init__(self) -> None:
        super().__init__()
        self._type_adapter = _ADAPTERS

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._type_adapter = _ADAPTERS


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, with pydantic JSON (sharing the process's adapters) in place of plain JSON."""

    def __init__(self) -> None:
        json = SharedAdaptersJSONConverter()
        super().__init__(*(json if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


DATA_CONVERTER = DataConverter(payload_converter_class=PayloadConverter)
