"""The operator's end of the table channel with real proxy feeds, in one process on 127.0.0.1.

Journal, channel server (aiohttp, TLS from the keyring) and TableFeeds are the real ones; the
cluster is not involved (the end-to-end suite runs the same with the operator and proxies as
processes against a real API server).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.exposition import generate_latest

from gatehouse_contract.activity import RequestsQuery
from gatehouse_contract.channel import CHANNEL_PATH, new_nonce, sign_request
from gatehouse_contract.channel_tls import client_context
from gatehouse_contract.connecting import GrantsAnswered, GrantsAsked
from gatehouse_contract.connection_tests import (
    Answered,
    ConnectionTestAnswer,
    ProxyRefused,
    ReplicaTestOutcome,
    ReplicaTestRequest,
)
from gatehouse_contract.frames import Delta, Snapshot, Throttled, read_operator_frame
from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_contract.routes import AppRoute, ConnectionRoute, Credential, Limits
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.kube import Kube
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table import channel as table_channel
from gatehouse_operator.table import journal as table_journal
from gatehouse_operator.table import metrics
from gatehouse_operator.table.channel import NoReplica, OutcomeUnknown, TableChannel
from gatehouse_operator.table.gather import Busy, Gatherer
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout
from gatehouse_operator.table.store import RouteStore
from gatehouse_operator.table.throttles import Throttles
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.table.feed import Answers, GrantsAnswerer, TableFeed, TableStore
from gatehouse_proxy.table.routing_table import RoutingTable
from tests.operator.test_table_budget import SPEC
from tests.operator.test_throttles import Posted
from tests.proxy.fetches import Recorder

LIMITS = Limits(
    timeout_seconds=30, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
)


def connection(name: str, path: str = "/") -> ConnectionRoute:
    return ConnectionRoute(
        key=f"shop/{name}",
        uid=f"uid-{name}",
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=(path,),
        credential=Credential(type="none"),
        limits=LIMITS,
    )


ANSWERED = Answered(
    answered=ConnectionTestAnswer(status_code=200, content_type="", body="", size_bytes=0)
)


def body(name: str) -> Resource:
    return resource_of(
        {"metadata": {"namespace": "shop", "name": name, "uid": f"uid-{name}"}, "spec": {}}
    )


def app(name: str, links: dict[str, str]) -> AppRoute:
    return AppRoute(key=f"shop/DataApp/{name}", token_sha256=name * 4, links=links)


def test_deltas_replayed_on_a_snapshot_make_the_same_table() -> None:
    routes, journal = RouteStore(), Journal()
    for index in range(50):
        routes.put_connection(connection(f"c{index}"), SPEC, body(f"c{index}"))
    routes.put_app(app("a", {"x": "shop/c1"}), body("a"), seen_as="a")
    first = journal.flush(routes)
    assert first is not None
    replica = RoutingTable.from_snapshot(_snapshot(journal.snapshot()[0]), "k1")
    routes.put_connection(connection("c1", "/v2/"), SPEC, body("c1"))
    routes.drop_connection("shop/c2")
    routes.put_connection(connection("c3"), SPEC, body("c3"))  # unchanged: not in the delta
    routes.drop_app("shop/DataApp/a", seen_as="a")
    changed = journal.flush(routes)
    assert changed is not None
    assert set(changed.changed) == {
        ("connection", "shop/c1"),
        ("connection", "shop/c2"),
        ("app", "shop/DataApp/a"),
    }
    assert journal.flush(routes) is None  # nothing changed since
    replica = replica.with_delta(_delta(changed.payload), "k1")
    fresh = RoutingTable.from_snapshot(_snapshot(journal.snapshot()[0]), "k1")
    assert replica.digest == fresh.digest == journal.digest
    assert replica.connections == fresh.connections
    assert replica.apps == fresh.apps == {}
    assert journal.since(first.version) == [changed]
    assert journal.since(first.version - 1) is None  # before the history: a snapshot


def test_the_journals_bytes_are_the_contracts_frames() -> None:
    """The journal writes snapshot and delta bytes by hand (each route serialised once, when it
    changes); every field they carry is one the typed frames have, and none is missing."""
    routes, journal = RouteStore(), Journal()
    routes.put_connection(connection("c1"), SPEC, body("c1"))
    routes.put_app(app("a", {"x": "shop/c1"}), body("a"), seen_as="a")
    assert journal.flush(routes) is not None
    routes.put_connection(connection("c2", "/v2/"), SPEC, body("c2"))
    routes.drop_connection("shop/c1")
    routes.drop_app("shop/DataApp/a", seen_as="a")
    delta = journal.flush(routes)
    assert delta is not None
    for payload in (*journal.snapshot(), delta.payload):
        frame = read_operator_frame(payload)
        assert json.loads(payload).keys() == json.loads(frame.model_dump_json()).keys()
        assert read_operator_frame(frame.model_dump_json().encode()) == frame
    snapshot = _snapshot(journal.snapshot()[0])
    assert [entry.route for entry in snapshot.connections] == [connection("c2", "/v2/")]
    assert _delta(delta.payload).removed_apps == ("shop/DataApp/a",)


def _snapshot(payload: bytes) -> Snapshot:
    frame = read_operator_frame(payload)
    assert isinstance(frame, Snapshot)
    return frame


def _delta(payload: bytes) -> Delta:
    frame = read_operator_frame(payload)
    assert isinstance(frame, Delta)
    return frame


class Channel:
    """A TableChannel serving on 127.0.0.1, and the feeds of replicas following it."""

    def __init__(self, tmp_path: Path, keyring: Keyring) -> None:
        self.keyring_path = tmp_path / "keyring.json"
        self.keyring_path.write_text(keyring.dump())
        self.routes = RouteStore()
        self.journal = Journal()
        self.replicas = Replicas(grace_seconds=30, on_change=lambda: None)
        self.server = TableChannel(
            KeyringFile(self.keyring_path), self.routes, self.journal, self.replicas
        )
        self.url = ""
        self.feeds: dict[str, tuple[TableFeed, asyncio.Task[None]]] = {}
        self.tests: list[ReplicaTestRequest] = []

    async def run_test(
        self, request: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ReplicaTestOutcome:
        self.tests.append(request)
        if request.path == "/holds-its-place":  # waits for a concurrency place, say
            await asyncio.Event().wait()
        sending()
        if request.path == "/upstream-is-slow":
            await asyncio.Event().wait()
        if request.path == "/takes-a-second":
            await asyncio.sleep(1)
        return ANSWERED

    def fleet(self, name: str) -> int:
        """The fleet size the replica was told (what its quota leases are sized by)."""
        return self.feeds[name][0].state.fleet

    def start_replica(
        self, name: str, activity: Activity | None = None, grants: GrantsAnswerer | None = None
    ) -> TableStore:
        store = TableStore()
        answers = Answers(self.run_test, activity, grants)
        feed = TableFeed(store, self.url, KeyringFile(self.keyring_path), name, answers)
        self.feeds[name] = (feed, asyncio.create_task(feed.run()))
        return store

    async def stop_replica(self, name: str) -> None:
        _, task = self.feeds.pop(name)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Channel]:
    channel = Channel(tmp_path, Keyring.generate())
    runner = web.AppRunner(channel.server.create_app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=channel.server.tls.context).start()
    channel.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield channel
    finally:
        for name in list(channel.feeds):
            await channel.stop_replica(name)
        await channel.server.close()
        await runner.cleanup()


async def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_replicas_receive_deltas_acknowledge_them_and_run_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_journal, "SNAPSHOT_PART_BYTES", 10_000)

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            routes, journal, replicas = channel.routes, channel.journal, channel.replicas
            for index in range(200):
                routes.put_connection(connection(f"c{index}"), SPEC, body(f"c{index}"))
            channel.server.flush()
            assert len(journal.snapshot()) > 5  # in parts
            first = channel.start_replica("proxy-a")
            second = channel.start_replica("proxy-b")
            await eventually(lambda: replicas.floor() == (journal.version, 2), "both synced")
            assert first.current is not None
            assert len(first.current.connections) == 200

            before = journal.version
            routes.put_connection(connection("c7", "/v2/"), SPEC, body("c7"))
            channel.server.schedule_flush()
            await eventually(
                lambda: journal.version > before and replicas.floor() == (journal.version, 2),
                "the delta",
            )
            for store in (first, second):
                assert store.current is not None
                assert store.current.connections["shop/c7"].allowed_paths == ("/v2/",)
            assert len(journal.history[-1].payload) < 1024  # the change, not the table

            test = ReplicaTestRequest(
                connection="shop/c7", method="GET", path="/v2/x", min_table_version=1
            )
            assert await channel.server.run_test(test, within=5) == ANSWERED
            # The operator's patience travels with the test (the replica drops it after).
            assert channel.tests == [test.model_copy(update={"within_seconds": 5})]

            async def no_writes(*_: Any) -> None:
                raise AssertionError("nothing is waiting")

            rollout = Rollout(routes, journal, replicas, no_writes)
            status = StatusWriter(cast(Kube, None))
            found = metrics.registry(journal, replicas, rollout, status, channel.server.dropped)
            exposed = generate_latest(found).decode()
            assert "gatehouse_operator_proxy_replicas_current 2.0" in exposed
            assert 'gatehouse_operator_table_entries{kind="connection"} 200.0' in exposed
            assert "gatehouse_operator_resources_pending 0.0" in exposed

            await channel.stop_replica("proxy-b")  # a Pod shutting down says goodbye
            await eventually(lambda: replicas.floor()[1] == 1, "proxy-b gone at once")

    asyncio.run(scenario())


def test_replicas_are_told_the_fleet_as_it_changes_not_at_the_next_quiet_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until told, a replica asks the shared store for every request: it must not wait for a
    heartbeat, which comes only after a quiet HEARTBEAT_SECONDS (never, while tables change)."""
    monkeypatch.setattr(table_channel, "HEARTBEAT_SECONDS", 60.0)

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            channel.routes.put_connection(connection("c1"), SPEC, body("c1"))
            channel.server.flush()
            channel.start_replica("proxy-a")
            await eventually(lambda: channel.fleet("proxy-a") == 1, "proxy-a told 1")
            channel.start_replica("proxy-b")
            await eventually(
                lambda: channel.fleet("proxy-a") == channel.fleet("proxy-b") == 2, "both told 2"
            )
            await channel.stop_replica("proxy-b")  # says goodbye: no longer counted
            await eventually(lambda: channel.fleet("proxy-a") == 1, "proxy-a told 1 again")

    asyncio.run(scenario())


