"""Publishing run events to a real nats-server with JetStream (SPEC §5)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js import JetStreamContext
from nats.js.api import StorageType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.events import EventActivities, RunEvent
from cli.stack import NatsServer, free_port
from models.settings import NatsSettings, SettingsError

pytestmark = pytest.mark.skipif(not NatsServer.available(), reason="nats-server is not installed")

T = TypeVar("T")
DAY = 24 * 3600


def event(seq: int = 1, *, topic: str = "agent.run.phase", workflow_id: str = "agentrun/ns1/run-a",
          data: dict[str, str | int | None] | None = None) -> RunEvent:
    return RunEvent.model_validate({
        "topic": topic, "run_name": "run-a", "namespace": "ns1", "instance_name": "inst-1",
        "workflow_id": workflow_id, "seq": seq, "timestamp": "2025-01-02T03:04:05Z",
        "data": {"phase": "Running"} if data is None else data,
    })


async def eventually(attempt: Callable[[], Awaitable[T]], *, within: float = 20.0, what: str) -> T:
    """Retry `attempt` until it stops raising; fail with the last error after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await attempt()
        except Exception as e:
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {within}s waiting for {what}: {e!r}") from e
        await asyncio.sleep(0.1)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
async def acts(nats_server: NatsServer) -> AsyncIterator[EventActivities]:
    a = EventActivities(nats_server.url)
    yield a
    await a.close()


@pytest.fixture
async def js(nats_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(nats_server.url)
    yield nc.jetstream()
    await nc.close()


async def stored(js: JetStreamContext, stream: str = "sympozium") -> int:
    return int((await js.stream_info(stream)).state.messages)


async def test_an_event_published_twice_is_stored_once(acts: EventActivities, js: JetStreamContext) -> None:
    await acts.publish_event(event(seq=1))
    await acts.publish_event(event(seq=1))
    assert await stored(js) == 1
    await acts.publish_event(event(seq=2))
    assert await stored(js) == 2


async def test_a_retry_on_a_new_connection_and_another_worker_is_still_deduplicated(
        nats_server: NatsServer, acts: EventActivities, js: JetStreamContext) -> None:
    await acts.publish_event(event(seq=7, topic="agent.run.completed", data={"status": "success"}))
    await acts.close()
    await acts.publish_event(event(seq=7, topic="agent.run.completed", data={"status": "success"}))
    other_worker = EventActivities(nats_server.url)
    try:
        await other_worker.publish_event(event(seq=7, topic="agent.run.completed", data={"status": "success"}))
    finally:
        await other_worker.close()
    assert await stored(js) == 1


async def test_same_seq_on_another_topic_or_workflow_is_a_different_event(
        acts: EventActivities, js: JetStreamContext) -> None:
    await acts.publish_event(event(seq=3, topic="agent.run.phase"))
    await acts.publish_event(event(seq=3, topic="agent.run.failed", data={"error": "x", "reason": "y"}))
    await acts.publish_event(event(seq=3, workflow_id="agentrun/ns1/run-b"))
    assert await stored(js) == 3


async def test_the_message_carries_the_spec_envelope_subject_and_message_id(
        acts: EventActivities, js: JetStreamContext) -> None:
    data: dict[str, str | int | None] = {"status": "error", "response": "", "error": "boom", "gateVerdict": None}
    await acts.publish_event(event(seq=4, topic="agent.run.completed", data=data))
    msg = await js.get_msg("sympozium", 1)
    assert msg.subject == "sympozium.agent.run.completed"
    assert msg.headers is not None and msg.headers["Nats-Msg-Id"] == "agentrun/ns1/run-a/agent.run.completed/4"
    assert msg.data is not None
    assert json.loads(msg.data) == {
        "topic": "agent.run.completed",
        "timestamp": "2025-01-02T03:04:05Z",
        "metadata": {"agentRunID": "run-a", "instanceName": "inst-1", "namespace": "ns1"},
        "data": {"status": "error", "response": "", "error": "boom", "gateVerdict": None},
    }


async def test_a_subscriber_sees_a_retried_event_once(acts: EventActivities, js: JetStreamContext) -> None:
    await acts.publish_event(event(seq=1, topic="agent.run.started", data={"task": "hello"}))
    await acts.publish_event(event(seq=1, topic="agent.run.started", data={"task": "hello"}))
    await acts.publish_event(event(seq=2, topic="agent.run.gate.pending", data={"gateTimeout": "1h"}))
    sub = await js.subscribe("sympozium.agent.run.>", ordered_consumer=True)
    seen = [json.loads((await sub.next_msg(timeout=5)).data)["topic"] for _ in range(2)]
    assert seen == ["agent.run.started", "agent.run.gate.pending"]
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.3)
    await sub.unsubscribe()


