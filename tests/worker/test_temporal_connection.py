"""Any Temporal: search attributes registered by the worker or `agentrun temporal setup`, a clear stop where the
server refuses (Temporal Cloud), and TLS, mTLS and API keys on the way to the server.

Everything talks to a real Temporal dev server started without the search attributes; a gRPC proxy in front of
it plays what real deployments put in between (a TLS endpoint asking for client certificates, a server that
refuses AddSearchAttributes)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cli.stack import TemporalDevServer
from models.search_attributes import SEARCH_ATTRIBUTES, ensure_search_attributes
from models.settings import SettingsError, TemporalSettings
from tests.grpc_proxy import ADD_SEARCH_ATTRIBUTES, Pki, ProxyTLS, make_pki, temporal_proxy
from tests.temporal_checks import registered_search_attributes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_temporal(tmp_path: Path) -> Iterator[TemporalDevServer]:
    """A dev server without agentrun's search attributes, like any Temporal namespace before its first worker."""
    server = TemporalDevServer(tmp_path / "temporal", headless=True, search_attributes=False).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_ensure_registers_the_missing_attributes_once(bare_temporal: TemporalDevServer) -> None:
    assert not set(SEARCH_ATTRIBUTES) & registered_search_attributes(bare_temporal.address)

    async def twice() -> tuple[list[str], list[str]]:
        client = await TemporalSettings(address=bare_temporal.address).connect()
        return await ensure_search_attributes(client, "default"), await ensure_search_attributes(client, "default")

    first, second = asyncio.run(twice())
    assert sorted(first) == sorted(SEARCH_ATTRIBUTES)
    assert second == []
    assert set(SEARCH_ATTRIBUTES) <= registered_search_attributes(bare_temporal.address)


def test_two_workers_registering_at_once_both_succeed(bare_temporal: TemporalDevServer) -> None:
    async def race() -> list[list[str]]:
        clients = [await TemporalSettings(address=bare_temporal.address).connect() for _ in range(2)]
        return list(await asyncio.gather(*(ensure_search_attributes(c, "default") for c in clients)))

    results = asyncio.run(race())
    assert set(SEARCH_ATTRIBUTES) <= registered_search_attributes(bare_temporal.address)
    assert all(set(r) <= set(SEARCH_ATTRIBUTES) for r in results)


def test_temporal_setup_reports_what_it_added_then_what_was_present(bare_temporal: TemporalDevServer) -> None:
    first = _cli("temporal", "setup", "--address", bare_temporal.address)
    assert first.returncode == 0, first.stderr
    assert all(f"{name:<18} Keyword  added" in first.stdout for name in SEARCH_ATTRIBUTES), first.stdout
    again = _cli("temporal", "setup", env={"AGENTRUN_TEMPORAL__ADDRESS": bare_temporal.address})
    assert again.returncode == 0, again.stderr
    assert all(f"{name:<18} Keyword  present" in again.stdout for name in SEARCH_ATTRIBUTES), again.stdout


def test_a_refused_registration_stops_the_worker_naming_attributes_and_commands(
        bare_temporal: TemporalDevServer) -> None:
    with temporal_proxy(bare_temporal.address, refuse={ADD_SEARCH_ATTRIBUTES: grpc.StatusCode.PERMISSION_DENIED}) as p:
        env = {"AGENTRUN_TEMPORAL__ADDRESS": p.address, "AGENTRUN_TEMPORAL__TASK_QUEUE": "refused",
               "AGENTRUN_KUBE__KUBECONFIG": "/nonexistent-is-not-read-before-temporal"}
        worker = subprocess.run([sys.executable, "-m", "worker"], cwd=ROOT, capture_output=True, text=True,
                                timeout=120, env={**os.environ, **env})
        setup = _cli("temporal", "setup", env={"AGENTRUN_TEMPORAL__ADDRESS": p.address})
        assert ADD_SEARCH_ATTRIBUTES in p.methods
    for out in (worker, setup):
        assert out.returncode == 1, out.stdout + out.stderr
        assert "Traceback" not in out.stderr
        for name in SEARCH_ATTRIBUTES:
            assert name in out.stderr
            assert f"temporal operator search-attribute create --namespace default --name {name} --type Keyword" \
                in out.stderr
        assert "tcld namespace search-attributes add" in out.stderr
    assert not set(SEARCH_ATTRIBUTES) & registered_search_attributes(bare_temporal.address)


