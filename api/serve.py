"""Runs the API with uvicorn, settings from AGENTRUN_* variables.

One listener by default (HTTPS with --tls-cert/--tls-key). With a webhook port, two: the API on
plain HTTP (a cluster terminates TLS at its Ingress) and the admission webhook alone on HTTPS with
the certificate the kube-apiserver trusts (and, with --webhook-client-ca, only for clients presenting a
certificate that CA signed: the kube-apiserver's). Each listener answers only its own paths, so the
token-free admission route is never reachable on the API's port and the API is never reachable
through the webhook's Service.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from typing import Any

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentrunner.otel import ExportConfigError
from models import telemetry
from models.settings import SettingsError

from .main import create_app
from .settings import ApiSettings

ADMISSION = "/admission/"
PROBES = ("/healthz", "/readyz")


class OnlyPaths:
    """An ASGI app that passes requests for some paths to `app` and answers 404 to the rest."""

    def __init__(self, app: ASGIApp, *, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> None:
        self.app, self.allow, self.deny = app, allow, deny

    def permits(self, path: str) -> bool:
        if any(path.startswith(p) for p in self.deny):
            return False
        return not self.allow or any(path == p or path.startswith(p) for p in self.allow)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.permits(scope["path"]):
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)


# Open event streams and log follows (the console's) never end by themselves: on shutdown uvicorn waits this long
# for them, then closes them (their browsers connect again to the next process).
GRACEFUL_SHUTDOWN_SECONDS = 3


def proxies(settings: ApiSettings) -> dict[str, Any]:
    """X-Forwarded-For is believed only from the proxies named (failed credentials are throttled per client address:
    from anyone else it would let a client pick a fresh address per attempt). uvicorn's own default believes
    127.0.0.1, which on a shared host is anyone."""
    if not settings.forwarded_allow_ips:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": settings.forwarded_allow_ips}


def servers(settings: ApiSettings, *, host: str, port: int) -> list[uvicorn.Server]:
    app = create_app(settings)
    tls: dict[str, Any] = {"ssl_certfile": settings.tls_cert_file or None, "ssl_keyfile": settings.tls_key_file or None}
    if not settings.webhook_port:
        return [uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                              timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS, **tls,
                                              **proxies(settings)))]
    api = uvicorn.Config(OnlyPaths(app, deny=(ADMISSION,)), host=host, port=port, log_level="warning",
                         timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS, **proxies(settings))
    # The app's lifespan (clients to Kubernetes and Temporal) runs once, on the API's listener; the webhook's
    # listener serves the same app object and so the same state.
    if settings.webhook_client_ca_file:
        tls |= {"ssl_ca_certs": settings.webhook_client_ca_file, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    webhook = uvicorn.Config(OnlyPaths(app, allow=(ADMISSION, *PROBES)), host=host, port=settings.webhook_port,
                             log_level="warning", lifespan="off", **tls)
    return [uvicorn.Server(api), uvicorn.Server(webhook)]


async def _serve(all_servers: list[uvicorn.Server]) -> None:
    main, *rest = all_servers
    task = asyncio.create_task(main.serve())
    # The webhook listener starts once the lifespan has opened the clients it shares (uvicorn offers a flag for
    # that, no event to wait on).
    while not main.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    if task.done():
        await task
        return
    others = [asyncio.create_task(s.serve()) for s in rest]
    done, _ = await asyncio.wait([task, *others], return_when=asyncio.FIRST_COMPLETED)
    for s in all_servers:
        s.should_exit = True
    await asyncio.gather(task, *others, return_exceptions=True)
    for t in done:
        t.result()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="agentrun-api")
    p.add_argument("--insecure", action="store_true", help="serve without tokens (every caller is 'anonymous')")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (chain); needs --tls-key")
    p.add_argument("--tls-key", help="the PEM private key of --tls-cert")
    p.add_argument("--webhook-port", type=int,
                   help="serve the admission webhook alone on this port with the TLS certificate, and the API on "
                        "plain HTTP (AGENTRUN_WEBHOOK_PORT)")
    p.add_argument("--webhook-client-ca",
                   help="require a client certificate signed by this PEM CA on the webhook's listener (the "
                        "kube-apiserver's; AGENTRUN_WEBHOOK_CLIENT_CA_FILE)")
    args = p.parse_args(argv)
    settings = ApiSettings()
    if args.insecure:
        settings.insecure = True
    settings.tls_cert_file = args.tls_cert or settings.tls_cert_file
    settings.tls_key_file = args.tls_key or settings.tls_key_file
    settings.webhook_port = args.webhook_port or settings.webhook_port
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        p.error("TLS needs both a certificate and a key (--tls-cert and --tls-key, or AGENTRUN_TLS_CERT_FILE and "
                "AGENTRUN_TLS_KEY_FILE)")
    settings.webhook_client_ca_file = args.webhook_client_ca or settings.webhook_client_ca_file
    if settings.webhook_client_ca_file and not settings.webhook_port:
        p.error("a webhook client CA (--webhook-client-ca, AGENTRUN_WEBHOOK_CLIENT_CA_FILE) needs the webhook's own "
                "listener (--webhook-port): the API's listener does not ask its clients for certificates")
    if settings.webhook_port and not settings.tls_cert_file:
        p.error("the admission webhook's listener needs a TLS certificate (--tls-cert/--tls-key): the kube-apiserver "
                "calls webhooks over HTTPS only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        spans = telemetry.setup("api")  # before the app: its OTEL_* variables are checked at start
        listeners = servers(settings, host=args.host or settings.host, port=args.port or settings.port)
    except (SettingsError, ExportConfigError) as e:  # e.g. a key file it cannot use: the operator's, no traceback
        raise SystemExit(f"agentrun api: {e}") from e
    try:
        asyncio.run(_serve(listeners))
    finally:
        spans.shutdown()
    return 0
