"""Sympozium's fields this control plane accepts but does not act on, and those of backends it does not offer.

The CRDs accept every field of Sympozium's v1alpha1 kinds so its YAML applies unchanged and nothing is pruned. A
field that would change what happens there and does nothing here must not pass silently: the admission webhook
warns about it (kubectl prints `Warning: ...`) and the run's status gets a `FieldsIgnored` condition naming it.
A field asking for an execution backend we do not have (a long-running server, a warm pool of sandboxes) cannot be
honoured by running something else, so it refuses the run (`Unsupported`, a `PolicyViolation`: refused at admission,
`Failed` at start, through `models/evaluate.py`, the one path both use).

Pure functions over the raw objects, so they read the fields whatever else the spec holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import PolicyViolation


class Unsupported(PolicyViolation):
    """A field asking for an execution backend this control plane does not offer."""


def _set(v: Any) -> bool:
    """Set to something that changes behaviour: not absent, empty or false."""
    return v not in (None, "", False) and v != [] and v != {}


def _enabled(default: bool) -> Callable[[Any], bool]:
    """An object with Sympozium's `enabled` switch: it does something only when on."""
    def on(v: Any) -> bool:
        return isinstance(v, dict) and bool(v.get("enabled", default))
    return on


def _is_false(v: Any) -> bool:
    return v is False


@dataclass(frozen=True)
class Ignored:
    path: str  # under the object's spec
    why: str
    matters: Callable[[Any], bool] = _set


AGENT_IGNORED: tuple[Ignored, ...] = (
    Ignored("channels", "channels (Slack, Telegram, ...) are not connected here; runs start from kubectl, the API "
                        "and schedules"),
    Ignored("memory", "there is no memory server here", _enabled(True)),
    Ignored("observability", "enabled without an otlpEndpoint: the agent exports its spans only where the worker's "
                             "AGENTRUN_AGENT_OTLP_ENDPOINT says, if it says",
            lambda v: isinstance(v, dict) and v.get("enabled") is True and not v.get("otlpEndpoint")),
    Ignored("mcpServers", "an MCP server without a url names an MCPServer resource, which is not served here; "
                          "its tools are not offered", lambda v: isinstance(v, list) and any(
                              isinstance(m, dict) and not m.get("url") for m in v)),
    Ignored("webEndpoint", "no web endpoint is deployed here", _enabled(False)),
    Ignored("volumes", "not mounted into the agent pod here"),
    Ignored("volumeMounts", "not mounted into the agent pod here"),
    Ignored("agents.default.providerHeaders", "the agent sends no extra provider headers here"),
    Ignored("agents.default.providerHeadersSecretRef", "the agent sends no extra provider headers here"),
)

RUN_IGNORED: tuple[Ignored, ...] = (
    Ignored("dryRun", "the agent calls the model as usual here"),
    Ignored("canaryMode", "there are no built-in canary checks here"),
    Ignored("useContext", "the agent here answers each run's task alone, so there is no history to drop", _is_false),
    Ignored("volumes", "not mounted into the agent pod here"),
    Ignored("volumeMounts", "not mounted into the agent pod here"),
    Ignored("model.providerHeaders", "the agent sends no extra provider headers here"),
    Ignored("model.providerHeadersSecretRef", "the agent sends no extra provider headers here"),
    Ignored("model.modelRef", "there are no Model resources here; set provider, model and baseURL"),
)

# Feature gates that are honoured (models/resolve.py: sub-agents=false refuses a run with spec.parent).
HONOURED_GATES = ("sub-agents",)


def _any_off(v: Any) -> bool:
    return isinstance(v, dict) and any(on is False for k, on in v.items() if k not in HONOURED_GATES)


POLICY_IGNORED: tuple[Ignored, ...] = (
    Ignored("featureGates", "no feature is switched off here", _any_off),
    Ignored("networkPolicy", "no NetworkPolicy is made for agent pods here"),
    Ignored("modelPolicy", "allowed models and namespaces are not checked here"),
)


def _get(spec: Any, path: str) -> Any:
    node = spec
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def ignored_in(obj: dict[str, Any] | None, table: tuple[Ignored, ...], prefix: str) -> list[str]:
    """'<prefix>spec.<field>: has no effect here (<why>)' for each field of `table` set in `obj`."""
    spec = _spec(obj)
    return [f"{prefix}spec.{f.path}: has no effect here ({f.why})" for f in table if f.matters(_get(spec, f.path))]


def ignored_fields(run: dict[str, Any] | None, agent: dict[str, Any] | None = None,
                   policy: dict[str, Any] | None = None) -> list[str]:
    """What a run asks for, itself or through its Agent and policy, that has no effect here."""
    agent_name = str(((agent or {}).get("metadata") or {}).get("name") or "")
    policy_name = str(((policy or {}).get("metadata") or {}).get("name") or "")
    return [*ignored_in(run, RUN_IGNORED, ""),
            *ignored_in(agent, AGENT_IGNORED, f'Agent "{agent_name}" '),
            *ignored_in(policy, POLICY_IGNORED, f'SympoziumPolicy "{policy_name}" ')]


def check_agent_backend(agent: dict[str, Any] | None) -> None:
    """Refuse an Agent asking for a backend we do not offer; raises Unsupported naming the field."""
    warm = _get(_spec(agent), "agents.default.agentSandbox.warmPool")
    if _set(warm):
        raise Unsupported("spec.agents.default.agentSandbox.warmPool",
                          "warm pools of Agent Sandboxes are not offered here: agent runs are Jobs (remove warmPool)")


def check_run_backend(run: dict[str, Any] | None) -> None:
    """Refuse a run asking for a backend we do not offer; raises Unsupported naming the field."""
    spec = _spec(run)
    mode = spec.get("mode")
    if mode not in (None, "", "task"):
        raise Unsupported("spec.mode", f'mode "{mode}" is not offered here: runs are Jobs (mode "task"); '
                                       "there is no long-running server mode")
    if _set(_get(spec, "agentSandbox.warmPoolRef")):
        raise Unsupported("spec.agentSandbox.warmPoolRef",
                          "claiming a sandbox from a warm pool is not offered here: agent runs are Jobs (remove "
                          "warmPoolRef)")
