"""The built-in file tools and fetch_url, in process: their limits, the /workspace confinement and the SSRF rules
(tested with a stub resolver, or by checking the decision before connecting: nothing leaves 127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentrunner.tools import ToolError
from agentrunner.tools.fetch import AllowList, Fetcher, fetch_tool, html_to_text
from agentrunner.tools.files import READ_MAX_BYTES, Roots, edit_file, list_directory, read_file, write_file


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "skills").mkdir()
    (tmp_path / "outside.txt").write_text("secret outside")
    return Roots(tmp_path / "workspace", tmp_path / "skills")


def call(fn: Any, args: dict[str, Any], roots: Roots) -> str:
    try:
        result: str = asyncio.run(fn(args, roots))
        return result
    except ToolError as exc:
        return f"ERROR {exc}"


def test_write_edit_read_round_trip(roots: Roots) -> None:
    assert call(write_file, {"path": "a/b/notes.md", "content": "one\ntwo\nthree\n"}, roots) == \
        "Successfully wrote 14 bytes to /workspace/a/b/notes.md"
    assert call(edit_file, {"path": "/workspace/a/b/notes.md", "edits": [
        {"old_string": "two", "new_string": "TWO"}, {"old_string": "TWO\nthree", "new_string": "2\n3"}]},
        roots).startswith("Edited /workspace/a/b/notes.md (2 change(s))")
    assert call(read_file, {"path": "a/b/notes.md"}, roots) == "one\n2\n3\n"
    assert call(list_directory, {"path": "a/b"}, roots) == "file          8  notes.md"  # Sympozium's %-6s %8d
    assert oct((roots.workspace / "a/b/notes.md").stat().st_mode & 0o777) == oct(0o664)


def test_an_edit_that_does_not_match_once_changes_nothing(roots: Roots) -> None:
    (roots.workspace / "f").write_text("x x\n")
    assert call(edit_file, {"path": "f", "edits": [{"old_string": "x", "new_string": "y"}]}, roots) == \
        "ERROR old_string matches 2 times (lines 1, 1); add context to pick one, or set replace_all; the file is unchanged"
    assert call(edit_file, {"path": "f", "edits": [{"old_string": "x x", "new_string": "z"},
                                                   {"old_string": "nope", "new_string": "q"}]}, roots).startswith(
        "ERROR edits[1]: old_string not found in the file (an earlier edit may have changed it)")
    assert (roots.workspace / "f").read_text() == "x x\n"
    call(edit_file, {"path": "f", "edits": [{"old_string": "x", "new_string": "y", "replace_all": True}]}, roots)
    assert (roots.workspace / "f").read_text() == "y y\n"


def test_read_file_answers_at_most_8kb_with_a_continuation_hint(roots: Roots) -> None:
    (roots.workspace / "big").write_text("".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(1, 1001)))
    first = call(read_file, {"path": "big"}, roots)
    assert len(first.encode()) <= READ_MAX_BYTES + 100
    assert first.endswith("(truncated at line 78 of 1000; continue with offset=79)")  # 78 lines of 102 bytes
    page = call(read_file, {"path": "big", "offset": 79, "limit": 2}, roots)
    assert page.splitlines()[0].startswith("line 00079") and page.endswith("continue with offset=81)")


@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd", "/workspace/../x",
                                  "/skillsx/a"])
def test_dot_dot_and_absolute_paths_elsewhere_are_refused(roots: Roots, path: str) -> None:
    assert call(read_file, {"path": path}, roots).startswith("ERROR refused: ")


def test_symlinks_that_leave_the_workspace_are_refused_and_those_inside_followed(roots: Roots, tmp_path: Path) -> None:
    ws = roots.workspace
    (ws / "inside.txt").write_text("inside")
    os.symlink(tmp_path / "outside.txt", ws / "abs-out")
    os.symlink("../outside.txt", ws / "rel-out")
    os.symlink(tmp_path, ws / "dir-out")
    os.symlink("inside.txt", ws / "rel-in")
    os.symlink("/workspace/inside.txt", ws / "abs-in")  # as the container sees it
    for name in ("abs-out", "rel-out", "dir-out/outside.txt"):
        assert call(read_file, {"path": name}, roots).startswith("ERROR refused: "), name
    assert call(write_file, {"path": "dir-out/planted", "content": "x"}, roots).startswith("ERROR refused: ")
    assert call(write_file, {"path": "rel-out", "content": "overwritten"}, roots).startswith("ERROR refused: ")
    assert (tmp_path / "outside.txt").read_text() == "secret outside"
    assert not (tmp_path / "planted").exists()
    assert call(read_file, {"path": "rel-in"}, roots) == call(read_file, {"path": "abs-in"}, roots) == "inside"


def test_a_directory_swapped_for_a_symlink_mid_walk_cannot_lead_out(roots: Roots, tmp_path: Path) -> None:
    """The walk opens each component with O_NOFOLLOW from the one before, so a directory replaced by a symlink to
    the outside (the classic check-then-use race) is met as a symlink and refused, never followed by the kernel."""
    ws = roots.workspace
    (ws / "d").mkdir()
    (ws / "d" / "f").write_text("safe")
    assert call(read_file, {"path": "d/f"}, roots) == "safe"
    os.rename(ws / "d", ws / "d-old")
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "f").write_text("outside")
    os.symlink(tmp_path / "evil", ws / "d")
    assert call(read_file, {"path": "d/f"}, roots).startswith("ERROR refused: a symlink leads out of /workspace")


def test_skills_are_readable_and_read_only(roots: Roots) -> None:
    (roots.skills / "k8s.md").write_text("use kubectl")
    assert call(read_file, {"path": "/skills/k8s.md"}, roots) == "use kubectl"
    assert call(write_file, {"path": "/skills/k8s.md", "content": "x"}, roots) == "ERROR refused: /skills is read-only"
    assert call(edit_file, {"path": "/skills/k8s.md", "edits": [{"old_string": "use", "new_string": "x"}]},
                roots) == "ERROR refused: /skills is read-only"


# -- fetch_url --------------------------------------------------------------------------------------------------

STUB = {"metadata.internal": ["169.254.169.254"], "db.internal": ["10.0.0.5"], "public.example": ["93.184.216.34"],
        "rebind.example": ["93.184.216.34", "127.0.0.1"], "v6.example": ["::ffff:10.1.1.1"],
        "local.test": ["127.0.0.1"]}


async def stub_resolver(host: str, port: int) -> list[str]:
    return STUB[host]


@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://[::1]:8080/", "::1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "is a link-local (cloud metadata) address"),
    ("http://metadata.internal/", "metadata.internal resolves to 169.254.169.254: 169.254.169.254 is a link-local"),
    ("http://db.internal:5432/", "db.internal resolves to 10.0.0.5: 10.0.0.5 is a private address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
    ("http://rebind.example/", "rebind.example resolves to 127.0.0.1: 127.0.0.1 is a loopback address"),
    ("http://v6.example/", "10.1.1.1 is a private address (inside ::ffff:a01:101)"),
    ("http://224.0.0.251/", "is a multicast address"),
])
def test_fetch_refuses_internal_addresses_before_connecting(url: str, why: str) -> None:
    with pytest.raises(ToolError, match="refused to fetch") as e:
        asyncio.run(Fetcher(resolver=stub_resolver).decide(url))
    assert why in str(e.value) and "FETCH_URL_ALLOW" in str(e.value)


def test_fetch_connects_to_the_address_it_checked() -> None:
    assert asyncio.run(Fetcher(resolver=stub_resolver).decide("https://public.example/x")) == \
        ("public.example", 443, "93.184.216.34")


def test_the_allow_list_admits_named_hosts_and_cidrs() -> None:
    allow = AllowList.from_env({"FETCH_URL_ALLOW": "db.internal, 169.254.0.0/16"})
    f = Fetcher(allow, stub_resolver)
    assert asyncio.run(f.decide("http://db.internal/"))[2] == "10.0.0.5"
    assert asyncio.run(f.decide("http://metadata.internal/"))[2] == "169.254.169.254"
    with pytest.raises(ToolError):
        asyncio.run(f.decide("http://127.0.0.1/"))


@pytest.fixture
def local_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/redirect-internal":
                self.send_response(302)
                self.send_header("Location", "http://metadata.internal/latest/meta-data/")
                self.end_headers()
                return
            body = (b"<html><head><title>t</title><script>x()</script></head><body><h1>Nodes</h1><p>three "
                    b"nodes &amp; ready</p></body></html>")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://local.test:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_of_an_allowed_local_server_returns_text_and_a_redirect_to_metadata_is_refused(local_server: str) -> None:
    tool = fetch_tool(Fetcher(AllowList.from_env({"FETCH_URL_ALLOW": "127.0.0.0/8"}), stub_resolver))
    assert asyncio.run(tool.run({"url": local_server + "/page"})) == "Nodes\n\nthree nodes & ready"
    with pytest.raises(ToolError, match=r"metadata\.internal resolves to 169\.254\.169\.254"):
        asyncio.run(tool.run({"url": local_server + "/redirect-internal"}))
    assert asyncio.run(tool.run({"url": local_server + "/page", "maxChars": 5})).startswith("Nodes\n\n... (truncated")


def test_html_becomes_readable_text() -> None:
    assert html_to_text("<div>a<script>no</script><style>no</style></div><p>b&lt;c</p>") == "a\n\nb<c"
