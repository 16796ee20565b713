"""Each namespace's own upstream connection pool, sized to its concurrency cap: no tenant's slow
upstreams can hold the sockets another tenant needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp


class TenantPools:
    """One upstream session (connection pool) per namespace, made on first use and closed when
    the namespace no longer has a connection in the table."""

    def __init__(self, new_session: Callable[[int], aiohttp.ClientSession], size: int) -> None:
        self._new_session = new_session
        self._size = size
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def session(self, namespace: str) -> aiohttp.ClientSession:
        session = self._sessions.get(namespace)
        if session is None:
            session = self._sessions[namespace] = self._new_session(self._size)
        return session

    def keep(self, namespaces: set[str]) -> None:
        for namespace in [name for name in self._sessions if name not in namespaces]:
            task = asyncio.get_running_loop().create_task(self._sessions.pop(namespace).close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(session.close() for session in sessions), *self._closing)
