"""ValidatingWebhookConfigurations and MutatingWebhookConfigurations (pkg/registry/admissionregistration): their
typed decoding, defaults and validation (`webhook_config.py`, which the webhook dispatcher shares) and
`kubectl get`'s columns.
"""

from __future__ import annotations

from .. import printers, webhook_config
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Objects, Strategy


class WebhookConfigurationStrategy(Strategy):
    def check_types(self, rt: ResourceType, obj: Obj) -> None:
        webhook_config.check_types(obj, rt.kind)

    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        webhook_config.set_defaults(obj, rt.kind)

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        webhook_config.set_defaults(new, rt.kind)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        return webhook_config.validate_configuration(obj, rt.kind)

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Webhooks", "integer"), printers.age_col()],
                                   lambda o: [printers.name_of(o), len(o.get("webhooks") or []), printers.age(o)])
