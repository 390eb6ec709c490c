"""Settings of the API process (AGENTRUN_ prefix, nested with `__`)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kube.settings import KubeSettings
from models.authorship import TrustedComponents
from models.settings import DEFAULT_AGENT_IMAGE, TemporalSettings


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTRUN_", env_nested_delimiter="__", extra="ignore")

    temporal: TemporalSettings = TemporalSettings()
    kube: KubeSettings = KubeSettings()
    # The image admission assumes for runs that name none (as the worker does).
    agent_image: str = DEFAULT_AGENT_IMAGE
    # Where the API's one watch of runs (api/runwatch.py: the console's live pages, the metrics) looks ([] = all
    # namespaces); the chart sets it to watchNamespaces, where its RBAC is namespaced.
    namespaces: list[str] = []
    host: str = "127.0.0.1"
    port: int = 8080
    # A file mapping bearer tokens to identities: one "token identity" pair per line (# comments).
    token_file: str = ""
    # Bearer tokens not in the token file are asked of the Kubernetes API server (a TokenReview), so the identities a
    # cluster gives (ServiceAccount tokens, OIDC tokens it accepts) are callers too; the API's own account then needs
    # `create tokenreviews`. Audiences to ask for (empty: the API server's own).
    token_review: bool = True
    token_review_audiences: list[str] = []
    # Failed credentials per client and per token prefix (api/throttle.py): this many at once, then one per this many
    # seconds (a 429 with Retry-After meanwhile).
    failed_auth_burst: int = Field(10, ge=1)
    failed_auth_refill_seconds: float = Field(6.0, gt=0)
    # The console's sessions are Secrets of this namespace (api/console/sessions.py: sealed, one per session), so a
    # restart or another replica keeps everyone signed in; the API needs create, get, delete and deletecollection on
    # Secrets there (the chart sets the API's own namespace and gives it that Role). Empty: in the process's memory.
    session_namespace: str = ""
    # Serving without any token must be asked for explicitly.
    insecure: bool = False
    # Addresses of reverse proxies (an Ingress controller) whose X-Forwarded-For names the client, comma-separated or
    # "*" (uvicorn's forwarded_allow_ips): failed credentials are throttled per client, and behind a proxy every
    # client would otherwise be the proxy. Empty: the peer's address is the client's.
    forwarded_allow_ips: str = ""
    # Serve HTTPS with this certificate and key (PEM files), as the kube-apiserver requires to call
    # the admission webhook; both or neither.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    # A second listener, HTTPS with the certificate above, that serves only the admission webhook (and probes);
    # the API itself then stays plain HTTP on `port` (TLS at the Ingress). 0: one listener serves everything.
    webhook_port: int = 0
    # Require TLS client certificates signed by this CA (PEM) on the webhook listener: the kube-apiserver's, so only
    # it may call the admission webhook. Needs a webhook port (the API's own listener never asks for one).
    webhook_client_ca_file: str = ""
    # The control plane's own Kubernetes users, per component (AGENTRUN_TRUSTED__API, __WORKER, __BRIDGE: JSON lists):
    # each may carry an author stamp onto what it creates for someone (models/authorship.py): the API its caller's on
    # runs and schedules, the worker a schedule's on its tick's run, the bridge a pack's on the Agents and schedules
    # it stamps out. Anyone else's stamp is their own name.
    trusted: TrustedComponents = TrustedComponents()
    # The older name of `trusted.api` (AGENTRUN_TRUSTED_CREATORS), still read.
    trusted_creators: list[str] = []

    def trusted_components(self) -> TrustedComponents:
        return self.trusted.model_copy(update={"api": [*self.trusted.api, *self.trusted_creators]})
    # Origins (scheme://host[:port]) of Temporal UIs whose browsers may call /codec/encode and /codec/decode (JSON
    # list); `agentrun up` sets its UI's. Empty: the codec routes answer no cross-origin request.
    codec_cors_origins: list[str] = []
    # The Temporal UI's base URL (scheme://host[:port][/path]): the console links each run to its workflow there
    # (`{url}/namespaces/{temporal namespace}/workflows/{workflow ID}`). Empty: no link. `agentrun up` sets its UI's.
    temporal_ui_url: str = ""
    # Where a trace is shown (Tempo, Jaeger, ...), with `{traceID}` for the run's status.traceID, e.g.
    # https://tempo.example/trace/{traceID}: the console links each traced run there. Empty: no link.
    trace_url_template: str = ""

    @field_validator("codec_cors_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if not re.fullmatch(r"https?://[^/\s*]+", origin):
                raise ValueError(f"AGENTRUN_CODEC_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port], "
                                 "no path, no wildcard: the codec routes accept credentials)")
        return origins

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url(cls, url: str) -> str:
        if url and (not re.fullmatch(r"https?://[^/\s]+(/\S*)?", url) or "{traceID}" not in url):
            raise ValueError(f"AGENTRUN_TRACE_URL_TEMPLATE: {url!r} is not an http(s) URL with {{traceID}} in it")
        return url

    @field_validator("temporal_ui_url")
    @classmethod
    def _ui_url(cls, url: str) -> str:
        if url and not re.fullmatch(r"https?://[^/\s]+(/\S*)?", url):
            raise ValueError(f"AGENTRUN_TEMPORAL_UI_URL: {url!r} is not an http(s) URL")
        return url.rstrip("/")
