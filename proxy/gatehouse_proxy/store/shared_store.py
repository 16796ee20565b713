"""The fleet's shared store: Redis (or Valkey), where what belongs to a credential is kept once
for every replica and worker.

A store that cannot answer within its deadline must never stall a request: a call then raises
:class:`StoreUnavailable` at once, the store is marked down, and callers do what one worker can do
alone. While it is down no request waits on it; a probe asks it once every ``PROBE_SECONDS``
and marks it up again as soon as it answers, so the fleet counts together again within a second
or two of its return.

A full store (``maxmemory`` reached, with ``noeviction``) still answers: it refuses writes, with
an ``OOM`` error. That is not a store that is down: the call raises :class:`StoreFull`, which its
caller answers alone as it does any unavailable store, and the store stays up for every other
call (reads, deletes, other namespaces' writes once memory is freed). Before, a full store was
read as down, and every tenant's quotas were counted by each worker alone.

Nothing secret is stored in the clear: callers encrypt what they keep here with the keyring, and
keys name namespaces and uids, never a path, a header or a value an app sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError

from gatehouse_proxy.errors import ProxyException

log = logging.getLogger("gatehouse.proxy.store")

# How often a store that is down is asked whether it is back.
PROBE_SECONDS = 0.5
# Late answers in a row that take the store down for this worker until the probe hears it again.
SLOW_CALLS_DOWN = 3
# How long /readyz says the store refused a write for want of memory.
FULL_SHOWN_SECONDS = 300.0
T = TypeVar("T")
# A script's argument: binary ones (a stored token) go as they are.
Arg = str | bytes | int | float


class StoreUnavailable(ProxyException):
    """The store did not answer in time, or at all: do what this worker can alone."""


class StoreFull(StoreUnavailable):
    """The store answered, refusing a write for want of memory: this call is answered alone,
    and the store stays up."""


@dataclass(frozen=True)
class StoreSettings:
    url: str  # redis://HOST:PORT[/DB] or rediss://... (TLS)
    password: str = ""
    ca_file: Path | None = None
    # A call that takes longer is abandoned and the store marked down: a request waits at most
    # this long on the store before it is served by what its worker knows alone.
    deadline_seconds: float = 0.05
    connections: int = 32


def digest_field(text: str) -> str:
    """The hash field that stands for ``text`` an app's request named (an endpoint): a digest,
    so the store keeps no path and a field's size never depends on what an app sent."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Script:
    """A Lua script run by its hash (loaded again if the store forgot it: a restart)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha: str | None = None


class SharedStore:
    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings
        # Calls past the pool's size wait for a connection (within their deadline) instead of
        # failing at once, as the plain pool's do.
        pool = redis.BlockingConnectionPool.from_url(
            settings.url,
            password=settings.password or None,
            socket_timeout=max(settings.deadline_seconds * 4, 0.2),
            socket_connect_timeout=max(settings.deadline_seconds * 4, 0.2),
            max_connections=settings.connections,
            timeout=None,
            health_check_interval=0,
            # The deadline decides, not retries: a call that failed is the probe's to retry.
            retry=Retry(NoBackoff(), 0),
            **_tls(settings),
        )
        self.client = redis.Redis(connection_pool=pool)
        # run_many's connection: a batch of script calls written at once and their answers read
        # in order, without a pipeline object, a pool checkout and a task per batch (at one
        # batch a request, those cost the proxy about three times as much CPU as the call).
        # Batches take turns on it; what arrives meanwhile makes the next batch.
        self._batches: AbstractConnection = pool.connection_class(**pool.connection_kwargs)
        self._batch_turn = asyncio.Lock()
        self.up = False
        self.since = time.monotonic()
        self.last_error = "not connected yet"
        self.late = 0  # calls in a row that missed their deadline
        self.last_full = ""  # the last refusal for want of memory, and when
        self.full_at = 0.0
        self._probe: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._probe = asyncio.create_task(self._probe_while_down(), name="store-probe")

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        await self.client.aclose()
        await self.client.connection_pool.disconnect()
        await self._batches.disconnect()

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "up": self.up,
            "sinceSeconds": round(time.monotonic() - self.since, 1),
            "lastError": "" if self.up else self.last_error,
        }
        full = time.monotonic() - self.full_at
        if self.last_full and full < FULL_SHOWN_SECONDS:
            described["lastFull"] = {"error": self.last_full, "secondsAgo": round(full, 1)}
        return described

    async def memory(self, *, deadline: float | None = None) -> tuple[int, int]:
        """The store's used memory and its maxmemory (0: unbounded), in bytes."""
        info = await self.call(lambda client: client.info("memory"), deadline=deadline)
        return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))

    async def call(
        self, command: Callable[[redis.Redis], Awaitable[T]], *, deadline: float | None = None
    ) -> T:
        """``command(client)`` within ``deadline`` (the store's by default); raises
        StoreUnavailable, at once while the store is down.

        A call past its deadline is answered without the store, but one slow answer does not
        take the store down for everybody: its time includes this worker's own event loop
        being busy. An error does, and so do SLOW_CALLS_DOWN late answers in a row.
        """
        if not self.up:
            raise StoreUnavailable(self.last_error)
        seconds = self.settings.deadline_seconds if deadline is None else deadline
        try:
            async with asyncio.timeout(seconds):
                answer = await command(self.client)
        except TimeoutError:
            self.late += 1
            if self.late >= SLOW_CALLS_DOWN:
                self._down(f"{self.late} answers in a row took over {seconds * 1000:g} ms")
            raise StoreUnavailable(f"no answer within {seconds * 1000:g} ms") from None
        except OutOfMemoryError as error:
            self.late = 0
            self.last_full, self.full_at = _cause(error), time.monotonic()
            raise StoreFull(self.last_full) from None
        except (RedisError, OSError) as error:
            self._down(_cause(error))
            raise StoreUnavailable(self.last_error) from None
        self.late = 0
        return answer

    async def run(
        self,
        script: Script,
        keys: list[str],
        args: list[Arg],
        *,
        deadline: float | None = None,
    ) -> Any:
        """The script's answer, within the deadline."""

        async def evaluate(client: redis.Redis) -> Any:
            if script.sha is None:
                script.sha = await client.script_load(script.source)
            try:
                return await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                script.sha = await client.script_load(script.source)
                return await client.evalsha(script.sha, len(keys), *keys, *args)

        return await self.call(evaluate, deadline=deadline)

    async def run_many(self, script: Script, calls: list[tuple[list[str], list[Arg]]]) -> list[Any]:
        """The script run once per call, all in one pipeline (one round trip), within the
        deadline; raises StoreUnavailable as a single call does."""

        async def evaluate(client: redis.Redis) -> list[Any]:
            async with self._batch_turn:
                try:
                    if script.sha is None:
                        script.sha = await client.script_load(script.source)
                    try:
                        return await self._batch(script.sha, calls)
                    except NoScriptError:
                        # The store restarted and forgot it: load it again, send them again.
                        script.sha = await client.script_load(script.source)
                        return await self._batch(script.sha, calls)
                except ResponseError:
                    raise  # every answer was read: the connection is in step
                except BaseException:
                    # Answers may be left unread (an error, the deadline): start clean.
                    await self._batches.disconnect()
                    raise

        return await self.call(evaluate)

    async def _batch(self, sha: str, calls: list[tuple[list[str], list[Arg]]]) -> list[Any]:
        connection = self._batches
        await connection.connect()  # type: ignore[no-untyped-call]
        packed = b"".join(_evalsha(sha, tuple(keys), tuple(args)) for keys, args in calls)
        await connection.send_packed_command(packed, check_health=False)
        answers: list[Any] = []
        for _ in calls:
            # Every answer is read, errors too, so that one refused call (a full store refuses
            # the writing ones) leaves the connection in step; then the first error is raised.
            try:
                answers.append(await connection.read_response())
            except ResponseError as error:
                answers.append(error)
        errors = [answer for answer in answers if isinstance(answer, ResponseError)]
        if errors:
            raise next((e for e in errors if isinstance(e, NoScriptError)), errors[0])
        return answers

    def _down(self, cause: str) -> None:
        self.last_error = cause
        self.late = 0
        if self.up:
            self.up = False
            self.since = time.monotonic()
            log.warning("the shared store is unavailable (%s): each worker counts alone", cause)

    async def _probe_while_down(self) -> None:
        while True:
            if not self.up:
                # The pooled connections of a store that restarted were closed by it: each would
                # fail a call in turn (taking the store down again) once it is back. Dropped
                # while it is down, the calls after it answers use new ones.
                await self.client.connection_pool.disconnect(inuse_connections=False)
                await self._batches.disconnect()
                try:
                    async with asyncio.timeout(max(self.settings.deadline_seconds * 4, 0.2)):
                        await self.client.ping()
                except (RedisError, OSError, TimeoutError) as error:
                    cause = _cause(error) if not isinstance(error, TimeoutError) else "no answer"
                    if cause != self.last_error:
                        log.warning("the shared store is still unavailable (%s)", cause)
                    self.last_error = cause
                else:
                    self.up = True
                    self.since = time.monotonic()
                    log.info("the shared store answers again")
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # close() cancelled a ping under way and the client did not let the cancel
                # through (it finished the ping, or made it an error of its own): stop here, or
                # close() waits forever, and a proxy that could not bind its port never exits.
                raise asyncio.CancelledError
            await asyncio.sleep(PROBE_SECONDS)


