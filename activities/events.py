"""Run events on NATS JetStream (SPEC §5).

The workflow builds each `RunEvent` itself (its own counter `seq`, its own clock) and hands it
to `EventActivities.publish_event`. The message ID `<workflow_id>/<topic>/<seq>` is therefore
the same on every retry of the same event, and JetStream's de-duplication stores it once.

An unreachable NATS never blocks inside one attempt: connecting gives up after a couple of
seconds and the client never reconnects on its own; the activity raises a retryable
`ApplicationError` and Temporal's retry policy decides when to try again (on a fresh
connection). Without a NATS URL events are disabled and the activity does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import StorageType
from temporalio import activity
from temporalio.exceptions import ApplicationError

from models.events import SUBJECT_PREFIX, RunEvent, Topic

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_STREAM = "sympozium"
STREAM_MAX_AGE_SECONDS = 24 * 3600.0
# As long as the stream keeps messages: a retry days later is still recognised as a duplicate.
DUPLICATE_WINDOW_SECONDS = 24 * 3600.0
MSG_ID_HEADER = "Nats-Msg-Id"
STREAM_NAME_IN_USE = 10058  # JetStream API error code: a stream with this name already exists
SUBJECTS_OVERLAP = 10065  # another stream already stores these subjects

class EventActivities:
    """Publishes run events; one lazily opened NATS connection per instance, replaced after failures."""

    def __init__(self, nats_url: str | None, *, stream: str = DEFAULT_STREAM, connect_timeout: float = 2.0,
                 request_timeout: float = 5.0, options: dict[str, Any] | None = None) -> None:
        self.nats_url = nats_url or ""
        # Credentials and TLS (models/settings.py NatsSettings.connect_options).
        self.options = dict(options or {})
        self.stream = stream
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._stream_ready = False
        self._lost = asyncio.Event()  # set when the current connection goes away
        self._lock = asyncio.Lock()
        self._said_disabled = False
        self._connect_failed: tuple[float, Exception] | None = None  # when and why the last connect failed

    @property
    def enabled(self) -> bool:
        return bool(self.nats_url)

    @activity.defn
    async def publish_event(self, event: RunEvent) -> None:
        if not self.enabled:
            if not self._said_disabled:
                self._said_disabled = True
                log.info("no NATS URL configured: run events are not published")
            return
        payload = json.dumps(event.envelope(), separators=(",", ":")).encode()
        lost: asyncio.Event | None = None
        try:
            js, lost = await self._jetstream()
            ack = await _unless_lost(js.publish(event.subject, payload, timeout=self.request_timeout,
                                                headers={MSG_ID_HEADER: event.message_id}), lost)
        except nats.errors.MaxPayloadError as e:
            raise ApplicationError(f"event {event.message_id} is too large for NATS: {e}",
                                   type="NatsEventTooLarge", non_retryable=True) from e
        except nats.js.errors.NoStreamResponseError as e:
            # Nothing stores `sympozium.>` (the stream was deleted?): create it again next attempt.
            self._stream_ready = False
            raise ApplicationError(f"publishing {event.message_id}: no JetStream stream answered",
                                   type="NatsNoStream") from e
        except nats.js.errors.APIError as e:
            raise ApplicationError(f"publishing {event.message_id}: {e}", type="NatsJetStreamError") from e
        except (nats.errors.Error, OSError, TimeoutError) as e:
            if lost is not None:
                lost.set()  # the next attempt opens a new connection
            raise ApplicationError(f"publishing {event.message_id} to {self.nats_url}: {type(e).__name__} {e}",
                                   type="NatsUnavailable") from e
        if ack.duplicate:
            log.debug("event %s was already stored (stream %s seq %s)", event.message_id, ack.stream, ack.seq)

    async def close(self) -> None:
        """Close the connection (worker shutdown). Publishing afterwards opens a new one."""
        async with self._lock:
            await self._drop()

    async def _jetstream(self) -> tuple[JetStreamContext, asyncio.Event]:
        asked = time.monotonic()
        async with self._lock:
            if self._nc is None or self._js is None or self._lost.is_set() or not self._nc.is_connected:
                if self._connect_failed is not None and self._connect_failed[0] >= asked:
                    # A connect failed while this attempt waited for the lock: fail now rather than
                    # queueing one connect timeout per concurrent publish behind it.
                    raise ConnectionError(f"connecting failed just now: {self._connect_failed[1]!r}")
                await self._drop()
                self._lost = asyncio.Event()
                try:
                    self._nc = await self._connect(self._lost)
                except Exception as e:
                    self._connect_failed = (time.monotonic(), e)
                    raise
                self._connect_failed = None
                self._js = self._nc.jetstream(timeout=self.request_timeout)
            if not self._stream_ready:
                try:
                    await _unless_lost(self._ensure_stream(self._js), self._lost)
                except BaseException:
                    self._lost.set()
                    raise
                self._stream_ready = True
            return self._js, self._lost

    async def _connect(self, lost: asyncio.Event) -> NatsClient:
        nc = NatsClient()
        problems: list[Exception] = []

        async def on_error(e: Exception) -> None:
            problems.append(e)
            log.debug("nats %s: %s", self.nats_url, e)

        async def on_lost() -> None:
            lost.set()

        try:
            # One quick attempt, no reconnect loop inside the client (max_reconnect_attempts=0
            # would mean "forever" while connecting), and a hard bound on the whole handshake.
            await asyncio.wait_for(
                nc.connect(self.nats_url, connect_timeout=self.connect_timeout,  # type: ignore[arg-type]
                           allow_reconnect=False, max_reconnect_attempts=1, reconnect_time_wait=0,
                           error_cb=on_error, disconnected_cb=on_lost, closed_cb=on_lost,
                           name="agentrun-events", **self.options),
                timeout=self.connect_timeout)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await nc.close()
            if isinstance(e, nats.errors.NoServersError) and problems:
                raise problems[-1] from e
            raise
        return nc

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        """Create the stream unless it exists; an existing stream is used as it is."""
        try:
            await js.stream_info(self.stream)
            return
        except nats.js.errors.NotFoundError:
            pass
        try:
            await js.add_stream(name=self.stream, subjects=[f"{SUBJECT_PREFIX}.>"], storage=StorageType.FILE,
                                max_age=STREAM_MAX_AGE_SECONDS, duplicate_window=DUPLICATE_WINDOW_SECONDS)
            log.info("created JetStream stream %s", self.stream)
        except nats.js.errors.BadRequestError as e:
            if e.err_code == SUBJECTS_OVERLAP:
                log.warning("stream %s not created: another stream already stores %s.>; events go there",
                            self.stream, SUBJECT_PREFIX)
            elif e.err_code == STREAM_NAME_IN_USE:
                # Another worker is creating it this moment: publish once the stream answers, not before (a publish
                # in between finds no stream and would fail this attempt).
                await js.stream_info(self.stream)
            else:
                raise

    async def _drop(self) -> None:
        nc, self._nc, self._js, self._stream_ready = self._nc, None, None, False
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await nc.close()


async def _unless_lost(step: Coroutine[object, object, T], lost: asyncio.Event) -> T:
    """Await `step`, but fail at once when the connection is lost instead of waiting for its timeout.

    The NATS client leaves a request in flight until its timeout when the connection closes
    under it; a stopped server should fail the attempt now.
    """
    work = asyncio.ensure_future(step)
    watch = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
    if work.done() and not work.cancelled():
        return work.result()
    raise nats.errors.ConnectionClosedError()


__all__ = ["SUBJECT_PREFIX", "EventActivities", "RunEvent", "Topic"]
