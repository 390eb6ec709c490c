"""A gRPC proxy in front of a Temporal dev server, for tests of what real deployments put in between.

It forwards every unary call byte for byte, and can: terminate TLS (optionally requiring a client
certificate: mTLS), record the `authorization` header each call carried (API keys), and refuse chosen
methods with a status, the way Temporal Cloud refuses `AddSearchAttributes`. Temporal's client API is
unary throughout (long polls included), which is all this needs to forward.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

ADD_SEARCH_ATTRIBUTES = "/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes"


@dataclass
class ProxyTLS:
    cert: Path
    key: Path
    # PEM CA that client certificates must chain to; None: no client certificate asked for.
    client_ca: Path | None = None


@dataclass
class Proxy:
    port: int
    seen_authorization: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class _Forward(grpc.GenericRpcHandler):
    def __init__(self, upstream: grpc.aio.Channel, proxy: Proxy, refuse: dict[str, grpc.StatusCode]) -> None:
        self.upstream, self.proxy, self.refuse = upstream, proxy, refuse

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = details.method
        call = self.upstream.unary_unary(method, request_serializer=None, response_deserializer=None)
        proxy, refuse = self.proxy, self.refuse

        async def handle(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            md = [(k, v) for k, v in context.invocation_metadata() or () if not k.startswith(":")]
            proxy.methods.append(method)
            proxy.seen_authorization += [str(v) for k, v in md if k == "authorization"]
            if method in refuse:
                await context.abort(refuse[method], "refused by the test proxy (as Temporal Cloud does)")
            forwarded = [(k, v) for k, v in md if k not in ("authorization", "user-agent")]
            response: bytes = await call(request, metadata=forwarded, timeout=context.time_remaining())
            return response

        return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=None, response_serializer=None)


@contextmanager
def temporal_proxy(upstream: str, *, tls: ProxyTLS | None = None,
                   refuse: dict[str, grpc.StatusCode] | None = None) -> Iterator[Proxy]:
    """Runs the proxy on its own event loop thread on 127.0.0.1; yields it with what it saw."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        channel = grpc.aio.insecure_channel(upstream)
        server = grpc.aio.server()
        proxy = Proxy(0)
        server.add_generic_rpc_handlers((_Forward(channel, proxy, refuse or {}),))
        if tls is None:
            proxy.port = server.add_insecure_port("127.0.0.1:0")
        else:
            creds = grpc.ssl_server_credentials(
                [(tls.key.read_bytes(), tls.cert.read_bytes())],
                root_certificates=tls.client_ca.read_bytes() if tls.client_ca else None,
                require_client_auth=tls.client_ca is not None)
            proxy.port = server.add_secure_port("127.0.0.1:0", creds)
        await server.start()
        holder.update(proxy=proxy, server=server, stop=asyncio.Event())
        started.set()
        await holder["stop"].wait()
        await server.stop(grace=None)
        await channel.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not started.wait(timeout=30):
        raise TimeoutError("the gRPC proxy did not start")
    try:
        yield holder["proxy"]
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(timeout=30)


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(directory: Path, *, server_name: str = "temporal.test") -> Pki:
    """A CA, a server certificate for `server_name` only (not 127.0.0.1, so TLS must be told the name) and a
    client certificate, all as PEM files."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(path: Path, key: ec.EllipticCurvePrivateKey | None, cert: x509.Certificate | None) -> Path:
        if key is not None:
            path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        if cert is not None:
            path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("test-ca")).issuer_name(name("test-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName]) -> tuple[Any, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
             .not_valid_after(now + dt.timedelta(days=1))
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, b.sign(ca_key, hashes.SHA256())

    skey, scert = leaf(server_name, ExtendedKeyUsageOID.SERVER_AUTH, [x509.DNSName(server_name)])
    ckey, ccert = leaf("agentrun-worker", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Pki(ca=write(directory / "ca.crt", None, ca), server_cert=write(directory / "server.crt", None, scert),
               server_key=write(directory / "server.key", skey, None),
               client_cert=write(directory / "client.crt", None, ccert),
               client_key=write(directory / "client.key", ckey, None))