def test_a_test_is_sent_elsewhere_only_when_its_replica_never_sent_it(tmp_path: Path) -> None:
    """A replica that stops hands back the tests it had not sent (the operator sends them to
    another); of one it had sent, the operator knows only that it may have reached the
    upstream, and never sends it again. So too for a replica whose stream breaks."""

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            channel.routes.put_connection(connection("c"), SPEC, body("c"))
            channel.server.flush()
            channel.start_replica("proxy-a")
            await eventually(lambda: channel.replicas.floor()[1] == 1, "the replica synced")

            def test(path: str) -> asyncio.Task[ReplicaTestOutcome]:
                request = ReplicaTestRequest(connection="shop/c", method="GET", path=path)
                return asyncio.create_task(channel.server.run_test(request, within=60))

            unsent, sent = test("/holds-its-place"), test("/upstream-is-slow")
            await eventually(lambda: len(channel.tests) == 2, "both tests on the replica")
            await channel.stop_replica("proxy-a")
            handed_back = await unsent
            assert isinstance(handed_back, ProxyRefused), handed_back
            assert handed_back.refused.code == "test_not_started"
            with pytest.raises(OutcomeUnknown, match="went away during the test"):
                await sent

            # A stream that breaks (no goodbye): neither is known to be unsent.
            channel.start_replica("proxy-b")
            await eventually(lambda: "proxy-b" in channel.server.sessions, "proxy-b connected")
            broken = [test("/holds-its-place"), test("/upstream-is-slow")]
            await eventually(lambda: len(channel.tests) == 4, "both tests on proxy-b")
            await channel.server.sessions["proxy-b"].ws.close()
            for task in broken:
                with pytest.raises(OutcomeUnknown):
                    await task

    asyncio.run(scenario())


