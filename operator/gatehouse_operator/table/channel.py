"""The table channel's operator end: one WebSocket per proxy replica.

A replica that connects (see :mod:`gatehouse_contract.channel` for the wire rules) receives a
snapshot, then every delta the journal records, a signed heartbeat when nothing else moved, the
connection tests the operator runs, and (a replica that said it answers them) the operator's
questions about what apps did (``gather``; the usage it reports is added to ``usage``). What it
acknowledges is recorded in :class:`Replicas`, which is what ``Ready`` waits for. Each replica
has its own sender: a slow one falls behind (and is sent a snapshot once its deltas are gone), it
never holds the others back.

aiohttp, not Starlette/uvicorn, serves the channel: the replicas' end is aiohttp's WebSocket
client, and its server needs no further package (uvicorn would need ``websockets``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, get_args

from aiohttp import WSCloseCode, WSMsgType, web

from gatehouse_contract.channel import (
    CHANNEL_PATH,
    CLOCK_SKEW_SECONDS,
    HEARTBEAT_SECONDS,
    MISSED_HEARTBEATS,
    ChannelRefused,
    sign_frame,
    verify_request,
)
from gatehouse_contract.channel_tls import ServerContext
from gatehouse_contract.connecting import GrantsAnswered, GrantsAsked
from gatehouse_contract.connection_tests import (
    ANSWER_GRACE_SECONDS,
    Failed,
    Problem,
    ReplicaTestOutcome,
    ReplicaTestRequest,
)
from gatehouse_contract.errors import error_body
from gatehouse_contract.frames import (
    ACTIVITY_FEATURE,
    CURSOR_FEATURE,
    CURSOR_FIELDS,
    FEATURES_HEADER,
    FLEET_FEATURE,
    GRANTS_FEATURE,
    Ack,
    ConnectionTestFrame,
    Gather,
    Gathered,
    Goodbye,
    Heartbeat,
    Nack,
    RenewalsBounded,
    ReplicaMessage,
    Resync,
    Throttled,
    Unreadable,
    UsageReport,
    read_replica_message,
)
from gatehouse_contract.keyring import KeyringSource
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replica, Replicas
from gatehouse_operator.table.store import RouteStore
from gatehouse_operator.table.throttles import Throttles
from gatehouse_operator.table.usage import UsageHistory

log = logging.getLogger("gatehouse.operator.tables")

# Changes closer together than this are sent as one delta.
COALESCE_SECONDS = 0.05
# The types of frame a replica sends, which name the dropped ones in the metrics (any other is
# counted as "other": a label's values stay bounded whatever arrives).
REPLICA_MESSAGE_TYPES = frozenset(
    kind.model_fields["type"].default for kind in get_args(ReplicaMessage)
)

# What a replica may send in one message. A connection test's result is the largest, and its
# body is cut on the replica (connection_tests.MAX_ANSWER_BODY_BYTES in the contract) so that
# the largest fits with room to spare, whatever the upstream answered (test_connection_tests.py).
MAX_REPLICA_MESSAGE_BYTES = 1024 * 1024


class NoReplica(GatehouseError):
    """No connected replica holds the table a connection test needs (yet)."""


class StreamClosed(GatehouseError, ConnectionError):
    """The replica's stream closed before a frame was written to it: a test was not sent."""


class OutcomeUnknown(GatehouseError):
    """A replica was sent a test and did not report it: it went away, or stayed silent past the
    deadline. It may have sent the request upstream."""


