"""``fetch_url{url, maxChars?, headers?}`` (Sympozium's tool and limits), guarded against server-side request forgery.

A model steered by what it reads (prompt injection) must not turn the agent into a pivot into the cluster: the
node's metadata service, the Kubernetes API, other pods. So every address a name resolves to is checked before
connecting — loopback, link-local (cloud metadata), private, shared (CGNAT), unspecified, multicast, reserved and
the IPv6 forms that embed one of those are refused — and the connection goes to the very address that was
checked (the URL's host travels as the Host header and TLS server name), so a DNS answer that changes between the
check and the connect (rebinding) cannot slip in. Redirects are followed by hand, each hop checked the same way.

An operator who needs cluster-internal hosts allows them explicitly: ``FETCH_URL_ALLOW`` is a comma list of host
names (``docs.internal``, ``*.svc.cluster.local``) and CIDRs (``10.0.0.0/8``); Sympozium's
``SYMPOZIUM_FETCH_URL_ALLOW_PRIVATE=true`` allows every address.
"""

from __future__ import annotations

import asyncio
import html.parser
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from agentrunner.tools import Tool, ToolError, arg_int, arg_str, schema

DEFAULT_MAX_CHARS = 50_000
MAX_CHARS = 100_000
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 30.0
USER_AGENT = "agentrun-agent (fetch_url)"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]
NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class AllowList:
    hosts: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()
    everything: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AllowList:
        hosts, networks = [], []
        for item in (env.get("FETCH_URL_ALLOW") or "").split(","):
            item = item.strip().lower()
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.append(item)
        everything = (env.get("SYMPOZIUM_FETCH_URL_ALLOW_PRIVATE") or "").strip().lower() == "true"
        return cls(tuple(hosts), tuple(networks), everything)

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(host == h or (h.startswith("*.") and host.endswith(h[1:])) for h in self.hosts)

    def address_allowed(self, ip: IPAddress) -> bool:
        return any(ip in n for n in self.networks)


def refusal(ip: IPAddress) -> str | None:
    """Why fetch_url may not connect to `ip` (None: a public address)."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = refusal(embedded)
            return f"{inner} (inside {ip})" if inner else None
    for name, test in (("a loopback", ip.is_loopback), ("an unspecified", ip.is_unspecified),
                       ("a link-local (cloud metadata)", ip.is_link_local), ("a multicast", ip.is_multicast),
                       ("a private", ip.is_private), ("a reserved", ip.is_reserved)):
        if test:
            return f"{ip} is {name} address"
    if not ip.is_global:
        return f"{ip} is not a public address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass
class Fetcher:
    allow: AllowList = field(default_factory=AllowList)
    resolver: Resolver = system_resolver

    async def decide(self, url: str) -> tuple[str, int, str]:
        """The checked (host, port, address) to connect to for `url`; raises ToolError naming the refusal."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ToolError("url must start with http:// or https://")
        host = parts.hostname
        if not host:
            raise ToolError(f"url {url!r} has no host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        try:
            addresses = [str(literal)] if literal else await self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise ToolError(f"cannot resolve {host}: {exc}") from None
        if not addresses:
            raise ToolError(f"{host} has no address")
        if self.allow.everything or self.allow.host_allowed(host):
            return host, port, addresses[0]
        for text in addresses:
            ip = ipaddress.ip_address(text)
            why = None if self.allow.address_allowed(ip) else refusal(ip)
            if why:
                via = "" if literal else f"{host} resolves to {text}: "
                raise ToolError(f"refused to fetch {url}: {via}{why}; an operator can allow it with FETCH_URL_ALLOW")
        return host, port, addresses[0]

    async def fetch(self, url: str, headers: dict[str, str], max_chars: int) -> str:
        import httpx2 as httpx  # only runs that fetch pay for it (the HTTP client the model libraries bring)

        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False, trust_env=False) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                host, port, address = await self.decide(url)
                parts = urlsplit(url)
                netloc = f"[{address}]" if ":" in address else address
                target = parts._replace(netloc=f"{netloc}:{port}").geturl()
                sent = {"User-Agent": USER_AGENT, "Accept": "text/html,application/json,text/plain,*/*",
                        **headers, "Host": parts.netloc.rsplit("@", 1)[-1]}
                try:
                    async with client.stream("GET", target, headers=sent,
                                             extensions={"sni_hostname": host}) as response:
                        if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                            url = urljoin(url, response.headers["location"])
                            continue
                        body = bytearray()
                        async for chunk in response.aiter_bytes():
                            body += chunk
                            if len(body) >= MAX_BODY_BYTES:
                                break
                        status, ctype = response.status_code, response.headers.get("content-type", "")
                except httpx.HTTPError as exc:
                    raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
                text = bytes(body).decode("utf-8", errors="replace")
                if status >= 400:
                    return f"HTTP {status}\n{text[:2000]}"
                if "html" in ctype or (not ctype.startswith("text/") and text.lstrip().startswith("<")):
                    text = html_to_text(text)
                if len(text) > max_chars:
                    text = text[:max_chars] + f"\n\n... (truncated at {max_chars} chars of {len(text)})"
                return text
        raise ToolError(f"too many redirects (more than {MAX_REDIRECTS})")


class _Text(html.parser.HTMLParser):
    SKIP = {"script", "style", "head", "noscript", "svg"}
    BLOCK = {"p", "div", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "blockquote", "pre",
             "section", "article", "header", "footer", "nav", "main", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        elif tag in self.BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip and data.strip():
            self.out.append(data.strip() + " ")


def html_to_text(text: str) -> str:
    parser = _Text()
    parser.feed(text)
    joined = "".join(parser.out)
    text = re.sub(r" *\n *", "\n", re.sub(r"[ \t]+", " ", joined))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def fetch_tool(fetcher: Fetcher) -> Tool:
    async def run(args: dict[str, Any]) -> str:
        url = arg_str(args, "url").strip()
        max_chars = arg_int(args, "maxChars", DEFAULT_MAX_CHARS) or DEFAULT_MAX_CHARS
        max_chars = max(1, min(max_chars, MAX_CHARS))
        headers = args.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ToolError("argument 'headers' must be an object of strings")
        headers = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        return await fetcher.fetch(url, headers, max_chars)

    return Tool("fetch_url", "Fetch a web page or API endpoint over HTTP(S) and return its content as text (HTML "
                             f"tags stripped, JSON as is; {DEFAULT_MAX_CHARS} characters by default, at most "
                             f"{MAX_CHARS}). Private, loopback and metadata addresses are refused.",
                schema({"url": {"type": "string", "description": "http:// or https:// URL."},
                        "maxChars": {"type": "integer", "description": f"At most {MAX_CHARS}."},
                        "headers": {"type": "object", "description": "Extra request headers."}}, ["url"]),
                run, read_only=True)


__all__ = ["AllowList", "Fetcher", "fetch_tool", "refusal"]