def test_a_replica_that_broke_off_counts_until_its_grace_ends(tmp_path: Path) -> None:
    replicas = Replicas(grace_seconds=0.2, on_change=lambda: None)
    a, b = replicas.connected("a"), replicas.connected("b")
    replicas.acknowledged(a, 5)
    replicas.acknowledged(b, 4)
    assert replicas.floor() == (4, 2)
    assert replicas.holding(5) == 1
    replicas.disconnected(b, goodbye=False)
    assert replicas.floor() == (4, 2)  # it still serves version 4
    time.sleep(0.3)
    assert replicas.floor() == (5, 1)
    fresh = replicas.connected("c")
    assert replicas.floor() == (5, 1)  # not counted before it holds a table
    replicas.acknowledged(fresh, 5)
    assert replicas.floor() == (5, 2)


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        ("Bearer static-token", "scheme must be Gatehouse-Channel"),
        ("stale", "from the operator's clock"),
        ("other-keyring", "signed with a key the operator does not have"),
        ("replayed", "nonce was used before"),
        ("non-ascii", "signature does not verify"),
    ],
)
def test_opening_requests_that_do_not_authenticate_are_refused(
    tmp_path: Path, authorization: str, message: str
) -> None:
    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            keyring = Keyring.parse(channel.keyring_path.read_text())
            nonce = new_nonce()
            headers = {"X-Gatehouse-Replica": "intruder"}
            if authorization == "stale":
                headers["Authorization"] = sign_request(
                    keyring, "intruder", nonce, time.time() - 600
                )
            elif authorization == "other-keyring":
                headers["Authorization"] = sign_request(Keyring.generate("x"), "intruder", nonce)
            elif authorization == "replayed":
                headers["Authorization"] = sign_request(keyring, "intruder", nonce)
            elif authorization == "non-ascii":
                signed = sign_request(keyring, "intruder", nonce)
                headers["Authorization"] = signed[: signed.index("sig=") + 4] + "é" * 64
            else:
                headers["Authorization"] = authorization
            async with aiohttp.ClientSession() as session:
                if authorization == "replayed":
                    async with session.ws_connect(
                        channel.url + CHANNEL_PATH, headers=headers, ssl=client_context(keyring)
                    ):
                        pass
                async with session.get(
                    channel.url + CHANNEL_PATH, headers=headers, ssl=client_context(keyring)
                ) as reply:
                    assert reply.status == 401
                    assert message in (await reply.json())["error"]["message"]

    asyncio.run(scenario())


