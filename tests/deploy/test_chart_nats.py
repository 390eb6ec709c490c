"""The chart's NATS settings (issue 27): the worker authenticates to NATS with credentials from a Secret (a token, a
user and password, or a .creds file) and speaks TLS with a CA and client certificate from another; nothing of them
reaches any other pod."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.deploy.test_chart import chart, component_env, pod_specs, rendered

__all__ = ["chart"]


def _mounted(docs: list[dict[str, Any]], component: str) -> dict[str, str]:
    spec = next(s for n, s in pod_specs(docs) if n == f"agentrun-{component}")
    volumes = {v["name"]: v for v in spec["volumes"]}
    return {m["mountPath"]: volumes[m["name"]]["secret"]["secretName"]
            for m in spec["containers"][0]["volumeMounts"] if "secret" in volumes[m["name"]]
            and m["name"].startswith("nats")}


@pytest.mark.parametrize(("auth", "files"), [
    ({"type": "token"}, {"AGENTRUN_NATS__TOKEN_FILE": "/etc/agentrun/nats-auth/token"}),
    ({"type": "userPassword", "user": "events"}, {"AGENTRUN_NATS__USER": "events",
                                                  "AGENTRUN_NATS__PASSWORD_FILE": "/etc/agentrun/nats-auth/password"}),
    ({"type": "creds"}, {"AGENTRUN_NATS__CREDS_FILE": "/etc/agentrun/nats-auth/creds"}),
])
def test_the_worker_reads_its_nats_credentials_from_a_mounted_secret(chart: helm.Chart, auth: dict[str, str],
                                                                     files: dict[str, str]) -> None:
    docs = rendered(chart, {"nats": {"url": "tls://nats.nats.svc:4222", "auth": {"existingSecret": "nats-creds", **auth},
                                     "tls": {"existingSecret": "nats-tls", "clientCert": True}}})
    env = component_env(docs, "worker")
    assert {k: v["value"] for k, v in env.items() if k.startswith("AGENTRUN_NATS__")} == {
        "AGENTRUN_NATS__URL": "tls://nats.nats.svc:4222", **files, "AGENTRUN_NATS__CA_FILE": "/etc/agentrun/nats-tls/ca.crt",
        "AGENTRUN_NATS__CERT_FILE": "/etc/agentrun/nats-tls/tls.crt", "AGENTRUN_NATS__KEY_FILE": "/etc/agentrun/nats-tls/tls.key"}
    assert _mounted(docs, "worker") == {"/etc/agentrun/nats-auth": "nats-creds", "/etc/agentrun/nats-tls": "nats-tls"}
    for other in ("bridge", "api"):
        assert _mounted(docs, other) == {} and not any(k.startswith("AGENTRUN_NATS__") for k in component_env(docs, other))


def test_without_credentials_only_the_url_is_set(chart: helm.Chart) -> None:
    docs = rendered(chart, {"nats": {"url": "nats://nats:4222"}})
    assert [k for k in component_env(docs, "worker") if k.startswith("AGENTRUN_NATS__")] == ["AGENTRUN_NATS__URL"]
    assert _mounted(docs, "worker") == {}
