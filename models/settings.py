"""The connection settings every process shares: Temporal, NATS, health (Kubernetes: kube/settings.py).

Each process (worker, bridge, API, CLI) has a settings class of its own (`worker/settings.py`,
`bridge/settings.py`, `api/settings.py`) composed of these groups, so a deployment sets exactly the
variables a process reads. Variables carry the `AGENTRUN_` prefix and nest with `__`:
`AGENTRUN_TEMPORAL__ADDRESS`, `AGENTRUN_TEMPORAL__API_KEY_FILE`, `AGENTRUN_KUBE__KUBECONFIG`.

Secrets (the Temporal API key, client keys, the payload codec's keys) are read from files, never from variables: a
mounted Secret can rotate, and a variable's value shows in `kubectl describe pod`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, model_validator

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.converter import DataConverter
    from temporalio.runtime import Runtime
    from temporalio.service import TLSConfig

    from .codec import EncryptionCodec
    from .signing import Signer


# Sympozium's agent image, so existing YAML that names no image runs as it did there.
DEFAULT_AGENT_IMAGE = "ghcr.io/sympozium-ai/sympozium/agent-runner:latest"


class SettingsError(ValueError):
    """A setting that cannot work (a missing file, half a key pair); the message names the variable."""


class TemporalUnreachable(ConnectionError):
    """The Temporal frontend could not be reached (refused, no such host, TLS refused): an operator's matter for the
    process to report in one line, then exit so that its supervisor restarts it."""


def _secret(variable: str, path: str) -> str:
    text = _read(variable, path).decode().strip()
    if not text:
        raise SettingsError(f"{variable}={path}: the file is empty")
    return text


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SettingsError(f"{variable}={path}: cannot read it ({e.strerror or e})") from e


class TemporalSettings(BaseModel):
    """Where Temporal is and how to authenticate to it: plain, TLS, mTLS or an API key (Temporal Cloud)."""

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "agentrun"
    # None: TLS when any of the files below is given, else plain (the dev server).
    tls: bool | None = None
    # PEM CA bundle for the server's certificate; empty: the system's roots.
    server_ca_file: str = ""
    # mTLS: both or neither.
    client_cert_file: str = ""
    client_key_file: str = ""
    # The name the server's certificate is checked against (and sent as SNI), when not the address's host.
    server_name: str = ""
    # A file holding an API key (Temporal Cloud), sent with every call; implies TLS.
    api_key_file: str = ""
    # The payload codec's keys (models/codec.py): lines of '<id> <base64 32-byte key>', the first one encrypts.
    # Empty: payloads go to Temporal unencrypted.
    codec_keys_file: str = ""
    # The keys our API and bridge sign gate verdicts with and the worker verifies them with (models/signing.py), the
    # same format, a file of its own (the codec server never uses it). Empty: verdicts are not signed, and a verdict's
    # encryption is all that tells ours from anyone's (which an API token can forge through /codec/encode).
    signing_keys_file: str = ""

    @model_validator(mode="after")
    def _pairs(self) -> TemporalSettings:
        if bool(self.client_cert_file) != bool(self.client_key_file):
            raise SettingsError("mTLS needs both AGENTRUN_TEMPORAL__CLIENT_CERT_FILE and "
                                "AGENTRUN_TEMPORAL__CLIENT_KEY_FILE (or neither)")
        if self.tls is False and (self.api_key_file or self.client_cert_file):
            raise SettingsError("AGENTRUN_TEMPORAL__TLS=false contradicts a client certificate or an API key: both "
                                "are only ever sent over TLS")
        return self

    @property
    def uses_tls(self) -> bool:
        if self.tls is not None:
            return self.tls
        return bool(self.server_ca_file or self.client_cert_file or self.server_name or self.api_key_file)

    def tls_config(self) -> TLSConfig | bool:
        from temporalio.service import TLSConfig

        if not self.uses_tls:
            return False
        return TLSConfig(
            server_root_ca_cert=_read("AGENTRUN_TEMPORAL__SERVER_CA_FILE", self.server_ca_file)
            if self.server_ca_file else None,
            client_cert=_read("AGENTRUN_TEMPORAL__CLIENT_CERT_FILE", self.client_cert_file)
            if self.client_cert_file else None,
            client_private_key=_read("AGENTRUN_TEMPORAL__CLIENT_KEY_FILE", self.client_key_file)
            if self.client_key_file else None,
            domain=self.server_name or None,
        )

    def api_key(self) -> str | None:
        if not self.api_key_file:
            return None
        key = _read("AGENTRUN_TEMPORAL__API_KEY_FILE", self.api_key_file).decode().strip()
        if not key:
            raise SettingsError(f"AGENTRUN_TEMPORAL__API_KEY_FILE={self.api_key_file}: the file is empty")
        return key

    def codec(self) -> EncryptionCodec | None:
        """The payload codec with the key file's keys; None without a key file (a bad file is a SettingsError)."""
        from .codec import EncryptionCodec, KeyFileError, load_keys

        if not self.codec_keys_file:
            return None
        try:
            return EncryptionCodec(load_keys(self.codec_keys_file))
        except KeyFileError as e:
            raise SettingsError(str(e)) from e

    def signer(self) -> Signer | None:
        """The verdict signer with the signing key file's keys; None without one (a bad file is a SettingsError)."""
        from .codec import KeyFileError
        from .signing import load_signer

        if not self.signing_keys_file:
            return None
        try:
            return load_signer(self.signing_keys_file)
        except KeyFileError as e:
            raise SettingsError(str(e)) from e

    def data_converter(self) -> DataConverter:
        """Pydantic payloads, encrypted by the codec when keys are set; failure messages and stack traces then go
        through the codec too (they can quote a hook's output or a spec's values). With signing keys, what is decoded
        has its signature verified (models/signing.py)."""
        import dataclasses

        from temporalio.converter import DefaultFailureConverterWithEncodedAttributes

        from .codec import SealMarkingCodec, aware_converter
        from .converter import DATA_CONVERTER

        codec, signer = self.codec(), self.signer()
        if codec is None and signer is None:
            return DATA_CONVERTER
        # Decoding also marks what arrived encrypted (seals, for runs that predate signatures) and verifies our API's
        # and bridge's signatures, so a gate verdict tells them from anyone else who can write to Temporal
        # (models/gate.py `marked`).
        converter = aware_converter(seals=codec is not None, verifier=signer)
        if codec is None:
            return dataclasses.replace(DATA_CONVERTER, payload_converter_class=converter)
        return dataclasses.replace(DATA_CONVERTER, payload_codec=SealMarkingCodec(codec.keys),
                                   payload_converter_class=converter,
                                   failure_converter_class=DefaultFailureConverterWithEncodedAttributes)

    async def connect(self, *, lazy: bool = False, runtime: Runtime | None = None, traced: bool = False) -> Client:
        """The one way every process and the CLI connect (pydantic payloads, the payload codec, TLS and API key as
        set); `runtime`: the SDK core's own (the worker's, exporting its metrics), else the default one. `traced`:
        with Temporal's OpenTelemetry interceptor, which carries the current span to what the client starts and
        signals, and (on a worker's client) into workflows and activities; the process must have set up its
        telemetry first (models/telemetry.py)."""
        from temporalio.client import Client
        from temporalio.common import HeaderCodecBehavior

        interceptors: list[Any] = []
        if traced:
            from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor

            interceptors.append(OpenTelemetryInterceptor())
        try:
            return await Client.connect(self.address, namespace=self.namespace, data_converter=self.data_converter(),
                                        tls=self.tls_config(), api_key=self.api_key(), lazy=lazy, runtime=runtime,
                                        interceptors=interceptors,
                                        # Headers (the trace context the interceptor carries) through the payload
                                        # codec like every other payload: the history holds nothing plain but
                                        # search attributes and markers' bookkeeping (what passes through unchanged
                                        # without a codec, and plain headers of older runs, still decode).
                                        header_codec_behavior=HeaderCodecBehavior.CODEC)
        except RuntimeError as e:
            # The SDK's core says so only in its message (temporalio raises a bare RuntimeError).
            if not str(e).startswith("Failed client connect"):
                raise
            raise TemporalUnreachable(f"cannot reach Temporal at {self.address} (namespace {self.namespace}): "
                                      f"{str(e).removeprefix('Failed client connect: ')}") from None