def test_only_the_keyrings_certificate_is_trusted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path) as channel, aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(
                    channel.url + "/healthz", ssl=client_context(Keyring.generate("other"))
                )

    asyncio.run(scenario())


def test_a_failing_sender_ends_the_stream_and_the_replica_resyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without this, the replica would hear nothing until its heartbeat timeout (15 s)."""

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            channel.routes.put_connection(connection("a"), SPEC, body("a"))
            channel.server.flush()
            real = channel.journal.snapshot
            calls: list[int] = []

            def snapshot_failing_once() -> list[bytes]:
                calls.append(1)
                if len(calls) == 1:
                    raise RuntimeError("a bug in the sender")
                return real()

            monkeypatch.setattr(channel.journal, "snapshot", snapshot_failing_once)
            store = channel.start_replica("proxy-a")
            # eventually() gives up after 10 s, before the replica's 15 s heartbeat timeout.
            await eventually(lambda: store.current is not None, "the second snapshot")
            assert len(calls) == 2

    asyncio.run(scenario())


def test_the_operator_gathers_recent_requests_and_usage_from_the_replicas_that_answer(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            gatherer = Gatherer(channel.server)
            first, second = Activity("proxy-a"), Activity("proxy-b")
            records = {activity: Recorder(activity).record for activity in (first, second)}
            for index, activity in enumerate((first, second, first)):
                records[activity](
                    "shop/DataApp/a", "shop/c", "GET", f"/{index}".encode(), b"key=secret",
                    200, "ok", 0.02, 0, 10, None,
                )  # fmt: skip
                await asyncio.sleep(0.01)
            records[second](
                "other/DataApp/b", "other/c", "GET", b"/x", b"", 200, "ok", 0.1, 0, 1, None
            )
            channel.start_replica("proxy-a", first)
            channel.start_replica("proxy-b", second)
            channel.start_replica("proxy-old")  # an earlier release: never asked
            channel.server.flush()
            await eventually(lambda: len(channel.server.sessions) == 3, "three replicas")

            found = await gatherer.recent("shop", RequestsQuery(app="shop/DataApp/a", limit=2))
            assert (found.asked, found.answered, found.unable) == (2, 2, 1)
            assert [(replica, record.path) for replica, record in found.requests] == [
                ("proxy-a", "/2?key=*"),
                ("proxy-b", "/1?key=*"),
            ]

            await gatherer.usage("shop")  # the namespace's only: the other's stays counted
            usage = channel.server.usage
            (buckets,) = usage.of_connection("shop/c", "hour").values()
            assert buckets[-1].requests == 3
            assert usage.of_connection("other/c", "hour") == {}
            assert second.usage.rows == 1
            await gatherer.collect_usage()
            assert second.usage.rows == 0
            assert usage.of_connection("other/c", "hour")

            # Past its bounds a namespace is refused rather than queued.
            held = [asyncio.ensure_future(gatherer.usage("shop")) for _ in range(2)]
            await asyncio.sleep(0)
            with pytest.raises(Busy):
                await gatherer.usage("shop")
            await asyncio.gather(*held)

    asyncio.run(scenario())


def _dropped(channel: Channel) -> str:
    async def no_writes(*_: Any) -> None:
        raise AssertionError("nothing is waiting")

    journal, replicas = channel.journal, channel.replicas
    rollout = Rollout(channel.routes, journal, replicas, no_writes)
    status = StatusWriter(cast(Kube, None))
    found = metrics.registry(journal, replicas, rollout, status, channel.server.dropped)
    exposed = generate_latest(found).decode()
    return "\n".join(
        line
        for line in exposed.splitlines()
        if line.startswith("gatehouse_operator_replica_frames_dropped_total{")
    )


def test_a_throttled_frame_past_its_bounds_is_refused_and_the_stream_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """R4-1: a replica of the last release told the vendor's 12-digit Retry-After as it came,
    and the operator's Event date overflowed inside the frame handler: the stream dropped, the
    replica took the whole table again, and another tenant's test on it ended OutcomeUnknown."""

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            posted = Posted()
            channel.server.throttles = Throttles(channel.routes, posted)  # type: ignore[arg-type]
            channel.routes.put_connection(connection("c"), SPEC, body("c"))
            channel.server.flush()
            store = channel.start_replica("proxy-a")
            await eventually(lambda: channel.replicas.floor()[1] == 1, "the replica synced")
            feed = channel.feeds["proxy-a"][0]
            session = channel.server.sessions["proxy-a"]
            request = ReplicaTestRequest(connection="shop/c", method="GET", path="/takes-a-second")
            running = asyncio.create_task(channel.server.run_test(request, within=30))
            await eventually(lambda: len(channel.tests) == 1, "the test on the replica")

            assert feed._ws is not None
            await feed._ws.send_str(
                '{"type":"throttled","connection":"shop/c","status":429,"seconds":999999999999}'
            )
            await feed.tell(Throttled(connection="shop/c", status=429, seconds=3600))
            assert await running == ANSWERED  # not OutcomeUnknown
            await eventually(lambda: bool(posted.events), "the Event of the bounded frame")
            assert channel.server.sessions["proxy-a"] is session  # the same stream
            assert feed.state.snapshots == 1  # no reconnect, no second table
            assert store.current is not None
            (event,) = posted.events
            assert "Retry-After 3600s" in event[1]
            assert _dropped(channel) == (
                "gatehouse_operator_replica_frames_dropped_total"
                '{reason="unreadable",type="throttled"} 1.0'
            )
        assert "seconds: Input should be less than or equal to 3600" in caplog.text

    asyncio.run(scenario())


