"""The embedded stack's Temporal UI, with the API's codec on the UI's own origin.

The Temporal UI decodes payloads by calling a codec server from the browser. The API's codec answers only a signed-in
operator, and a browser sends its sign-in (the console's session cookie) with a cross-origin call only when the UI is
told to include credentials, which the dev server's UI cannot be told (`temporal server start-dev` has
`--ui-codec-endpoint` and nothing for credentials; it reads no UI config file). So `agentrun up` puts this small
reverse proxy in front of the dev server's UI: the browser opens the UI here, and the UI's codec endpoint is this same
origin's `/codec`, which is passed to the API. A same-origin call carries the browser's cookies, so an operator
signed in to the console (the same host: cookies are not scoped to ports) sees the payloads decrypted, with no
settings to change; anyone else gets the API's 401 and sees ciphertext, as before.

Everything else is passed to the dev server's UI unchanged, streamed both ways. It listens on 127.0.0.1 only.

    python -m cli.uifront --port 8233 --ui http://127.0.0.1:PORT --api http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import httpx
import uvicorn

CODEC = "/codec"
# Headers that belong to one connection, not to the message (RFC 9110 §7.6.1), and the ones httpx sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length"})
MAX_BODY = 16 * 1024 * 1024  # the UI's requests are small JSON; a codec request carries a history's payloads
UPSTREAM_TIMEOUT = httpx.Timeout(60.0, read=None)  # the UI server streams some answers (long polls)

log = logging.getLogger("agentrun.uifront")


class Front:
    """An ASGI app: `/codec/...` to the API, the rest to the dev server's UI."""

    def __init__(self, *, ui: str, api: str) -> None:
        self.ui, self.api = ui.rstrip("/"), api.rstrip("/")
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.client = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, follow_redirects=False)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self.client is not None:
                        await self.client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http" or self.client is None:
            return
        path: str = scope["path"]
        upstream = self.api if path == CODEC or path.startswith(CODEC + "/") else self.ui
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                await _answer(send, 413, b"request too large")
                return
            if not message.get("more_body"):
                break
        target = upstream + scope.get("raw_path", path.encode()).decode()
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode()
        headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in HOP_BY_HOP]
        request = self.client.build_request(scope["method"], target, headers=headers, content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as e:
            log.warning("%s %s: %s", scope["method"], target, e)
            await _answer(send, 502, f"the upstream did not answer: {e}".encode())
            return
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1"))
                                    for k, v in response.headers.multi_items() if k.lower() not in HOP_BY_HOP]})
            async for chunk in response.aiter_raw():  # as sent (still compressed where it was)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


async def _answer(send: Any, status: int, text: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": text})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.uifront", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="where the browser opens the UI (127.0.0.1)")
    parser.add_argument("--ui", required=True, help="the dev server's UI, e.g. http://127.0.0.1:8233")
    parser.add_argument("--api", required=True, help="the agentrun API, whose /codec this origin's /codec is")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(Front(ui=args.ui, api=args.api), host="127.0.0.1", port=args.port, log_level="warning",
                lifespan="on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
