"""The README's Configuration table names every variable the worker, the bridge and the API read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from api.settings import ApiSettings
from bridge.settings import BridgeSettings
from worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]


def _variables(cls: type[BaseModel], prefix: str = "AGENTRUN_") -> Iterator[str]:
    for name, field in cls.model_fields.items():
        t = field.annotation
        if isinstance(t, type) and issubclass(t, BaseModel):
            yield from _variables(t, f"{prefix}{name.upper()}__")
        else:
            yield f"{prefix}{name.upper()}"


def _documented() -> set[str]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Configuration"):]
    names: set[str] = set()
    for row in table.splitlines():
        if not row.startswith("| `AGENTRUN_"):
            continue
        group = ""
        for token in re.findall(r"`([A-Z_]+)`", row.split("|")[1]):
            if token.startswith("__"):  # `AGENTRUN_TEMPORAL__NAMESPACE`, `__TASK_QUEUE`: same group
                names.add(group + token)
            else:
                names.add(token)
                group = token[:token.index("__")] if "__" in token else ""
    return names


def test_every_setting_is_in_the_configuration_table() -> None:
    read = {v for cls in (WorkerSettings, BridgeSettings, ApiSettings) for v in _variables(cls)}
    assert len(read) > 30
    documented = _documented()
    assert read - documented == set(), "document these in README.md's Configuration table"
    assert documented - read == set(), "the README documents variables no process reads"
