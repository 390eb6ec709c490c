"""Runs the API with uvicorn, settings from AGENTRUN_* variables."""

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
    args = p.parse_args(argv)
    settings = ApiSettings()
    if args.insecure:
        settings.insecure = True
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=args.host or settings.host, port=args.port or settings.port, log_level="warning")
    return 0
