"""localkube throughput and Job latency on this machine; prints figures, asserts nothing.

    .venv/bin/python -m bench.localkube [--requests 2000] [--concurrency 8] [--jobs 40]

The server runs as its own process (`python -m localkube serve`), the client drives it over
HTTPS with keep-alive connections, so the figures are the server's, not the client's GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from localkube.testing import ssl_context


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def _rate(name: str, total: int, concurrency: int, make: Any) -> None:
    """Issue `total` requests from `concurrency` workers; `make(i)` performs request i."""
    counter = iter(range(total))
    errors = 0

    async def worker() -> None:
        nonlocal errors
        for i in counter:
            r = await make(i)
            if r.status_code >= 400:
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    print(f"{name:<14} {total / elapsed:8.0f} req/s   ({total} requests, {concurrency} connections, {errors} errors)")


async def _requests(base: str, token: str, ctx: Any, total: int, concurrency: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, headers=headers, verify=ctx, limits=limits, timeout=60) as c:
        ns = "/api/v1/namespaces/default/configmaps"

        async def create(i: int) -> httpx.Response:
            return await c.post(ns, json={"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": f"cm-{i}", "labels": {"bench": "yes"}},
                                          "data": {"k": "v" * 64}})

        async def get(i: int) -> httpx.Response:
            return await c.get(f"{ns}/cm-{i % total}")

        async def patch(i: int) -> httpx.Response:
            return await c.patch(f"{ns}/cm-{i % total}", content=json.dumps({"data": {"p": str(i)}}),
                                 headers={"Content-Type": "application/merge-patch+json"})

        async def list_(i: int) -> httpx.Response:
            return await c.get(ns, params={"labelSelector": "bench=yes", "limit": "100"})

        await _rate("create", total, concurrency, create)
        await _rate("get", total, concurrency, get)
        await _rate("merge-patch", total, concurrency, patch)
        await _rate("list (100)", max(total // 10, 50), concurrency, list_)


def _job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"bench-{i}"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox:1.36", "command": ["true"]}]}}},
    }


async def _job_latency(base: str, token: str, ctx: Any, jobs: int, concurrency: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    running: list[float] = []
    complete: list[float] = []
    async with httpx.AsyncClient(base_url=base, headers=headers, verify=ctx, timeout=120) as c:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await c.post("/apis/batch/v1/namespaces/default/jobs", json=_job(i))
                r.raise_for_status()
                rv = r.json()["metadata"]["resourceVersion"]
                seen_running = False
                params = {"watch": "1", "resourceVersion": rv, "labelSelector": f"job-name=bench-{i}"}
                async with c.stream("GET", "/api/v1/namespaces/default/pods", params=params) as pods:
                    async for line in pods.aiter_lines():
                        pod = json.loads(line)["object"]
                        phase = (pod.get("status") or {}).get("phase")
                        if phase == "Running" and not seen_running:
                            seen_running = True
                            running.append(time.perf_counter() - t0)
                        if phase in ("Succeeded", "Failed"):
                            if not seen_running:
                                running.append(time.perf_counter() - t0)
                            break
                params = {"watch": "1", "fieldSelector": f"metadata.name=bench-{i}"}
                async with c.stream("GET", "/apis/batch/v1/namespaces/default/jobs", params=params) as js:
                    async for line in js.aiter_lines():
                        conds = (json.loads(line)["object"].get("status") or {}).get("conditions") or []
                        if any(x["type"] in ("Complete", "Failed") and x["status"] == "True" for x in conds):
                            complete.append(time.perf_counter() - t0)
                            break

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        elapsed = time.perf_counter() - start
    ms = [x * 1000 for x in running]
    done = [x * 1000 for x in complete]
    print(f"job created -> pod Running   p50 {statistics.median(ms):6.0f} ms   p99 {_percentile(ms, 99):6.0f} ms")
    print(f"job created -> Complete      p50 {statistics.median(done):6.0f} ms   p99 {_percentile(done, 99):6.0f} ms"
          f"   ({jobs} jobs, {concurrency} at a time, {jobs / elapsed:.1f} jobs/s)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--job-concurrency", type=int, default=4)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        state = Path(d)
        proc = subprocess.Popen([sys.executable, "-m", "localkube", "serve", "--state-dir", str(state)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            info = json.loads(proc.stdout.readline())
            kubeconfig = Path(info["kubeconfig"])
            cfg = yaml.safe_load(kubeconfig.read_text())
            base = cfg["clusters"][0]["cluster"]["server"]
            token = cfg["users"][0]["user"]["token"]
            ctx = ssl_context(kubeconfig)
            print(f"localkube at {base}; server in its own process; client: httpx over HTTPS keep-alive")
            asyncio.run(_requests(base, token, ctx, args.requests, args.concurrency))
            asyncio.run(_job_latency(base, token, ctx, args.jobs, args.job_concurrency))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
