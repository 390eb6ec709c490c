"""The embedded stack's Temporal dev server when a port it was to bind is taken (cli/stack.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cli.stack import PortTaken, TemporalDevServer


def test_a_dev_server_whose_given_port_is_taken_fails_at_once_naming_the_port(tmp_path: Path) -> None:
    """A port the caller chose is not picked again: the start fails, saying which port, instead of timing out. (Ports
    the stack picked itself are picked again on this error: a port free when picked can be taken before the server
    binds it, which is what failed a CI run.)"""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        server = TemporalDevServer(tmp_path / "temporal", port=port, headless=True, search_attributes=False)
        with pytest.raises(PortTaken, match=f"a port was taken \\({port} "):
            server.start(timeout=60)
        assert server.port == port
        assert server.proc is not None and server.proc.poll() is not None


def test_a_dev_server_on_picked_ports_serves(tmp_path: Path) -> None:
    server = TemporalDevServer(tmp_path / "temporal", headless=True, search_attributes=False).start(timeout=60)
    try:
        assert server.port and server.proc is not None and server.proc.poll() is None
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
    finally:
        server.stop()