class NatsSettings(BaseModel):
    """Where run events go (JetStream) and how to authenticate there. Credentials are files, as every secret here: a
    token, or a user with a password, or a NATS `.creds` file (a user JWT and its nkey seed); with `tls://` URLs or a
    server that requires TLS, the CA of its certificate and, for mutual TLS, a client certificate and key."""

    # Empty: events are not published (runs are unaffected either way).
    url: str = ""
    token_file: str = ""
    user: str = ""
    password_file: str = ""
    creds_file: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @model_validator(mode="after")
    def _pairs(self) -> NatsSettings:
        if bool(self.user) != bool(self.password_file):
            raise SettingsError("NATS user authentication needs both AGENTRUN_NATS__USER and "
                                "AGENTRUN_NATS__PASSWORD_FILE (or neither)")
        if bool(self.cert_file) != bool(self.key_file):
            raise SettingsError("NATS mutual TLS needs both AGENTRUN_NATS__CERT_FILE and AGENTRUN_NATS__KEY_FILE "
                                "(or neither)")
        if sum(map(bool, (self.token_file, self.user, self.creds_file))) > 1:
            raise SettingsError("give one of AGENTRUN_NATS__TOKEN_FILE, AGENTRUN_NATS__USER (with __PASSWORD_FILE) and "
                                "AGENTRUN_NATS__CREDS_FILE")
        return self

    def connect_options(self) -> dict[str, Any]:
        """The nats-py `connect` options these settings give (files read now: a missing one is a SettingsError)."""
        import ssl

        out: dict[str, Any] = {}
        if self.token_file:
            out["token"] = _secret("AGENTRUN_NATS__TOKEN_FILE", self.token_file)
        if self.user:
            out["user"] = self.user
            out["password"] = _secret("AGENTRUN_NATS__PASSWORD_FILE", self.password_file)
        if self.creds_file:
            _read("AGENTRUN_NATS__CREDS_FILE", self.creds_file)  # readable now, not at the first event
            out["user_credentials"] = self.creds_file
        if self.ca_file or self.cert_file or self.url.startswith("tls://"):
            ctx = ssl.create_default_context(
                cadata=_read("AGENTRUN_NATS__CA_FILE", self.ca_file).decode() if self.ca_file else None)
            if self.cert_file:
                _read("AGENTRUN_NATS__CERT_FILE", self.cert_file)
                _read("AGENTRUN_NATS__KEY_FILE", self.key_file)
                ctx.load_cert_chain(self.cert_file, self.key_file)
            out["tls"] = ctx
        return out


class HealthSettings(BaseModel):
    """The probe and metrics listener of the worker and the bridge (the API serves its own on its port)."""

    host: str = "127.0.0.1"
    # 0: no listener (the embedded stack runs several processes on one host).
    port: int = 0


def user_agent(component: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("agentrun")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        v = "dev"
    return f"agentrun-{component}/{v}"