async def test_a_missing_stream_is_created_with_file_storage_24h_retention_and_dedup_window(
        acts: EventActivities, js: JetStreamContext) -> None:
    with pytest.raises(nats.js.errors.NotFoundError):
        await js.stream_info("sympozium")
    await acts.publish_event(event())
    cfg = (await js.stream_info("sympozium")).config
    assert cfg.subjects == ["sympozium.>"]
    assert cfg.storage == StorageType.FILE
    assert cfg.max_age == DAY and cfg.duplicate_window == DAY


async def test_an_existing_stream_is_reused_as_it_is(acts: EventActivities, js: JetStreamContext) -> None:
    await js.add_stream(name="sympozium", subjects=["sympozium.>"], storage=StorageType.MEMORY,
                        max_age=3600, duplicate_window=600)
    await js.publish("sympozium.agent.run.phase", b"{}")
    await acts.publish_event(event())
    info = await js.stream_info("sympozium")
    assert info.state.messages == 2
    assert info.config.storage == StorageType.MEMORY and info.config.max_age == 3600


async def test_a_stream_created_by_another_worker_meanwhile_is_tolerated(
        nats_server: NatsServer, js: JetStreamContext) -> None:
    workers = [EventActivities(nats_server.url) for _ in range(4)]
    try:
        await asyncio.gather(*(w.publish_event(event(seq=i)) for i, w in enumerate(workers)))
    finally:
        for w in workers:
            await w.close()
    assert await stored(js) == 4


async def test_a_stream_deleted_behind_the_workers_back_is_created_again(
        acts: EventActivities, js: JetStreamContext) -> None:
    await acts.publish_event(event(seq=1))
    await js.delete_stream("sympozium")
    with pytest.raises(ApplicationError) as failure:
        await acts.publish_event(event(seq=2))
    assert failure.value.type == "NatsNoStream" and not failure.value.non_retryable
    await acts.publish_event(event(seq=2))
    assert await stored(js) == 1


async def test_concurrent_publishes_share_one_connection(acts: EventActivities, js: JetStreamContext) -> None:
    await asyncio.gather(*(acts.publish_event(event(seq=i)) for i in range(25)))
    assert await stored(js) == 25
    assert acts._nc is not None
    first = acts._nc
    await acts.publish_event(event(seq=99))
    assert acts._nc is first


async def test_stopped_nats_fails_fast_and_a_restart_on_the_same_store_recovers(tmp_path: Path) -> None:
    server = NatsServer(tmp_path).start()
    acts = EventActivities(server.url)
    try:
        await acts.publish_event(event(seq=1))
        port = server.port
        server.stop()

        started = time.monotonic()
        with pytest.raises(ApplicationError) as failure:
            await acts.publish_event(event(seq=2))
        assert time.monotonic() - started < 4
        assert failure.value.type == "NatsUnavailable" and not failure.value.non_retryable

        server = NatsServer(tmp_path, port=port).start()
        await eventually(lambda: acts.publish_event(event(seq=2)), what="a publish after the restart")
        await acts.publish_event(event(seq=2))  # a retry of the recovered publish

        nc = await nats.connect(server.url)
        try:
            reader = nc.jetstream()
            assert await stored(reader) == 2
            bodies = [json.loads((await reader.get_msg("sympozium", seq)).data or b"") for seq in (1, 2)]
            assert [b["data"]["phase"] for b in bodies] == ["Running", "Running"]
            headers = [(await reader.get_msg("sympozium", seq)).headers or {} for seq in (1, 2)]
            assert [h["Nats-Msg-Id"] for h in headers] == ["agentrun/ns1/run-a/agent.run.phase/1",
                                                          "agentrun/ns1/run-a/agent.run.phase/2"]
        finally:
            await nc.close()
    finally:
        await acts.close()
        server.stop()


