"""ConfigMaps and Secrets (pkg/registry/core/{configmap,secret}/strategy.go): a Secret's stringData folded into its
base64 data and its default type, the typed decoding of their maps, their keys' syntax and the 1 MiB they may hold,
and `kubectl get`'s columns.
"""

from __future__ import annotations

import base64
import re

from .. import printers
from ..errors import bad_request
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Objects, Strategy, TypedMap

MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize, also the ConfigMap limit
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _config_key_errors(key: str) -> list[str]:
    """validation.IsConfigMapKey."""
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not CONFIG_KEY.match(key):
        errs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                    "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        errs.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def string_data(obj: Obj) -> None:
    sd = obj.pop("stringData", None)
    if isinstance(sd, dict):
        data = obj.setdefault("data", {})
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
    for k, v in (obj.get("data") or {}).items():
        try:
            base64.b64decode(v, validate=True)
        except Exception as e:
            raise bad_request(f"illegal base64 data in secret key {k!r}: {e}") from e


def validate_data(obj: Obj, kind: str) -> list[Cause]:
    """ValidateConfigMap / ValidateSecret: key syntax, and at most 1 MiB of data in all."""
    causes: list[Cause] = []
    data = obj.get("data") or {}
    binary = (obj.get("binaryData") or {}) if kind == "ConfigMap" else {}
    total = 0
    for bag, values in (("data", data), ("binaryData", binary)):
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            for msg in _config_key_errors(str(key)):
                causes.append((f"{bag}[{key}]", "FieldValueInvalid", f'Invalid value: "{key}": {msg}'))
            if bag == "data" and isinstance(binary, dict) and key in binary:
                causes.append((f"data[{key}]", "FieldValueInvalid",
                               f'Invalid value: "{key}": duplicate of key present in binaryData'))
            if not isinstance(value, str):
                continue
            if kind == "Secret" or bag == "binaryData":
                try:
                    total += len(base64.b64decode(value))
                except ValueError:
                    total += len(value)
            else:
                total += len(value.encode())
    if total > MAX_DATA_BYTES:
        # The real server reports the whole object ("") for ConfigMaps and `data` for Secrets.
        causes.append(("data" if kind == "Secret" else "", "FieldValueTooLong",
                       f"Too long: must have at most {MAX_DATA_BYTES} bytes"))
    return causes


class ConfigMapStrategy(Strategy):
    def typed_maps(self, obj: Obj) -> list[TypedMap]:
        return [("ConfigMap", "data", obj.get("data"), "string"),
                ("ConfigMap", "binaryData", obj.get("binaryData"), "[]uint8")]

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        return validate_data(obj, "ConfigMap")

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.name_col(), printers.col("Data", "integer"), printers.age_col()],
            lambda o: [printers.name_of(o), len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                       printers.age(o)])


class SecretStrategy(Strategy):
    def typed_maps(self, obj: Obj) -> list[TypedMap]:
        return [("Secret", "data", obj.get("data"), "[]uint8"), ("Secret", "stringData", obj.get("stringData"), "string")]

    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        string_data(obj)
        obj.setdefault("type", "Opaque")

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        string_data(new)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        return validate_data(obj, "Secret")

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.name_col(), printers.col("Type"), printers.col("Data", "integer"), printers.age_col()],
            lambda o: [printers.name_of(o), o.get("type", ""), len(o.get("data") or {}), printers.age(o)])