@contextlib.asynccontextmanager
async def opened(settings: StoreSettings | None) -> AsyncIterator[SharedStore | None]:
    if settings is None:
        yield None
        return
    store = SharedStore(settings)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


@functools.lru_cache(maxsize=16384)
def _evalsha(sha: str, keys: tuple[str, ...], args: tuple[Arg, ...]) -> bytes:
    """EVALSHA in Redis' wire form (RESP): a request's call repeats with its route, so each is
    written once (bounded), not encoded argument by argument for every request."""
    parts = [b"EVALSHA", sha.encode(), str(len(keys)).encode()]
    parts += [part if isinstance(part, bytes) else str(part).encode() for part in (*keys, *args)]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def _tls(settings: StoreSettings) -> dict[str, Any]:
    """A rediss:// store is verified against the system's trust, and the CA file if given."""
    if not settings.url.startswith("rediss://"):
        return {}
    options: dict[str, Any] = {"ssl_min_version": ssl.TLSVersion.TLSv1_2}
    if settings.ca_file is not None:
        options["ssl_ca_certs"] = str(settings.ca_file)
    return options


def _cause(error: BaseException) -> str:
    """One line, no secret: the error's class and its first line (a wrong password reads as
    'AuthenticationError: invalid username-password pair')."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}"[:200] if text else type(error).__name__