def test_a_temporal_that_cannot_be_reached_stops_worker_and_bridge_with_one_line() -> None:
    import socket
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening, so connections are refused
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        env = {"AGENTRUN_TEMPORAL__ADDRESS": address, "AGENTRUN_KUBE__KUBECONFIG": "/nonexistent-is-not-read-first"}
        outs = [subprocess.run([sys.executable, "-m", proc], cwd=ROOT, capture_output=True, text=True, timeout=120,
                               env={**os.environ, **env}) for proc in ("worker", "bridge")]
    for proc, out in zip(("worker", "bridge"), outs, strict=True):
        assert out.returncode == 1, out.stdout + out.stderr
        assert "Traceback" not in out.stderr, out.stderr
        assert f"agentrun {proc}: cannot reach Temporal at {address} (namespace default): " in out.stderr
        assert "Connection refused" in out.stderr


def test_mtls_with_an_api_key_reaches_the_server_and_sends_the_key(
        bare_temporal: TemporalDevServer, pki: Pki, tmp_path: Path) -> None:
    key = tmp_path / "api-key"
    key.write_text("sk-test-0123456789\n")
    tls = ProxyTLS(cert=pki.server_cert, key=pki.server_key, client_ca=pki.ca)
    with temporal_proxy(bare_temporal.address, tls=tls) as p:
        env = {"AGENTRUN_TEMPORAL__ADDRESS": p.address, "AGENTRUN_TEMPORAL__SERVER_CA_FILE": str(pki.ca),
               "AGENTRUN_TEMPORAL__SERVER_NAME": "temporal.test",
               "AGENTRUN_TEMPORAL__CLIENT_CERT_FILE": str(pki.client_cert),
               "AGENTRUN_TEMPORAL__CLIENT_KEY_FILE": str(pki.client_key),
               "AGENTRUN_TEMPORAL__API_KEY_FILE": str(key)}
        ok = _cli("temporal", "setup", env=env)
        assert ok.returncode == 0, ok.stderr
        assert "Bearer sk-test-0123456789" in p.seen_authorization
        no_client_cert = {k: v for k, v in env.items() if "CLIENT" not in k}
        refused = _cli("temporal", "setup", env=no_client_cert)
    assert refused.returncode == 1
    assert f"cannot reach Temporal at {p.address}" in refused.stderr
    assert set(SEARCH_ATTRIBUTES) <= registered_search_attributes(bare_temporal.address)


def test_tls_checks_the_server_name(bare_temporal: TemporalDevServer, pki: Pki) -> None:
    with temporal_proxy(bare_temporal.address, tls=ProxyTLS(cert=pki.server_cert, key=pki.server_key)) as p:
        base = {"AGENTRUN_TEMPORAL__ADDRESS": p.address, "AGENTRUN_TEMPORAL__SERVER_CA_FILE": str(pki.ca)}
        wrong_name = _cli("temporal", "setup", env=base)  # the certificate is for temporal.test, not 127.0.0.1
        right_name = _cli("temporal", "setup", env={**base, "AGENTRUN_TEMPORAL__SERVER_NAME": "temporal.test"})
    assert wrong_name.returncode == 1
    assert right_name.returncode == 0, right_name.stderr


def test_settings_refuse_half_a_key_pair_and_unreadable_files(tmp_path: Path) -> None:
    # Raised while the settings are read, so pydantic reports it (a ValueError) with the variable names.
    with pytest.raises(ValueError, match="CLIENT_CERT_FILE and AGENTRUN_TEMPORAL__CLIENT_KEY_FILE"):
        TemporalSettings(client_cert_file="/x.crt")
    with pytest.raises(ValueError, match="contradicts"):
        TemporalSettings(tls=False, api_key_file="/k")
    missing = tmp_path / "nope.pem"
    with pytest.raises(SettingsError, match=f"AGENTRUN_TEMPORAL__SERVER_CA_FILE={missing}: cannot read it"):
        TemporalSettings(server_ca_file=str(missing)).tls_config()
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(SettingsError, match="the file is empty"):
        TemporalSettings(api_key_file=str(empty)).api_key()
    assert TemporalSettings().uses_tls is False
    assert TemporalSettings(api_key_file=str(empty)).uses_tls is True
