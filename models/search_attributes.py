"""The custom search attributes the workflows upsert (SPEC §8), and how they get registered.

A Temporal namespace must know them before the first run upserts one, else every run fails its
first workflow task. The embedded dev server gets them as start-up flags; against any other server
the worker ensures them at start-up through the operator service (idempotent, safe to race), and
`agentrun temporal setup` does the same on demand. Temporal Cloud refuses that call (its search
attributes are managed through its control plane), so the refusal names the commands that do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.common import SearchAttributeKey

if TYPE_CHECKING:
    from temporalio.client import Client

SA_NAMESPACE = SearchAttributeKey.for_keyword("AgentRunNamespace")
SA_NAME = SearchAttributeKey.for_keyword("AgentRunName")
SA_AGENT = SearchAttributeKey.for_keyword("AgentName")
SA_PHASE = SearchAttributeKey.for_keyword("AgentRunPhase")
SA_GATE = SearchAttributeKey.for_keyword("GateState")
# "pending" while tool calls wait for a person (SPEC §10), "decided" once the last round was decided.
SA_TOOL_APPROVAL = SearchAttributeKey.for_keyword("ToolApprovalState")

ALL_KEYS: tuple[SearchAttributeKey[str], ...] = (SA_NAMESPACE, SA_NAME, SA_AGENT, SA_PHASE, SA_GATE, SA_TOOL_APPROVAL)
# name -> the type's name as `temporal operator search-attribute create --type` spells it.
SEARCH_ATTRIBUTES: dict[str, str] = {k.name: "Keyword" for k in ALL_KEYS}


class SearchAttributesRefused(RuntimeError):
    """The server would not register the attributes; the message says which and how to do it by hand."""


class SearchAttributeConflict(RuntimeError):
    """An attribute exists with another type; only an operator can resolve that."""


def how_to_register(namespace: str, missing: list[str]) -> str:
    cli = "\n".join(f"  temporal operator search-attribute create --namespace {namespace} --name {name} "
                    f"--type {SEARCH_ATTRIBUTES[name]}" for name in missing)
    cloud = " ".join(f'--sa "{name}={SEARCH_ATTRIBUTES[name]}"' for name in missing)
    return (f"register them once, then start again with AGENTRUN_SETUP_SEARCH_ATTRIBUTES=false:\n{cli}\n"
            f"or on Temporal Cloud:\n  tcld namespace search-attributes add --namespace {namespace} {cloud}")


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register the missing attributes in `namespace`; returns the names added (empty when all were there)."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
    from temporalio.service import RPCError, RPCStatusCode

    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    refused = (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.UNAUTHENTICATED)

    async def missing() -> list[str]:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace))
        have = dict(listed.custom_attributes)
        wrong = [f"{n} is {IndexedValueType.Name(have[n])}" for n in SEARCH_ATTRIBUTES if n in have and have[n] != keyword]
        if wrong:
            raise SearchAttributeConflict(f"search attributes of namespace {namespace} have the wrong type "
                                          f"({', '.join(wrong)}; agentrun needs Keyword): an operator must "
                                          "remove or rename them")
        return [n for n in SEARCH_ATTRIBUTES if n not in have]

    try:
        todo = await missing()
    except RPCError as e:
        if e.status in refused:
            raise SearchAttributesRefused(
                f"cannot read the search attributes of namespace {namespace} ({e.message}); agentrun needs "
                f"{', '.join(SEARCH_ATTRIBUTES)} (Keyword): " + how_to_register(namespace, list(SEARCH_ATTRIBUTES))
            ) from e
        raise
    if not todo:
        return []
    try:
        await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=namespace, search_attributes={n: keyword for n in todo}))
    except RPCError as e:
        if e.status == RPCStatusCode.ALREADY_EXISTS:
            # Another worker registered them first: fine if they now all exist with the right type.
            if not await missing():
                return []
            raise
        if e.status in refused:
            raise SearchAttributesRefused(
                f"the Temporal server refused to register the search attributes {', '.join(todo)} in namespace "
                f"{namespace} ({e.message}); " + how_to_register(namespace, todo)) from e
        raise
    return todo