def test_a_handler_failing_on_one_frame_drops_that_frame_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in a handler (or a value it cannot take) costs the frame it was handling: the
    stream, the replica's running tests and its later frames go on."""

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            channel.routes.put_connection(connection("c"), SPEC, body("c"))
            channel.server.flush()
            channel.start_replica("proxy-a")
            await eventually(lambda: channel.replicas.floor()[1] == 1, "the replica synced")
            feed = channel.feeds["proxy-a"][0]
            session = channel.server.sessions["proxy-a"]
            heard: list[Throttled] = []

            def heard_once_then_a_bug(said: Throttled) -> None:
                heard.append(said)
                if len(heard) == 1:
                    raise ValueError("a bug, quoting the frame: SECRET-CANARY")

            monkeypatch.setattr(channel.server.throttles, "heard", heard_once_then_a_bug)
            request = ReplicaTestRequest(connection="shop/c", method="GET", path="/takes-a-second")
            running = asyncio.create_task(channel.server.run_test(request, within=30))
            await eventually(lambda: len(channel.tests) == 1, "the test on the replica")
            for _ in range(2):
                await feed.tell(Throttled(connection="shop/c", status=503, seconds=60))
            assert await running == ANSWERED
            await eventually(lambda: len(heard) == 2, "the frame after the failed one")
            assert channel.server.sessions["proxy-a"] is session
            assert feed.state.snapshots == 1
            assert _dropped(channel) == (
                "gatehouse_operator_replica_frames_dropped_total"
                '{reason="failed",type="throttled"} 1.0'
            )
            # A new test still runs on the replica.
            assert await channel.server.run_test(request, within=30) == ANSWERED
        logged = [r.getMessage() for r in caplog.records if "dropped it" in r.getMessage()]
        assert logged == [
            "handling a throttled frame from proxy replica proxy-a failed "
            f"(ValueError at {Path(__file__).name}:{_line_of('SECRET-CANARY')}); dropped it"
        ]
        assert "SECRET-CANARY" not in caplog.text

    asyncio.run(scenario())


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line and "raise" in line)


