"""The strategy of a kind: what kube-apiserver's generic store asks of each resource
(k8s.io/apiserver/pkg/registry/rest: RESTCreateStrategy, RESTUpdateStrategy, RESTDeleteStrategy, and the
table convertor of pkg/printers).

Why: the generic store (`apiserver.py`) knows names, resourceVersions, admission and storage, and nothing about
pods or jobs; everything a kind adds (its defaults, validation, graceful deletion, the status it starts with, its
printer columns) is one `Strategy` in `kinds/<kind>.py`, the way `pkg/registry/<group>/<kind>/strategy.go` holds
it upstream. A kind with nothing of its own uses this base class as it is.

The order of a create, as in kube-apiserver: decoding (`string_maps`, `check_types`) and defaulting (`defaults`),
the mutating admission plug-ins (`admission_plugins.py`), `prepare_for_create` (the status a new object starts
with), `validate`; an update runs `prepare_for_update` then `validate` with the old object.
"""

from __future__ import annotations

from typing import Any, Protocol

from .. import printers
from ..registry import ResourceType
from ..request import Ctx, DeleteOptions

Obj = dict[str, Any]
# A field error: (field path, metav1.CauseType reason, message).
Cause = tuple[str, str, str]
# A typed map field checked when the body is decoded: (Go struct, field path, value, element type).
TypedMap = tuple[str, str, Any, str]


class Objects(Protocol):
    """Read access to the stored objects (localkube's Store), for the few strategies that look others up."""

    def get(self, key: tuple[str, str], namespace: str, name: str) -> Obj | None: ...

    def select(self, key: tuple[str, str], namespace: str | None = None) -> list[Obj]: ...


class Strategy:
    """A kind with nothing of its own: no defaults, no validation beyond the object's metadata, the default table."""

    def typed_maps(self, obj: Obj) -> list[TypedMap]:
        """The kind's own map-of-string fields, which the typed decoding refuses (400) when they hold anything
        else."""
        return []

    def check_types(self, rt: ResourceType, obj: Obj) -> None:
        """Further typed decoding (400 for a field of the wrong JSON type)."""

    def defaults(self, obj: Obj) -> None:
        """Defaults of a new object, before the admission plug-ins see it (the scheme's SetDefaults)."""

    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        """What a new object starts with once admitted: its status, system-set fields."""

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        """An update made acceptable: fields the client may not change put back, defaults applied again."""

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        """The kind's own field errors (`old`: the stored object, for an update)."""
        return []

    def grace_period(self, obj: Obj, opts: DeleteOptions) -> int | None:
        """Seconds a delete waits before the object goes (CheckGracefulDelete); 0: at once."""
        return 0

    def awaits_kubelet(self, obj: Obj) -> bool:
        """Whether an object whose deletion is due must still wait for its node to let go of it."""
        return False

    def printer(self, rt: ResourceType) -> printers.Printer:
        """Column definitions and a row function for `kubectl get` (the server's table convertor)."""
        return printers.cells_only(printers.CREATED_AT_COLUMNS, printers.created_at)