class TableChannel:
    def __init__(
        self,
        keyring: KeyringSource,
        routes: RouteStore,
        journal: Journal,
        replicas: Replicas,
        throttles: Throttles | None = None,
        usage: UsageHistory | None = None,
    ) -> None:
        self.keyring = keyring
        self.routes = routes
        self.journal = journal
        self.replicas = replicas
        self.tls = ServerContext(keyring.current())
        self.sessions: dict[str, _Session] = {}
        self._changed = asyncio.Event()
        self._flush_at: asyncio.TimerHandle | None = None
        self._last_flush = 0.0
        self._nonces: dict[str, float] = {}
        self._refusal_logged_at = 0.0
        self.throttles = throttles or Throttles(routes, None)
        self.usage = usage or UsageHistory()
        # Frames from replicas dropped, by (type, "unreadable" or "failed"): for the metrics.
        self.dropped: Counter[tuple[str, str]] = Counter()

    # --- Publishing ---------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        """Publishes the store's changes soon, as one delta with whatever else changes first."""
        if self._flush_at is not None:
            return
        delay = max(0.0, self._last_flush + COALESCE_SECONDS - time.monotonic())
        self._flush_at = asyncio.get_running_loop().call_later(delay, self.flush)

    def flush(self) -> None:
        self._flush_at = None
        if not self.routes.startup.open:
            return  # housekeeping flushes once it is
        self._last_flush = time.monotonic()
        delta = self.journal.flush(self.routes)
        if delta is None:
            return
        log.debug("published routing table %d: %d change(s)", delta.version, len(delta.changed))
        self.wake()

    def wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- Connection tests ---------------------------------------------------------------------

    async def run_test(self, request: ReplicaTestRequest, within: float) -> ReplicaTestOutcome:
        """Runs a connection test on a replica that holds ``request.min_table_version``."""
        holders = [
            session
            for session in self.sessions.values()
            if session.replica.version >= request.min_table_version
        ]
        if not holders:
            raise NoReplica(
                "no proxy replica holds the newest table yet"
                if self.sessions
                else "no proxy replica is connected to the operator"
            )
        return await secrets.choice(holders).run_test(request, within)

    # --- Connecting accounts -------------------------------------------------------------------

    async def ask_grants(self, asked: GrantsAsked, within: float) -> GrantsAnswered:
        """A connect flow's step (gatehouse_contract.connecting), answered by one replica that
        takes them: any, since what a step needs is in the shared store. Raises NoReplica, or
        OutcomeUnknown when the replica went away or did not answer within ``within``."""
        takers = [session for session in self.sessions.values() if session.grants]
        if not takers:
            raise NoReplica(
                "no proxy replica that connects accounts is connected to the operator"
                if self.sessions
                else "no proxy replica is connected to the operator"
            )
        session = secrets.choice(takers)
        try:
            async with asyncio.timeout(within):
                return await session.ask_grants(asked)
        except (TimeoutError, ConnectionError):
            raise OutcomeUnknown(
                f"proxy replica {session.replica.name} did not answer within {within:g}s"
            ) from None

    # --- The server ---------------------------------------------------------------------------

    def _authenticate(self, request: web.Request) -> tuple[str, str]:
        replica = request.headers.get("X-Gatehouse-Replica", "")
        nonce = verify_request(
            self.keyring.current(), request.headers.get("Authorization", ""), replica
        )
        now = time.monotonic()
        self._nonces = {n: t for n, t in self._nonces.items() if t > now}
        if nonce in self._nonces:
            raise ChannelRefused("the request's nonce was used before (a replay?)")
        self._nonces[nonce] = now + 2 * CLOCK_SKEW_SECONDS
        return replica, nonce

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        try:
            name, nonce = self._authenticate(request)
        except ChannelRefused as refused:
            if time.monotonic() - self._refusal_logged_at > 10:
                self._refusal_logged_at = time.monotonic()
                log.warning("refused a table channel from %s: %s", request.remote, refused)
            return web.json_response(error_body("unauthenticated", str(refused)), status=401)
        ws = web.WebSocketResponse(
            receive_timeout=HEARTBEAT_SECONDS * MISSED_HEARTBEATS,
            max_msg_size=MAX_REPLICA_MESSAGE_BYTES,
            autoping=True,
        )
        await ws.prepare(request)
        previous = self.sessions.get(name)
        if previous is not None:
            await previous.ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"replaced")
        features = {
            feature.strip()
            for feature in request.headers.get(FEATURES_HEADER, "").split(",")
            if feature.strip()
        }
        session = _Session(self, ws, nonce, self.replicas.connected(name), features)
        self.sessions[name] = session
        log.info("proxy replica %s connected", name)
        goodbye = False
        try:
            goodbye = await session.run()
        finally:
            if self.sessions.get(name) is session:
                del self.sessions[name]
            self.replicas.disconnected(session.replica, goodbye=goodbye)
            self.wake()  # the fleet may have shrunk: the other streams tell their replicas
            session.fail_tests()
            log.info("proxy replica %s %s", name, "left" if goodbye else "disconnected")
        return ws

    async def _healthz(self, request: web.Request) -> web.Response:
        # Anyone who reaches the port may ask: liveness only. The table and the replicas are
        # on the operator's metrics port, which the installation's NetworkPolicy restricts.
        return web.json_response({"ok": True})

    def create_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(CHANNEL_PATH, self._stream)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            await session.ws.close(code=WSCloseCode.GOING_AWAY, message=b"operator stopping")


