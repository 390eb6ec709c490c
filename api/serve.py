"""Runs the API with uvicorn, settings from AGENTRUN_* variables; HTTPS with --tls-cert/--tls-key."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from .main import create_app
from .settings import ApiSettings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="agentrun-api")
    p.add_argument("--insecure", action="store_true", help="serve without tokens (every caller is 'anonymous')")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (chain); needs --tls-key")
    p.add_argument("--tls-key", help="the PEM private key of --tls-cert")
    args = p.parse_args(argv)
    settings = ApiSettings()
    if args.insecure:
        settings.insecure = True
    settings.tls_cert_file = args.tls_cert or settings.tls_cert_file
    settings.tls_key_file = args.tls_key or settings.tls_key_file
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        p.error("TLS needs both a certificate and a key (--tls-cert and --tls-key, or AGENTRUN_TLS_CERT_FILE and "
                "AGENTRUN_TLS_KEY_FILE)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=args.host or settings.host, port=args.port or settings.port, log_level="warning",
                ssl_certfile=settings.tls_cert_file or None, ssl_keyfile=settings.tls_key_file or None)
    return 0