async def test_nats_never_started_raises_a_retryable_error_quickly() -> None:
    acts = EventActivities(f"nats://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(ApplicationError) as failure:
        await acts.publish_event(event())
    assert time.monotonic() - started < 3
    assert failure.value.type == "NatsUnavailable" and not failure.value.non_retryable


async def test_a_server_that_never_answers_costs_at_most_the_connect_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        acts = EventActivities(f"nats://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        with pytest.raises(ApplicationError) as failure:
            await acts.publish_event(event())
        elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 4
    assert failure.value.type == "NatsUnavailable" and not failure.value.non_retryable


async def test_concurrent_publishes_against_a_silent_server_share_one_connect_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        acts = EventActivities(f"nats://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        outcomes = await asyncio.gather(*(acts.publish_event(event(seq=i)) for i in range(5)),
                                        return_exceptions=True)
        elapsed = time.monotonic() - started
    assert elapsed < 4
    assert all(isinstance(o, ApplicationError) and o.type == "NatsUnavailable" for o in outcomes), outcomes


@pytest.mark.parametrize("url", [None, ""])
async def test_without_a_nats_url_events_are_disabled_and_said_once(
        url: str | None, caplog: pytest.LogCaptureFixture) -> None:
    acts = EventActivities(url)
    with caplog.at_level(logging.INFO, logger="activities.events"):
        await acts.publish_event(event(seq=1))
        await acts.publish_event(event(seq=2))
    said = [r for r in caplog.records if r.name == "activities.events"]
    assert len(said) == 1 and "not published" in said[0].getMessage()
    assert not acts.enabled and acts._nc is None


async def test_it_runs_as_a_temporal_activity(acts: EventActivities, js: JetStreamContext) -> None:
    await ActivityEnvironment().run(acts.publish_event, event(seq=5))
    assert await stored(js) == 1


def test_a_run_event_survives_the_temporal_data_converter() -> None:
    original = event(seq=9, topic="agent.run.completed",
                     data={"status": "success", "response": "ok", "error": "", "gateVerdict": None})
    converter = pydantic_data_converter.payload_converter
    [decoded] = converter.from_payloads(converter.to_payloads([original]), [RunEvent])
    assert decoded == original


def test_an_unknown_topic_is_rejected() -> None:
    with pytest.raises(ValueError, match="topic"):
        event(topic="agent.run.exploded")


def test_ints_and_nones_in_data_keep_their_types() -> None:
    assert event(data={"exitCode": 3, "gateVerdict": None, "phase": "Running"}).data == {
        "exitCode": 3, "gateVerdict": None, "phase": "Running"}


async def test_events_go_to_another_stream_that_already_stores_the_subjects(
        acts: EventActivities, js: JetStreamContext) -> None:
    await js.add_stream(name="legacy-events", subjects=["sympozium.>"])
    await acts.publish_event(event(seq=1))
    await acts.publish_event(event(seq=1))
    assert await stored(js, "legacy-events") == 1
    with pytest.raises(nats.js.errors.NotFoundError):
        await js.stream_info("sympozium")


async def test_a_nats_with_a_token_takes_only_clients_that_present_it(tmp_path: Path) -> None:
    """Issue 27: NATS listened without authentication and its events carry tasks and results. With a token (as
    `agentrun up` starts it) a client without it is refused; the worker's settings read it from a file."""
    token_file = tmp_path / "nats-token"
    token_file.write_text("s3cret-token-for-nats\n")
    server = NatsServer(tmp_path, token="s3cret-token-for-nats").start()
    try:
        assert "s3cret-token-for-nats" not in " ".join(server.proc.args if server.proc else [])  # type: ignore[arg-type]
        assert (tmp_path / "nats.conf").stat().st_mode & 0o077 == 0
        for options in ({}, {"token": "wrong"}):
            with pytest.raises(nats.errors.Error):
                await nats.connect(server.url, connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=1,
                                   **options)
        refused = EventActivities(server.url)
        with pytest.raises(ApplicationError, match=r"authorization|Authorization"):
            await ActivityEnvironment().run(refused.publish_event, event())
        await refused.close()
        settings = NatsSettings(url=server.url, token_file=str(token_file))
        acts = EventActivities(server.url, options=settings.connect_options())
        try:
            await ActivityEnvironment().run(acts.publish_event, event())
        finally:
            await acts.close()
        nc = await nats.connect(server.url, token="s3cret-token-for-nats")
        try:
            assert await stored(nc.jetstream()) == 1
        finally:
            await nc.close()
    finally:
        server.stop()


def test_nats_settings_read_credentials_from_files_and_refuse_half_pairs(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    assert NatsSettings(user="bot", password_file=str(tmp_path / "pw")).connect_options() == {
        "user": "bot", "password": "hunter2"}
    with pytest.raises(ValueError, match="AGENTRUN_NATS__PASSWORD_FILE"):
        NatsSettings(user="bot")
    with pytest.raises(ValueError, match="one of"):
        NatsSettings(token_file=str(tmp_path / "pw"), creds_file=str(tmp_path / "pw"))
    with pytest.raises(SettingsError, match=r"AGENTRUN_NATS__TOKEN_FILE=.*missing: cannot read it"):
        NatsSettings(token_file=str(tmp_path / "missing")).connect_options()
    assert "tls" in NatsSettings(url="tls://127.0.0.1:4222").connect_options()
