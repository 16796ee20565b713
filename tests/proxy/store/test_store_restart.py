"""A store that restarts (its Pod replaced, say) is used again at once once it answers: the pooled
connections it closed are not each failed on in turn, taking the store down again and again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.store.shared_store import StoreUnavailable
from tests.proxy.stores import store_up


def test_calls_after_a_restart_use_new_connections(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> int:
        store = await store_up(server)
        try:
            # Several pooled connections, as concurrent requests leave them.
            await asyncio.gather(*(store.call(lambda c: c.ping()) for _ in range(8)))
            server.stop()
            server.start()  # the same port, every connection the pool held now closed
            failed = 0
            answered = 0
            # Requests one at a time, as a quiet app's are: each would find the next closed one.
            for _ in range(400):  # at most 20 s at 50 ms
                try:
                    await store.call(lambda c: c.ping())
                except StoreUnavailable:
                    failed += 1
                    answered = 0
                else:
                    answered += 1
                    if answered == 20:
                        break
                await asyncio.sleep(0.05)
            assert answered == 20, "the store was not used again"
            return failed
        finally:
            await store.close()

    try:
        failed = asyncio.run(scenario())
    finally:
        server.stop()
    # The call that found the first closed connection, and those while the probe (every half
    # second) had not heard the store yet: not one more probe's wait per closed connection.
    assert failed <= 12, failed
