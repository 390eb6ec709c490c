"""`agentrun temporal setup`: register the search attributes on any Temporal, on demand.

The worker does the same at start-up; this is for operators who set up a namespace ahead of
time (the Helm chart runs it as a hook Job) and who want to see the outcome, or the commands to
run by hand where the server refuses (Temporal Cloud).
"""

from __future__ import annotations

import asyncio
import sys

from pydantic import ValidationError
from temporalio.service import RPCError

from models.search_attributes import (
    SEARCH_ATTRIBUTES,
    SearchAttributeConflict,
    SearchAttributesRefused,
    ensure_search_attributes,
)
from models.settings import SettingsError, TemporalSettings


def setup(temporal: TemporalSettings) -> int:
    async def go() -> list[str]:
        client = await temporal.connect()
        return await ensure_search_attributes(client, temporal.namespace)

    try:
        added = asyncio.run(go())
    except (SearchAttributesRefused, SearchAttributeConflict, SettingsError, ValidationError) as e:
        print(f"agentrun temporal setup: {e}", file=sys.stderr)
        return 1
    except RPCError as e:
        print(f"agentrun temporal setup: Temporal at {temporal.address} answered {e.status.name}: {e.message}",
              file=sys.stderr)
        return 1
    except RuntimeError as e:  # connection failures surface as RuntimeError from the SDK's core
        print(f"agentrun temporal setup: cannot reach Temporal at {temporal.address}: {e}", file=sys.stderr)
        return 1
    for name in SEARCH_ATTRIBUTES:
        print(f"{name:<18} Keyword  {'added' if name in added else 'present'}")
    print(f"namespace {temporal.namespace} at {temporal.address} is ready for agentrun")
    return 0
