"""Connection tests' places on a replica: per namespace, a bounded queue, a deadline, and a
request that reaches the upstream at most once."""

from __future__ import annotations

import asyncio

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.table.test_slots import ConnectionTestRun, ConnectionTestSlots


async def _hold(
    slots: ConnectionTestSlots,
    namespace: str,
    release: asyncio.Event,
    run: ConnectionTestRun,
    *,
    sends: bool = True,
) -> str:
    try:
        async with slots.slot(namespace, run):
            if sends:
                run.sending()
            await release.wait()
    except ProxyError as error:
        return error.code
    return "ran"


def _run(start_in: float, end_in: float) -> ConnectionTestRun:
    now = asyncio.get_running_loop().time()
    return ConnectionTestRun(now + start_in, now + end_in)


def test_one_namespace_cannot_take_another_namespaces_place() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots(per_namespace=2, waiting_per_namespace=3, per_replica=4)
        release = asyncio.Event()
        flood = [asyncio.create_task(_hold(slots, "a", release, _run(60, 60))) for _ in range(8)]
        await asyncio.sleep(0)
        # Two run, three wait, the other three are turned away at once.
        turned_away = [task for task in flood if task.done()]
        assert [task.result() for task in turned_away] == ["tests_busy"] * 3
        async with asyncio.timeout(1):  # b's test starts at once beside a's two
            async with slots.slot("b", _run(60, 60)):
                pass
        release.set()
        assert sorted(await asyncio.gather(*flood)) == ["ran"] * 5 + ["tests_busy"] * 3

    asyncio.run(scenario())


def test_a_test_is_sent_once_whatever_its_deadline_finds() -> None:
    """Not started when it had to start: dropped unsent. Cancelled after its request was sent:
    timed out, its result. Cancelled while it held its place but had not sent: unsent."""

    async def scenario() -> None:
        slots = ConnectionTestSlots(per_namespace=1, waiting_per_namespace=4, per_replica=4)
        never = asyncio.Event()
        running = asyncio.create_task(_hold(slots, "a", never, _run(0.3, 0.3)))
        # It could wait until 0.2, but the place is held until 0.3.
        queued = asyncio.create_task(_hold(slots, "a", never, _run(0.1, 10)))
        assert await queued == "test_not_started"
        assert await running == "test_timed_out"
        unsent = asyncio.create_task(_hold(slots, "a", never, _run(0.1, 0.2), sends=False))
        assert await unsent == "test_not_started"
        # Every place is free again.
        async with slots.slot("a", _run(1, 1)):
            pass
        assert not slots._admitted

    asyncio.run(scenario())


def test_a_queued_test_starts_when_a_place_frees_before_it_must_start() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots(per_namespace=1, waiting_per_namespace=4, per_replica=4)
        first_done = asyncio.Event()
        first = asyncio.create_task(_hold(slots, "a", first_done, _run(5, 5)))
        second = asyncio.create_task(_hold(slots, "a", asyncio.Event(), _run(5, 5)))
        await asyncio.sleep(0.05)
        first_done.set()
        assert await first == "ran"
        await asyncio.sleep(0.05)
        assert not second.done()  # started, and running
        second.cancel()

    asyncio.run(scenario())


def test_an_error_inside_a_test_is_not_taken_for_its_deadline() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots()
        with pytest.raises(TimeoutError):
            async with slots.slot("a", _run(60, 60)):
                raise TimeoutError

    asyncio.run(scenario())
