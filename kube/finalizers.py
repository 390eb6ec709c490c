"""Our finalizer on an object, added and removed by merge patches that carry the resourceVersion read.

A finalizer patch that does not name the version would replace the whole list with what this process read, dropping
another controller's finalizer added in between; with the version it fails with Conflict instead, and the caller
reads again (kube/resources.py `update_with_retry` does exactly that).
"""

from __future__ import annotations

from typing import Any


def finalizer_added(meta: dict[str, Any], finalizer: str) -> dict[str, Any] | None:
    """The merge patch that adds `finalizer` to an object read as `meta`; None when it has it already.

    The patch carries the resourceVersion read, so it fails with Conflict if the object changed since."""
    fins = list(meta.get("finalizers") or [])
    if finalizer in fins:
        return None
    return {"metadata": {"finalizers": [*fins, finalizer], "resourceVersion": meta["resourceVersion"]}}


def finalizer_removed(meta: dict[str, Any], finalizer: str) -> dict[str, Any] | None:
    """The merge patch that removes `finalizer` (None when it is not there); it fails with Conflict if the object changed."""
    fins = list(meta.get("finalizers") or [])
    if finalizer not in fins:
        return None
    return {"metadata": {"finalizers": [f for f in fins if f != finalizer], "resourceVersion": meta["resourceVersion"]}}


__all__ = ["finalizer_added", "finalizer_removed"]
