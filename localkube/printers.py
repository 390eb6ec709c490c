"""The helpers kube-apiserver's printers share (pkg/printers and its internalversion printers): columns, ages as
`kubectl get` shows them, selectors as text.

Why a module of its own: each kind's printer columns live with its strategy (`kinds/`), and they all build their
columns and cells from these; `tables.py` turns a kind's printer into the `meta.k8s.io/v1 Table` a client asked for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from .selectors import SelectorError, label_selector_from_dict
from .util import now, parse_time

Obj = dict[str, Any]
# One row of a table: its cells, and the row's conditions (only pods have any).
Row = tuple[list[Any], list[Obj]]
Printer = tuple[list[Obj], Callable[[Obj], Row]]

NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, although some "
             "resources may allow a client to request the generation of an appropriate name automatically. "
             "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
             "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
AGE_DESC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is "
            "not guaranteed to be set in happens-before order across separate operations. Clients may not set "
            "this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
            "Read-only. Null for lists. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")


def human_duration(d: dt.timedelta) -> str:
    """apimachinery's duration.HumanDuration."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        h = hours % 24
        return f"{days}d" if h == 0 else f"{days}d{h}h"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        dd = days % 365
        return f"{years}y" if dd == 0 else f"{years}y{dd}d"
    return f"{years}y"


def since(ts: Any) -> str:
    """translateTimestampSince: "<unknown>" for a zero time."""
    if not ts or not isinstance(ts, str):
        return "<unknown>"
    try:
        return human_duration(now() - parse_time(ts))
    except ValueError:
        return "<invalid>"


def age(obj: Obj) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"))


def col(name: str, typ: str = "string", fmt: str = "", priority: int = 0, desc: str = "") -> Obj:
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": priority}


def name_col() -> Obj:
    return col("Name", fmt="name", desc=NAME_DESC)


def age_col() -> Obj:
    return col("Age", desc=AGE_DESC)


def wide(name: str, desc: str = "") -> Obj:
    return col(name, priority=1, desc=desc)


def status_of(o: Obj) -> Obj:
    st = o.get("status")
    return st if isinstance(st, dict) else {}


def spec_of(o: Obj) -> Obj:
    sp = o.get("spec")
    return sp if isinstance(sp, dict) else {}


def name_of(o: Obj) -> str:
    return str(o.get("metadata", {}).get("name", ""))


def deleting(o: Obj) -> bool:
    return bool(o.get("metadata", {}).get("deletionTimestamp"))


def format_label_selector(sel: Any) -> str:
    """metav1.FormatLabelSelector."""
    try:
        text = str(label_selector_from_dict(sel))
    except SelectorError:
        return "<error>"
    return text or "<none>"


def has_condition(o: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status_of(o).get("conditions") or [])


def created_at(o: Obj) -> list[Any]:
    return [name_of(o), o.get("metadata", {}).get("creationTimestamp")]


# The default table of a kind without a printer of its own (the server's default table convertor).
CREATED_AT_COLUMNS = [name_col(), col("Created At", "date", desc=AGE_DESC)]


def cells_only(columns: list[Obj], cells: Callable[[Obj], list[Any]]) -> Printer:
    """A printer whose rows have no conditions."""
    return columns, lambda o: (cells(o), [])


def containers_cells(o: Obj) -> list[Any]:
    """The wide Containers, Images and Selector cells of a kind with a pod template."""
    containers = ((spec_of(o).get("template") or {}).get("spec") or {}).get("containers") or []
    return [",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers),
            format_label_selector(spec_of(o).get("selector"))]
