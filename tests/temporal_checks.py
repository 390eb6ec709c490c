"""Reading a Temporal server's state from tests, through its own API."""

from __future__ import annotations

import asyncio

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

from models.settings import TemporalSettings


def registered_search_attributes(address: str, namespace: str = "default") -> set[str]:
    """The custom search attributes `namespace` knows."""
    async def go() -> set[str]:
        client = await TemporalSettings(address=address).connect()
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
        return set(listed.custom_attributes)

    return asyncio.run(go())
