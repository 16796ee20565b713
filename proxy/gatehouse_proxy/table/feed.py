"""The proxy's copy of the routing table, kept current over the table channel.

Each replica holds one WebSocket to the operator (see :mod:`gatehouse_contract.channel`): a snapshot
first, then deltas; every install is acknowledged, every refusal reported with why, and a delta
that does not continue the table (a gap, a digest mismatch) makes the replica ask for a snapshot.
A replica whose operator is away keeps serving the last table it verified and reconnects with
backoff. It is ready only once it holds a table. The operator's ``Gather`` frames (what apps
did: recent requests, usage) are answered by the replica's ``Activity``, each in a task of its
own, so that a table's frames never wait for one.

No failure ends the feed: each is logged with its cause (once per distinct cause, so a long outage
is one line, not one per retry), the stream is opened again with backoff, and the feed's state,
its last error and the table's age are in ``/readyz`` and the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from gatehouse_contract.channel import (
    CHANNEL_PATH,
    HEARTBEAT_SECONDS,
    MAX_FRAME_BYTES,
    MISSED_HEARTBEATS,
    FrameRejected,
    new_nonce,
    sign_request,
    verify_frame,
)
from gatehouse_contract.channel_tls import client_context
from gatehouse_contract.connecting import GrantsAnswered, GrantsAsked
from gatehouse_contract.connection_tests import (
    START_MARGIN_SECONDS,
    TEST_NOT_STARTED,
    Failed,
    Problem,
    ProxyRefused,
    ReplicaTestOutcome,
    ReplicaTestRequest,
)
from gatehouse_contract.frames import (
    ACTIVITY_FEATURE,
    CURSOR_FEATURE,
    FEATURES_HEADER,
    FLEET_FEATURE,
    GRANTS_FEATURE,
    Ack,
    ConnectionTestFrame,
    ConnectionTestResult,
    Delta,
    Gather,
    Gathered,
    Goodbye,
    Heartbeat,
    Nack,
    RenewalsBounded,
    Resync,
    Snapshot,
    Throttled,
    Unreadable,
    read_operator_frame,
)
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import namespace_of
from gatehouse_proxy.errors import ProxyError, ProxyException
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.table.routing_table import RoutingTable, TableGap, TableRejected
from gatehouse_proxy.table.test_slots import ConnectionTestRun, ConnectionTestSlots

log = logging.getLogger("gatehouse.proxy.table")
# The longest wait between attempts to reach the operator.
RECONNECT_CAP_SECONDS = 2.0

# Runs a test, calling the second argument just before its request goes upstream.
TestRunner = Callable[[ReplicaTestRequest, Callable[[], None]], Awaitable[ReplicaTestOutcome]]
# Answers a step of the connect flow (gatehouse_proxy.credentials.connecting).
GrantsAnswerer = Callable[[GrantsAsked], Awaitable[GrantsAnswered]]


@dataclass(frozen=True)
class Answers:
    """What a replica answers the operator besides tables: its connection tests; what apps did,
    for Gather frames, and the connect flow's steps, for GrantsAsked frames (without either,
    the replica says it does not answer them, and is not asked)."""

    run_test: TestRunner
    activity: Activity | None = None
    grants: GrantsAnswerer | None = None


class TableStore:
    def __init__(self, on_install: Callable[[RoutingTable], None] | None = None) -> None:
        self.current: RoutingTable | None = None
        self.installed_at = 0.0  # time.monotonic() of the last install
        self.on_install = on_install

    def install(self, table: RoutingTable) -> None:
        """Installs a table no older than the current one; an older one (a replay) is refused."""
        if self.current is not None and table.version < self.current.version:
            raise TableRejected(
                f"table {table.version} is older than the installed {self.current.version} "
                "(a replay?)"
            )
        self.current = table
        self.installed_at = time.monotonic()
        if self.on_install is not None:
            self.on_install(table)

    def age(self) -> float:
        """Seconds since the current table was installed."""
        return time.monotonic() - self.installed_at


class FeedBroken(ProxyException):
    """The stream broke a rule of the channel; the feed opens it again."""


@dataclass
class FeedState:
    connected: bool = False
    last_error: str = ""
    # time.monotonic() of the last frame (of any kind) from the operator.
    last_message_at: float = 0.0
    snapshots: int = 0
    deltas: int = 0
    rejected: int = 0
    bytes_received: int = 0  # every frame from the operator, as it arrived
    # Replicas (workers count one each) the operator counts as serving: this worker's share of
    # each quota while the shared store is away. 0 until the operator says.
    fleet: int = 0

    def describe(self) -> dict[str, object]:
        silent = time.monotonic() - self.last_message_at if self.last_message_at else None
        return {
            "state": "connected" if self.connected else "reconnecting",
            "lastError": self.last_error,
            "secondsSinceLastMessage": None if silent is None else round(silent, 1),
            "snapshots": self.snapshots,
            "deltas": self.deltas,
            "rejected": self.rejected,
            "bytesReceived": self.bytes_received,
            "fleet": self.fleet,
        }


class TableFeed:
    """Follows the operator's channel until cancelled.

    The feed has a session of its own: the upstream session's resolver refuses private
    addresses, and the operator's Service is one. Only the installation chooses this URL.
    """

    def __init__(
        self,
        store: TableStore,
        operator_url: str,
        keyring: KeyringFile,
        replica: str,
        answers: Answers,
    ) -> None:
        self.store = store
        self.url = operator_url + CHANNEL_PATH
        self.keyring = keyring
        self.replica = replica
        self.run_test = answers.run_test
        self.activity = answers.activity
        self.grants = answers.grants
        # Shared by the feed's streams: a reconnect cancels its tests, and their places with them.
        self.test_slots = ConnectionTestSlots()
        self.state = FeedState()
        # The open stream's socket, for what a replica tells the operator unasked.
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    async def tell(self, message: Throttled | RenewalsBounded) -> None:
        """Tells the operator, if a stream is open: a notice missed while it is not is not
        worth holding (the pause it reports ends by itself)."""
        ws = self._ws
        if ws is None or ws.closed:
            return
        with contextlib.suppress(ConnectionError):
            await ws.send_str(message.model_dump_json())

    async def run(self) -> None:
        async with aiohttp.ClientSession(trust_env=False) as session:
            await self._retry_forever(session)

    async def _retry_forever(self, session: aiohttp.ClientSession) -> None:
        delay = 0.2
        while True:
            try:
                await _Stream(self, session).follow()
            except Exception as error:  # any: no failure may end the feed
                self._failed(error, delay)
            if self.state.connected:  # it had been up: try again quickly
                delay = 0.2
            self.state.connected = False
            # Jittered, so that replicas cut off together do not call back in step; capped low,
            # so that a new leader (the operator fails over in seconds) is found within 2 s.
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))  # noqa: S311 (not a secret)
            delay = min(delay * 2, RECONNECT_CAP_SECONDS)

    def _failed(self, error: Exception, delay: float) -> None:
        cause = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if cause != self.state.last_error:
            # Once per distinct cause: the state in /readyz says that it goes on.
            log.error(
                "table channel to %s failed (%s); retrying with backoff from %.1fs",
                self.url,
                cause,
                delay,
                exc_info=not isinstance(
                    error, aiohttp.ClientError | OSError | FeedBroken | TimeoutError
                ),
            )
        self.state.last_error = cause


class _Stream:
    """One connection of the feed: its nonce, its frame sequence, its connection tests."""

    def __init__(self, feed: TableFeed, session: aiohttp.ClientSession) -> None:
        self.feed = feed
        self.session = session
        self.nonce = new_nonce()
        self.next_seq = 1
        # After a gap, deltas are ignored until the snapshot asked for arrives.
        self.awaiting_snapshot = True
        self.snapshot_parts: list[Snapshot] = []
        # The tests this stream brought, by id, until answered.
        self.tests: dict[str, tuple[asyncio.Task[None], ConnectionTestRun]] = {}
        # Gathers being answered; they end with the stream.
        self.gathers: set[asyncio.Task[None]] = set()

    async def follow(self) -> None:
        feed = self.feed
        keyring = feed.keyring.current()
        answers = [ACTIVITY_FEATURE, CURSOR_FEATURE] if feed.activity is not None else []
        features = [FLEET_FEATURE, *answers, *([GRANTS_FEATURE] if feed.grants else [])]
        try:
            async with self.session.ws_connect(
                feed.url,
                headers={
                    "Authorization": sign_request(keyring, feed.replica, self.nonce),
                    "X-Gatehouse-Replica": feed.replica,
                    FEATURES_HEADER: ",".join(features),
                },
                ssl=client_context(keyring),
                max_msg_size=MAX_FRAME_BYTES,
                # A dead operator shows as missing heartbeats.
                timeout=aiohttp.ClientWSTimeout(
                    ws_receive=HEARTBEAT_SECONDS * MISSED_HEARTBEATS, ws_close=5
                ),
                autoping=True,
            ) as ws:
                feed.state.connected = True
                feed._ws = ws
                try:
                    async for message in ws:
                        if message.type is not aiohttp.WSMsgType.BINARY:
                            raise FeedBroken(f"the operator sent a {message.type.name} message")
                        await self._receive(ws, message.data)
                except asyncio.CancelledError:
                    # Shutting down: tests not sent yet are the operator's to send elsewhere;
                    # then goodbye, so the operator stops counting this replica at once instead
                    # of reporting its changes pending for a grace period.
                    with contextlib.suppress(ConnectionError):
                        await self._hand_back_unsent(ws)
                        await ws.send_str(Goodbye().model_dump_json())
                    await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"stopping")
                    raise
                raise FeedBroken(f"the operator closed the stream ({ws.close_code})")
        except aiohttp.WSServerHandshakeError as error:
            raise FeedBroken(f"the operator refused the stream: HTTP {error.status}") from None
        finally:
            feed._ws = None
            for task, _ in self.tests.values():
                task.cancel()
            for gathering in self.gathers:
                gathering.cancel()

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse, signed: bytes) -> None:
        feed = self.feed
        feed.state.bytes_received += len(signed)
        try:
            key_id, payload = verify_frame(
                feed.keyring.current(), self.nonce, self.next_seq, signed
            )
        except FrameRejected as error:
            # Nothing on a stream that carried a false frame can be trusted: open a new one.
            feed.state.rejected += 1
            raise FeedBroken(f"rejected a frame: {error}") from None
        self.next_seq += 1
        feed.state.last_message_at = time.monotonic()
        try:
            frame = read_operator_frame(payload)
        except Unreadable as unreadable:
            await self._unreadable(ws, unreadable)
            return
        if isinstance(frame, Heartbeat):
            if frame.replicas:
                feed.state.fleet = frame.replicas
            await self._ack(ws)
        elif isinstance(frame, Snapshot):
            try:
                whole = self._assemble(frame)
            except TableGap as gap:
                await self._resync(ws, str(gap))
                return
            if whole is not None:
                await self._install(ws, whole, key_id)
        elif isinstance(frame, Delta):
            if not self.awaiting_snapshot:
                await self._install(ws, frame, key_id)
        elif isinstance(frame, Gather):
            self._gather(ws, frame)
        elif isinstance(frame, GrantsAsked):
            self._grants(ws, frame)
        else:
            self._test(ws, frame)

    async def _unreadable(
        self, ws: aiohttp.ClientWebSocketResponse, unreadable: Unreadable
    ) -> None:
        """A table that does not parse is refused (and said so); a test that does not parse
        fails with why; anything else makes the replica start over from a snapshot."""
        if unreadable.kind in ("snapshot", "delta"):
            if unreadable.kind == "snapshot" or not self.awaiting_snapshot:
                await self._refuse(ws, 0, f"malformed {unreadable.kind}: {unreadable}")
        elif unreadable.kind == "probe" and unreadable.test_id:
            failed = Failed(error=Problem.of("invalid_request", str(unreadable)))
            await self._answer(ws, unreadable.test_id, failed)
        elif unreadable.kind == "gather" and unreadable.test_id:
            log.error("the operator sent a gather this replica cannot read: %s", unreadable)
            with contextlib.suppress(ConnectionError):
                await ws.send_str(Gathered(id=unreadable.test_id).model_dump_json())
        else:
            self.feed.state.rejected += 1
            log.error("the operator sent a message this replica cannot read")
            await self._resync(ws, "an unreadable message")

    def _assemble(self, part: Snapshot) -> Snapshot | None:
        """The whole snapshot once its last part arrived; parts out of order start it over."""
        if part.part == 0:
            self.snapshot_parts = []
        if part.part != len(self.snapshot_parts) or (
            self.snapshot_parts and part.version != self.snapshot_parts[0].version
        ):
            self.snapshot_parts = []
            raise TableGap(f"snapshot part {part.part} of {part.parts} arrived out of order")
        self.snapshot_parts.append(part)
        if part.part < part.parts - 1:
            return None
        collected, self.snapshot_parts = self.snapshot_parts, []
        if len(collected) == 1:
            return part
        return part.model_copy(
            update={
                "connections": tuple(e for p in collected for e in p.connections),
                "apps": tuple(e for p in collected for e in p.apps),
            }
        )

    async def _resync(self, ws: aiohttp.ClientWebSocketResponse, reason: str) -> None:
        log.warning("asking the operator for a snapshot: %s", reason)
        self.awaiting_snapshot = True
        await ws.send_str(Resync(reason=reason[:1000]).model_dump_json())

    async def _ack(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        current = self.feed.store.current
        await ws.send_str(Ack(version=current.version if current else 0).model_dump_json())

    async def _refuse(self, ws: aiohttp.ClientWebSocketResponse, version: int, reason: str) -> None:
        current = self.feed.store.current
        self.feed.state.rejected += 1
        log.error("refused routing table %s: %s", version, reason)
        refusal = Nack(
            version=version, installed=current.version if current else 0, reason=reason[:1000]
        )
        await ws.send_str(refusal.model_dump_json())

    async def _install(
        self, ws: aiohttp.ClientWebSocketResponse, frame: Snapshot | Delta, key_id: str
    ) -> None:
        feed = self.feed
        current = feed.store.current
        snapshot = isinstance(frame, Snapshot)
        try:
            if isinstance(frame, Snapshot):
                table = RoutingTable.from_snapshot(frame, key_id)
            elif current is None:
                raise TableGap(f"a delta to {frame.version} arrived before any snapshot")
            else:
                table = current.with_delta(frame, key_id)
            feed.store.install(table)
        except TableGap as gap:
            await self._resync(ws, str(gap))
            return
        except TableRejected as error:
            await self._refuse(ws, frame.version, str(error))
            return
        self.awaiting_snapshot = False
        if snapshot:
            feed.state.snapshots += 1
            log.info(
                "routing table %d installed from a snapshot: %d connections, %d apps",
                table.version,
                len(table.connections),
                len(table.apps),
            )
        else:
            feed.state.deltas += 1
        feed.state.last_error = ""
        await self._ack(ws)

    async def _answer(
        self, ws: aiohttp.ClientWebSocketResponse, test_id: str, outcome: ReplicaTestOutcome
    ) -> None:
        # The stream may have closed meanwhile; the operator then retries elsewhere.
        with contextlib.suppress(ConnectionError):
            await ws.send_str(ConnectionTestResult(id=test_id, result=outcome).model_dump_json())

    def _gather(self, ws: aiohttp.ClientWebSocketResponse, gather: Gather) -> None:
        activity = self.feed.activity
        if activity is None:  # it said it does not answer: an operator that asked anyway
            return

        async def answer() -> None:
            try:
                # The stream may close meanwhile: the operator then counts this replica silent.
                with contextlib.suppress(ConnectionError):
                    await activity.answer(gather, ws.send_str)
            except Exception:  # logged here: a task's failure would otherwise go unseen
                log.exception("answering the operator's gather failed")

        task = asyncio.create_task(answer(), name="gather")
        self.gathers.add(task)
        task.add_done_callback(self.gathers.discard)

    def _grants(self, ws: aiohttp.ClientWebSocketResponse, asked: GrantsAsked) -> None:
        grants = self.feed.grants
        if grants is None:  # it said it does not answer: an operator that asked anyway
            return

        async def answer() -> None:
            try:
                answered = await grants(asked)
            except Exception:  # said to the operator, whose page then says it failed
                log.exception("answering the operator's grants frame failed")
                problem = Problem(code="internal", message="the proxy failed")
                answered = GrantsAnswered(id=asked.id, problem=problem)
            # The stream may close meanwhile: the operator's page then says so.
            with contextlib.suppress(ConnectionError):
                await ws.send_str(answered.model_dump_json())

        task = asyncio.create_task(answer(), name="grants")
        self.gathers.add(task)
        task.add_done_callback(self.gathers.discard)

    def _test(self, ws: aiohttp.ClientWebSocketResponse, frame: ConnectionTestFrame) -> None:
        request = frame.request
        deadline = asyncio.get_running_loop().time() + request.within_seconds
        # Started only while the connection's own timeout still ends the test before its
        # deadline: cancelled in flight, its request could not be sent again.
        needs = self._upstream_seconds(request) + START_MARGIN_SECONDS
        run = ConnectionTestRun(deadline - needs, deadline)

        async def test() -> None:
            namespace = namespace_of(request.connection)
            outcome: ReplicaTestOutcome
            try:
                async with self.feed.test_slots.slot(namespace, run):
                    outcome = await self.feed.run_test(request, run.sending)
            except ProxyError as refused:
                outcome = ProxyRefused(refused=Problem.of(refused.code, refused.message))
            except Exception:  # said to the operator, whose test then fails with it
                log.exception("a connection test failed inside the proxy")
                outcome = Failed(error=Problem(code="internal", message="the proxy failed"))
            self.tests.pop(frame.id, None)
            await self._answer(ws, frame.id, outcome)

        self.tests[frame.id] = (asyncio.create_task(test(), name="connection-test"), run)

    def _upstream_seconds(self, request: ReplicaTestRequest) -> float:
        """How long the test's connection gives the upstream (0 for one not routed: refused at
        once)."""
        table = self.feed.store.current
        route = request.draft or (table.connections.get(request.connection) if table else None)
        return route.limits.timeout_seconds if route is not None else 0.0

    async def _hand_back_unsent(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Tells the operator which tests this stopping replica never sent, so it sends them to
        another; those it sent end with it, and the operator does not send them again."""
        unsent = [(test_id, task) for test_id, (task, run) in self.tests.items() if not run.sent]
        for test_id, task in unsent:
            # Cancelled before the first await below: none of them can start meanwhile.
            task.cancel()
            del self.tests[test_id]
        stopping = Problem(code=TEST_NOT_STARTED, message="the proxy replica is stopping")
        for test_id, _ in unsent:
            await self._answer(ws, test_id, ProxyRefused(refused=stopping))
