"""Common base for the CRD models: camelCase on the wire, snake_case in Python.

Unknown fields are ignored on input (Sympozium objects carry many fields we do not act on),
and parse errors are reported with the Kubernetes field path (`spec.lifecycle.postRun[0].name`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

M = TypeVar("M", bound=BaseModel)


class K8sModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON form as Kubernetes stores it: camelCase, no unset or empty optional fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class FieldProblem(Exception):
    """A spec problem naming the field, as the run's failure message shows it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class PolicyViolation(FieldProblem):
    """A FieldProblem that a policy rule (or the always-denied env keys) raised.

    The admission webhook refuses only these: other spec problems are admitted and fail the
    run when it starts, so the user has a run object whose status names the field.
    """


def field_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def parse(model: type[M], data: Any, prefix: str) -> M:
    """Validate `data` as `model`; the first error becomes a FieldProblem with its path."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        raise FieldProblem(field_path(prefix, loc), err["msg"]) from None