def test_a_follower_is_given_every_replicas_records_once_past_its_page(tmp_path: Path) -> None:
    """``gatehouse requests -f`` through the operator: a first page of ``limit``, then each
    replica's records after the cursor's position of it, however many, each once; a replica
    that comes in while following is asked from its first record."""

    async def scenario() -> None:
        async with serving(tmp_path) as channel:
            gatherer = Gatherer(channel.server)
            first, second, third = Activity("proxy-a"), Activity("proxy-b"), Activity("proxy-c")
            records = {activity: Recorder(activity).record for activity in (first, second, third)}

            def burst(activity: Activity, count: int, tag: str) -> None:
                for index in range(count):
                    records[activity](
                        "shop/DataApp/a", "shop/c", "GET", f"/{tag}{index}".encode(), b"",
                        200, "ok", 0.01, 0, 1, None,
                    )  # fmt: skip

            burst(first, 2, "old-a")
            burst(second, 2, "old-b")
            channel.start_replica("proxy-a", first)
            channel.start_replica("proxy-b", second)
            channel.start_replica("proxy-old")  # an earlier release: never asked
            channel.server.flush()
            await eventually(lambda: len(channel.server.sessions) == 3, "three replicas")
            query = RequestsQuery(connection="shop/c", limit=3)

            page = await gatherer.recent("shop", query)
            assert len(page.requests) == 3
            assert set(page.positions) == {"proxy-a", "proxy-b"}
            burst(first, 6, "new-a")  # a burst larger than the page, on both replicas
            burst(second, 5, "new-b")
            paths: list[str] = []
            while True:  # pages of at most 3 of each replica's, each after the last
                page = await gatherer.recent("shop", query, page.positions)
                assert page.lost == 0
                paths += [record.path for _, record in page.requests]
                if not page.requests:
                    break
            expected = [f"/new-a{i}" for i in range(6)] + [f"/new-b{i}" for i in range(5)]
            assert sorted(paths) == sorted(expected)  # each once
            held = page.positions

            burst(third, 1, "c")
            channel.start_replica("proxy-c", third)
            channel.server.flush()
            await eventually(lambda: len(channel.server.sessions) == 4, "the new replica")
            page = await gatherer.recent("shop", query, held)
            assert [(name, record.path) for name, record in page.requests] == [("proxy-c", "/c0")]

    asyncio.run(scenario())


def test_a_connect_step_is_asked_only_of_a_replica_that_answers_them(tmp_path: Path) -> None:
    """Any replica that says it answers the connect flow's steps may take one (what a step needs
    is in the shared store); one of an earlier release is never asked, and none answering is
    NoReplica, said at once."""

    async def scenario() -> None:
        asked: list[GrantsAsked] = []

        async def answer(step: GrantsAsked) -> GrantsAnswered:
            asked.append(step)
            if step.action == "describe":
                raise RuntimeError("a bug in the replica")
            return GrantsAnswered(id=step.id, dropped=3)

        async with serving(tmp_path) as channel:
            channel.start_replica("proxy-old")
            channel.server.flush()
            await eventually(lambda: len(channel.server.sessions) == 1, "one replica")
            drop = GrantsAsked(id="d1", action="drop", connection="shop/sheets")
            with pytest.raises(NoReplica, match="connects accounts"):
                await channel.server.ask_grants(drop, within=5)
            channel.start_replica("proxy-new", grants=answer)
            await eventually(lambda: len(channel.server.sessions) == 2, "two replicas")
            for _ in range(4):
                answered = await channel.server.ask_grants(drop, within=5)
                assert answered.dropped == 3
            assert len(asked) == 4
            # A replica failing on a step answers that it failed: the page says so at once.
            describe = GrantsAsked(id="s1", action="describe", connection="shop/sheets")
            failed = await channel.server.ask_grants(describe, within=5)
            assert failed.problem is not None
            assert failed.problem.code == "internal"

    asyncio.run(scenario())
