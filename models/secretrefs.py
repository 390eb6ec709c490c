"""Which fields of which kind name a Secret, in one place (issue 27, hole 1; SPEC §1.5).

A run's pods read every Secret these fields name (an env var from a key, the provider key, a pull secret, a mounted
volume), and the worker, not the user, creates those pods. Kubernetes lets whoever may create a pod read any Secret
of its namespace through it; an AgentRun's author is not a pod's author, so the admission webhook asks for each
Secret named here whether the identity that wrote the object may `get` it (api/secretcheck.py), and refuses the
write naming the field and the Secret otherwise. Fields whose consumers come later (an Agent's MCP servers,
observability headers, channels; a sidecar's `secretRef`) are listed now, so nothing slips in when they start to act.

A field is a path over the object as stored: `.name` steps into a map, `[*]` into every item of a list, `{*}` into
every value of a map. A new field naming a Secret is one line in `SECRET_FIELDS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentrunner.config import DEFAULT_BASE_URLS, ECHO

from .agent import AgentProfile
from .resolve import ResolvedRun

# Kubernetes' core/v1 shapes that name a Secret, relative to the object holding them.
_ENV = "env[*].valueFrom.secretKeyRef.name"  # an EnvVar list (a hook's, a sidecar's)
_HOOKS = ("lifecycle.preRun[*].", "lifecycle.postRun[*].")
_VOLUMES = ("volumes[*].secret.secretName", "volumes[*].projected.sources[*].secret.name")


def _in(prefix: str, *paths: str) -> tuple[str, ...]:
    return tuple(prefix + p for p in paths)


def _hooks_env(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{hooks}{_ENV}" for hooks in _HOOKS)


_AGENT_FIELDS = (
    *_hooks_env("spec.agents.default."),
    "spec.authRefs[*].secret",
    "spec.provider.apiKeySecret",  # the legacy shape's provider key
    "spec.agents.default.providerHeadersSecretRef",
    "spec.mcpServers[*].authSecret",
    "spec.observability.headersSecretRef",
    "spec.channels[*].configRef.secret",
    "spec.webEndpoint.authSecretRef",
    "spec.imagePullSecrets[*].name",
    *_in("spec.", *_VOLUMES),
    *_in("spec.channels[*].", *_VOLUMES),
)
_PACK_FIELDS = (  # shared by an Ensemble and a PersonaPack; what each persona names is per kind below
    "spec.authRefs[*].secret",
    "spec.channelConfigs{*}",
)

# kind -> the fields of that kind that name a Secret.
SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "AgentRun": (
        *_hooks_env("spec."),
        "spec.model.authSecretRef",
        "spec.model.providerHeadersSecretRef",
        "spec.imagePullSecrets[*].name",
        *_in("spec.", *_VOLUMES),
    ),
    "Agent": _AGENT_FIELDS,
    "SympoziumInstance": _AGENT_FIELDS,
    "SkillPack": (
        f"spec.sidecar.{_ENV}",
        "spec.sidecar.secretRef",
        *_in("spec.sidecar.", *_VOLUMES),
    ),
    "Ensemble": (
        *_PACK_FIELDS,
        "spec.providerHeadersSecretRef",
        *_in("spec.", *_VOLUMES),
        "spec.channelVolumes{*}[*].secret.secretName",
        "spec.channelVolumes{*}[*].projected.sources[*].secret.name",
        *_hooks_env("spec.agentConfigs[*]."),
        "spec.agentConfigs[*].providerHeadersSecretRef",
        "spec.agentConfigs[*].channelConfigs{*}",
        "spec.agentConfigs[*].mcpServers[*].authSecret",
    ),
    "PersonaPack": (
        *_PACK_FIELDS,
        *_hooks_env("spec.personas[*]."),
    ),
}

_STEP = re.compile(r"\.?([A-Za-z]+)|(\[\*\])|(\{\*\})")


@dataclass(frozen=True)
class SecretRef:
    """One Secret an object names: where (`spec.authRefs[0].secret`) and which."""

    field: str
    name: str


def _steps(path: str) -> list[str]:
    out, pos = [], 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            raise ValueError(f"not a field path: {path!r} at {pos}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


def _walk(node: Any, steps: list[str], at: str) -> list[SecretRef]:
    if not steps:
        return [SecretRef(at, node)] if isinstance(node, str) and node else []
    step, rest = steps[0], steps[1:]
    if step == "[*]":
        items = node if isinstance(node, list) else []
        return [r for i, item in enumerate(items) for r in _walk(item, rest, f"{at}[{i}]")]
    if not isinstance(node, dict):
        return []
    if step == "{*}":
        return [r for key in sorted(node) for r in _walk(node[key], rest, f"{at}.{key}")]
    return _walk(node.get(step), rest, f"{at}.{step}" if at else step)


def secret_refs(kind: str, obj: dict[str, Any]) -> list[SecretRef]:
    """Every Secret `obj` (of `kind`, as stored) names, each with its field, in the order of SECRET_FIELDS."""
    return [r for path in SECRET_FIELDS.get(kind, ()) for r in _walk(obj, _steps(path), "")]


# -- the key a run uses but did not name ---------------------------------------------------------------------------

# Env names that steer where the agent sends its requests or what runs in its process (the one that holds the key):
# endpoints and proxies, CA bundles, the runner's own MODEL_* settings, and interpreter hooks (PYTHONPATH would load a
# file a preRun hook wrote). Matched case-insensitively.
STEERING_ENV = re.compile(
    r"^(MODEL_|PYTHON|LD_|NODE_|JAVA_|_JAVA_|JDK_JAVA_|SSL_CERT_|REQUESTS_CA_|CURL_CA_|GODEBUG|GOFLAGS)"
    r"|_(BASE_URL|ENDPOINT|HOST|PROXY)$|^(HTTPS?|ALL|NO)_PROXY$", re.IGNORECASE)


def key_redirects(spec: dict[str, Any], agent: AgentProfile, run: ResolvedRun, *, default_image: str) -> list[str]:
    """The fields by which a run that uses its Agent's provider key (it names none of its own) would send that key
    elsewhere than its Agent does: another endpoint (`model.baseURL`, or a provider whose default endpoint differs),
    another agent image (the program that gets the key), or env that steers the agent's requests or process. A run
    whose author may read the key itself may (api/admission.py asks); none of this matters to a run without a key."""
    own = ((spec.get("model") or {}) if isinstance(spec.get("model"), dict) else {}).get("authSecretRef")
    if own or not run.model.auth_secret_ref or run.model.auth_secret_ref != agent.model.auth_secret_ref:
        return []
    out: list[str] = []
    if _endpoint(run.model.provider, run.model.base_url) != _endpoint(agent.model.provider, agent.model.base_url):
        out.append("spec.model.baseURL" if run.model.base_url != agent.model.base_url else "spec.model.provider")
    if run.image != (agent.image or default_image):
        out.append("spec.image")
    if spec.get("env"):  # the run's env replaces the Agent's (SPEC §1.2)
        for name in sorted(set(run.env) | set(agent.env)):
            if STEERING_ENV.search(name) and run.env.get(name) != agent.env.get(name):
                out.append(f"spec.env.{name}")
    return out


def _endpoint(provider: str, base_url: str) -> str:
    """Where a provider's requests go: its base URL, else the runner's default for it (agentrunner/config.py)."""
    url, name = base_url.strip().rstrip("/"), provider.strip().lower()
    if url:
        return url
    if name in ("", ECHO):
        return "<none>"  # the offline echo provider sends nothing
    return DEFAULT_BASE_URLS.get(name, f"<{name}'s own>")  # azure-openai: the endpoint in the key's own Secret
