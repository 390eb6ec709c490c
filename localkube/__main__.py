"""`python -m localkube serve --state-dir DIR [--port 0] [--persist]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import yaml

from .main import LocalKube, Options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localkube", description="A local Kubernetes API server and kubelet.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the API server, controllers and kubelet")
    serve.add_argument("--state-dir", type=Path, required=True)
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port (written to the kubeconfig)")
    serve.add_argument("--persist", action="store_true", help="keep objects in SQLite across restarts")
    serve.add_argument("--max-pods", type=int, default=16, help="pods running at once; others wait Pending")
    serve.add_argument("--job-backoff-seconds", type=float, default=10.0,
                       help="base of the exponential delay before a failed Job pod is replaced")
    serve.add_argument("--image-map", type=Path,
                       help="YAML mapping image name -> entrypoint argv, for containers without a command")
    serve.add_argument("--audit-log", type=Path,
                       help="append one JSON line per request (user, userAgent, method, path, code) to this file")
    serve.add_argument("--admission-control-config-file", type=Path,
                       help="an AdmissionConfiguration whose webhook plug-ins' kubeconfig gives the client certificates "
                            "(or tokens) admission webhooks are called with, as kube-apiserver's flag")
    args = parser.parse_args(argv)

    state_dir: Path = args.state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=state_dir / "localkube.log",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    image_map = {}
    if args.image_map:
        loaded = yaml.safe_load(args.image_map.read_text()) or {}
        if not isinstance(loaded, dict) or not all(isinstance(v, list) for v in loaded.values()):
            print("--image-map must map image names to argv lists", file=sys.stderr)
            return 2
        image_map = {str(k): [str(x) for x in v] for k, v in loaded.items()}
    lk = LocalKube(Options(state_dir=state_dir, port=args.port, persist=args.persist, max_pods=args.max_pods,
                           job_backoff_seconds=args.job_backoff_seconds, image_map=image_map,
                           audit_log=args.audit_log.resolve() if args.audit_log else None,
                           admission_config=args.admission_control_config_file.resolve()
                           if args.admission_control_config_file else None))

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, lk.request_stop)
        task = asyncio.create_task(lk.serve())
        await lk.ready.wait()
        print(json.dumps({"kubeconfig": str(lk.kubeconfig), "server": f"https://127.0.0.1:{lk.port}"}), flush=True)
        await task

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