class _Session:
    """One replica's stream: its frame sequence, what it was sent, its pending tests."""

    def __init__(
        self,
        channel: TableChannel,
        ws: web.WebSocketResponse,
        nonce: str,
        replica: Replica,
        features: set[str],
    ) -> None:
        self.channel = channel
        self.ws = ws
        self.nonce = nonce
        self.replica = replica
        self.fleet = FLEET_FEATURE in features
        # It answers Gather frames; a replica of an earlier release is never sent one.
        self.activity = ACTIVITY_FEATURE in features
        # It reads a query's cursor and answers a follower's page; one that does not is sent
        # neither field, and is not asked for a follower's page.
        self.cursor = CURSOR_FEATURE in features
        # It answers GrantsAsked frames (the connect flow's steps).
        self.grants = GRANTS_FEATURE in features
        self.seq = 0
        self.sent = 0  # the version this replica was last sent
        self.needs_snapshot = True
        self.told_fleet = 0  # the fleet size this replica was last told
        self.wakeup = asyncio.Event()
        self.goodbye = False  # the replica said it is shutting down
        self._send_lock = asyncio.Lock()
        self._tests: dict[str, asyncio.Future[ReplicaTestOutcome]] = {}
        self._gathers: dict[str, asyncio.Future[Gathered]] = {}
        self._grants: dict[str, asyncio.Future[GrantsAnswered]] = {}

    async def run(self) -> bool:
        """Serves the replica until the stream ends; True if the replica said goodbye.

        A sender that fails ends the stream at once (the replica reconnects and gets a
        snapshot): left open, the replica would hear nothing until its heartbeat timeout.
        """
        sender = asyncio.create_task(self._send_forever(), name=f"table-sender-{self.replica.name}")
        receiver = asyncio.create_task(self._receive_forever())
        try:
            await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if sender.done() and not receiver.done():
                failure = sender.exception()
                if failure is not None and not isinstance(failure, ConnectionError):
                    log.error(
                        "sending to proxy replica %s failed; closing its stream",
                        self.replica.name,
                        exc_info=failure,
                    )
                await self.ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"sender failed")
            return await receiver
        finally:
            for task in (sender, receiver):
                task.cancel()
            await asyncio.gather(sender, receiver, return_exceptions=True)

    async def send(self, payload: bytes) -> None:
        """Sends one frame; raises StreamClosed when nothing was written, another
        ConnectionError when the writing failed."""
        # One at a time: frames must arrive in the order of their sequence numbers.
        async with self._send_lock:
            if self.ws.closed:
                raise StreamClosed(f"the stream to proxy replica {self.replica.name} is closed")
            self.seq += 1
            frame = sign_frame(self.channel.keyring.current(), self.nonce, self.seq, payload)
            await self.ws.send_bytes(frame)

    async def _send_forever(self) -> None:
        journal = self.channel.journal
        while True:
            changed = self.channel._changed
            if journal.version and self.needs_snapshot:
                self.needs_snapshot = False
                self.sent = journal.version
                for part in journal.snapshot():
                    await self.send(part)
                continue
            if journal.version and journal.version != self.sent:
                deltas = journal.since(self.sent)
                if deltas is None:
                    self.needs_snapshot = True
                    continue
                for delta in deltas:
                    await self.send(delta.payload)
                    self.sent = delta.version
                continue
            if self.fleet and len(self.channel.replicas.serving()) != self.told_fleet:
                # A replica joined or left: each replica's leases on the shared quotas are sized
                # by the fleet, and until told it asks the store for every request.
                await self._heartbeat(journal.version)
                continue
            self.wakeup.clear()
            waits = [
                asyncio.ensure_future(changed.wait()),
                asyncio.ensure_future(self.wakeup.wait()),
            ]
            try:
                done, _ = await asyncio.wait(
                    waits, timeout=HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                # Also when this stream is cancelled (a replica gone, the operator stopping):
                # left pending, they would outlive it, and a stopping kopf waits for them.
                for waiting in waits:
                    waiting.cancel()
            if not done:
                await self._heartbeat(journal.version)

    async def _heartbeat(self, version: int) -> None:
        fleet = len(self.channel.replicas.serving()) if self.fleet else 0
        heartbeat = Heartbeat(version=version, time=time.time(), replicas=fleet)
        # A replica that did not ask for the field would refuse the frame.
        unread = None if self.fleet else {"replicas"}
        await self.send(heartbeat.model_dump_json(exclude=unread).encode())
        self.told_fleet = fleet

    async def _receive_forever(self) -> bool:
        try:
            async for message in self.ws:
                if message.type is not WSMsgType.TEXT:
                    log.warning(
                        "proxy replica %s sent a %s message", self.replica.name, message.type
                    )
                    return False
                try:
                    said = read_replica_message(message.data)
                except Unreadable as unreadable:
                    known = unreadable.kind in REPLICA_MESSAGE_TYPES
                    self.channel.dropped[unreadable.kind if known else "other", "unreadable"] += 1
                    self._unreadable(unreadable)
                    continue
                try:
                    self._heard(said)
                except Exception as error:  # any: one frame's failure ends that frame only
                    self._failed(said, error)
        except TimeoutError:
            log.warning(
                "proxy replica %s said nothing for %.0fs: closing its stream",
                self.replica.name,
                HEARTBEAT_SECONDS * MISSED_HEARTBEATS,
            )
            await self.ws.close(code=WSCloseCode.GOING_AWAY, message=b"silent")
            return False
        return self.goodbye

    def _failed(self, said: ReplicaMessage, error: Exception) -> None:
        """Handling one frame failed (a bug, or a value its handler could not take): the frame is
        dropped, and the stream, the replica's tests and its table go on. Logged by the error's
        type and place only: its text could quote the frame (a test's answer)."""
        self.channel.dropped[said.type, "failed"] += 1
        raised = traceback.extract_tb(error.__traceback__)
        place = f"{Path(raised[-1].filename).name}:{raised[-1].lineno}" if raised else "?"
        log.error(
            "handling a %s frame from proxy replica %s failed (%s at %s); dropped it",
            said.type,
            self.replica.name,
            type(error).__name__,
            place,
        )

    def _unreadable(self, unreadable: Unreadable) -> None:
        log.warning(
            "proxy replica %s sent an unreadable message (%s)", self.replica.name, unreadable
        )
        if unreadable.kind in ("gathered", "grantsAnswer"):
            pending = self._gathers if unreadable.kind == "gathered" else self._grants
            waiting: asyncio.Future[Any] | None = pending.pop(unreadable.test_id, None)
            if waiting is not None and not waiting.done():
                waiting.set_exception(ConnectionError("its answer could not be read"))
        elif unreadable.test_id:
            # A replica of another release: its test fails with why rather than timing out.
            problem = Problem(code="unreadable", message="the proxy's answer could not be read")
            self._finish_test(unreadable.test_id, Failed(error=problem))

    def _finish_test(self, test_id: str, outcome: ReplicaTestOutcome) -> None:
        future = self._tests.pop(test_id, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def _heard(self, said: ReplicaMessage) -> None:
        replicas = self.channel.replicas
        if isinstance(said, Ack):
            joined = not self.replica.version
            replicas.acknowledged(self.replica, said.version)
            if joined:
                self.channel.wake()  # every stream tells its replica the fleet grew
        elif isinstance(said, Nack):
            if said.reason != self.replica.last_refusal:
                log.error(
                    "proxy replica %s refused table %d: %s",
                    self.replica.name,
                    said.version,
                    said.reason,
                )
            self.replica.last_refusal = said.reason
            if said.installed >= self.channel.journal.version:
                # It holds a newer version than this operator has made (an operator whose clock
                # ran ahead): number on from there, or it would refuse every table.
                self.channel.journal.move_past(said.installed)
                self.needs_snapshot = True
                self.channel.wake()
        elif isinstance(said, Goodbye):
            self.goodbye = True
        elif isinstance(said, Resync):
            log.warning("proxy replica %s asked for a snapshot: %s", self.replica.name, said.reason)
            self.needs_snapshot = True
            self.wakeup.set()
        elif isinstance(said, Throttled):
            self.channel.throttles.heard(said)
        elif isinstance(said, RenewalsBounded):
            self.channel.throttles.bounded(said)
        elif isinstance(said, UsageReport):
            if self.activity:  # counted once, and forgotten by the replica: added even late
                self.channel.usage.add(said.rows)
        elif isinstance(said, Gathered):
            waiting = self._gathers.pop(said.id, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(said)
        elif isinstance(said, GrantsAnswered):
            asked = self._grants.pop(said.id, None)
            if asked is not None and not asked.done():
                asked.set_result(said)
        else:
            self._finish_test(said.id, said.result)

    async def run_test(self, request: ReplicaTestRequest, within: float) -> ReplicaTestOutcome:
        """The replica's report of the test. Raises StreamClosed when the test was not sent
        to it, and OutcomeUnknown when it was and no report came."""
        test_id = secrets.token_hex(8)
        future: asyncio.Future[ReplicaTestOutcome] = asyncio.get_running_loop().create_future()
        self._tests[test_id] = future
        # The test's deadline: the replica ends it there, and reports how.
        request = request.model_copy(update={"within_seconds": within})
        try:
            frame = ConnectionTestFrame(id=test_id, request=request)
            try:
                await self.send(frame.model_dump_json().encode())
            except StreamClosed:
                raise
            except ConnectionError:
                raise OutcomeUnknown(
                    f"the stream to proxy replica {self.replica.name} broke while the test was "
                    "sent to it"
                ) from None
            try:
                async with asyncio.timeout(within + ANSWER_GRACE_SECONDS):
                    return await future
            except TimeoutError:
                raise OutcomeUnknown(
                    f"proxy replica {self.replica.name} did not report the test by its deadline"
                ) from None
        finally:
            self._tests.pop(test_id, None)
            _seen(future)

    async def gather(self, frame: Gather) -> Gathered:
        """The replica's answer to ``frame``; the caller bounds the wait. Raises ConnectionError
        when the stream closed (or its answer could not be read)."""
        future: asyncio.Future[Gathered] = asyncio.get_running_loop().create_future()
        self._gathers[frame.id] = future
        try:
            unread = None if self.cursor else CURSOR_FIELDS
            await self.send(frame.model_dump_json(exclude=unread).encode())
            return await future
        finally:
            self._gathers.pop(frame.id, None)
            _seen(future)

    async def ask_grants(self, asked: GrantsAsked) -> GrantsAnswered:
        """The replica's answer to a connect flow's step; the caller bounds the wait. Raises
        ConnectionError when the stream closed."""
        future: asyncio.Future[GrantsAnswered] = asyncio.get_running_loop().create_future()
        self._grants[asked.id] = future
        try:
            await self.send(asked.model_dump_json().encode())
            return await future
        finally:
            self._grants.pop(asked.id, None)
            _seen(future)

    def fail_tests(self) -> None:
        """The stream is gone: the replica had the tests (and gathers) still waiting for its
        report."""
        for future in self._tests.values():
            if not future.done():
                future.set_exception(
                    OutcomeUnknown(f"proxy replica {self.replica.name} went away during the test")
                )
        pending: list[asyncio.Future[Any]] = [*self._gathers.values(), *self._grants.values()]
        for gathering in pending:
            if not gathering.done():
                gathering.set_exception(ConnectionError(f"{self.replica.name} went away"))


def _seen(future: asyncio.Future[Any]) -> None:
    """Reads a failure fail_tests set while the frame was still being sent (the send then raised
    instead), so that asyncio does not log it as never retrieved."""
    if future.done() and not future.cancelled():
        future.exception()
