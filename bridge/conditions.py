"""The status conditions the bridge writes on the objects it reconciles (SkillPacks, PersonaPacks, Ensembles).

One shape for all of them, metav1.Condition's, with Kubernetes' rule for `lastTransitionTime`: it is the time the
condition's status last changed, so a rewrite that keeps the status keeps the time (and a status write that changes
nothing can be recognised and skipped).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from models.timestamps import rfc3339


def condition(current: list[Any], ctype: str, status: str, *, reason: str, message: str,
              generation: int) -> dict[str, Any]:
    """The condition `ctype` as it is now; `current`: the object's conditions as stored."""
    old = next((c for c in current if isinstance(c, dict) and c.get("type") == ctype), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since or rfc3339(datetime.now(UTC)), "observedGeneration": generation}
