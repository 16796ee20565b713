"""Connection tests' places on a replica: per namespace, a bounded queue, a deadline."""

from __future__ import annotations

import asyncio

import pytest

from gatehouse_proxy.connection_test_slots import ConnectionTestSlots
from gatehouse_proxy.errors import ProxyError


async def _hold(
    slots: ConnectionTestSlots, namespace: str, release: asyncio.Event, deadline: float
) -> str:
    try:
        async with slots.slot(namespace, deadline):
            await release.wait()
    except ProxyError as error:
        return error.code
    return "ran"


def test_one_namespace_cannot_take_another_namespaces_place() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots(per_namespace=2, waiting_per_namespace=3, per_replica=4)
        later = asyncio.get_running_loop().time() + 60
        release = asyncio.Event()
        flood = [asyncio.create_task(_hold(slots, "a", release, later)) for _ in range(8)]
        await asyncio.sleep(0)
        # Two run, three wait, the other three are turned away at once.
        turned_away = [task for task in flood if task.done()]
        assert [task.result() for task in turned_away] == ["tests_busy"] * 3
        async with asyncio.timeout(1):  # b's test starts at once beside a's two
            async with slots.slot("b", later):
                pass
        release.set()
        assert sorted(await asyncio.gather(*flood)) == ["ran"] * 5 + ["tests_busy"] * 3

    asyncio.run(scenario())


def test_a_test_not_started_by_its_deadline_is_dropped_and_a_running_one_cancelled() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots(per_namespace=1, waiting_per_namespace=4, per_replica=4)
        loop = asyncio.get_running_loop()
        never = asyncio.Event()
        running = asyncio.create_task(_hold(slots, "a", never, loop.time() + 0.2))
        queued = asyncio.create_task(_hold(slots, "a", never, loop.time() + 0.1))
        assert await queued == "test_expired"
        assert await running == "test_expired"
        # Both places are free again.
        async with slots.slot("a", loop.time() + 1):
            pass
        assert not slots._admitted

    asyncio.run(scenario())


def test_an_error_inside_a_test_is_not_taken_for_its_deadline() -> None:
    async def scenario() -> None:
        slots = ConnectionTestSlots()
        with pytest.raises(TimeoutError):
            async with slots.slot("a", asyncio.get_running_loop().time() + 60):
                raise TimeoutError

    asyncio.run(scenario())
