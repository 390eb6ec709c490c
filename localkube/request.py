"""What a write asks and who asks it: the request context (`Ctx`) and `DeleteOptions`.

Why a module of its own: the generic store (`apiserver.py`), the per-kind strategies (`kinds/`), the admission
plug-ins and the controllers all take them, and none of those should import the others to get them (kube-apiserver
keeps them in k8s.io/apiserver/pkg/endpoints/request and metav1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import bad_request, invalid
from .rbac import UserInfo


@dataclass
class Ctx:
    """Who is asking and how. `user=None` means an in-process controller (all-powerful)."""

    user: UserInfo | None = None
    dry_run: bool = False
    field_validation: str = "Warn"
    warnings: list[str] = field(default_factory=list)
    # Controllers may write fields (pod binding, status of immutable specs) clients may not.
    internal: bool = False
    # Set by the HTTP layer, which awaits webhooks when a write raises `webhooks.Pending`. In-process
    # controllers cannot await, so their writes are not sent to admission webhooks.
    webhooks: bool = False
    # The request's options as admission webhooks see them (fieldManager, fieldValidation, dryRun).
    options: dict[str, Any] = field(default_factory=dict)
    # The write is being computed again from what the mutating webhooks made of it: only the
    # validating webhooks are left to see it.
    mutated: bool = False


INTERNAL = Ctx(internal=True)


@dataclass
class DeleteOptions:
    propagation: str | None = None
    grace_period: int | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: Any, query: dict[str, str]) -> DeleteOptions:
        opts = cls()
        if isinstance(body, dict):
            opts.propagation = body.get("propagationPolicy")
            if body.get("orphanDependents") is True and opts.propagation is None:
                opts.propagation = "Orphan"
            if body.get("orphanDependents") is False and opts.propagation is None:
                opts.propagation = "Background"
            gp = body.get("gracePeriodSeconds")
            if gp is not None:
                opts.grace_period = int(gp)
            pre = body.get("preconditions") or {}
            opts.precondition_uid = pre.get("uid")
            opts.precondition_rv = pre.get("resourceVersion")
            if body.get("dryRun"):
                opts.dry_run = True
        if "propagationPolicy" in query:
            opts.propagation = query["propagationPolicy"]
        if "gracePeriodSeconds" in query:
            try:
                opts.grace_period = int(query["gracePeriodSeconds"])
            except ValueError as e:
                raise bad_request(f"invalid gracePeriodSeconds: {query['gracePeriodSeconds']!r}") from e
        if query.get("dryRun"):
            opts.dry_run = True
        if opts.propagation not in (None, "Orphan", "Background", "Foreground"):
            raise invalid("DeleteOptions", "", [(
                "propagationPolicy", "FieldValueNotSupported",
                f'Unsupported value: "{opts.propagation}": supported values: "Foreground", "Background", "Orphan", "nil"',
            )])
        return opts

    def review_options(self) -> dict[str, Any]:
        """The DeleteOptions object an admission webhook is shown."""
        out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period is not None:
            out["gracePeriodSeconds"] = self.grace_period
        pre = {k: v for k, v in (("uid", self.precondition_uid), ("resourceVersion", self.precondition_rv)) if v}
        if pre:
            out["preconditions"] = pre
        if self.propagation:
            out["propagationPolicy"] = self.propagation
        if self.dry_run:
            out["dryRun"] = ["All"]
        return out
