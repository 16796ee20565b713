"""What keeps tenants that share a replica apart: concurrency caps, request-byte budgets, turns.

A tenant is a namespace. Each request holds a place under three caps — its namespace's, its
app's and its connection's — from before its body is read until its answer has been relayed.
A request over a cap waits for a place, at most ``wait_seconds``, then gets 503
``concurrency_limited``: it waits on its own tenant's traffic only, never on another's.

Request bodies are read into memory (the upstream call needs the whole body to sign, retry and
know its length), so their bytes are budgeted: per namespace and for the replica. A body that
would cross either budget is refused with 503 ``request_bytes_limited``, so a namespace that
sends large bodies runs out of its own share long before the replica runs out of memory.

Each namespace has its own upstream connection pool too (:mod:`gatehouse_proxy.upstream.pools`).

A replica's one event loop runs whatever is ready first come, first served, and one tenant's
requests tend to become ready together: a hundred slow answers arrive at once, a hundred waits
time out in the same instant. :class:`Turns` spreads such a burst over the loop's iterations, a
few of a tenant's requests per iteration, so another tenant's request that becomes ready behind
the burst waits for a few of them, not for all.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from gatehouse_proxy.errors import ProxyError

RETRY_AFTER = {"Retry-After": "1"}
# A replica's tenant turns per iteration of its loop (see Turns): two each, and up to eight while
# no other tenant waits and the iteration's turns began less than a millisecond ago (a few
# fetches' stretches; one 64 KiB piece of a large body takes about as long). Measured
# (docs/development/performance.md): one tenant at 32 connections spent 28 µs a request in
# waits for later iterations with two turns, about none with eight.
TURNS_PER_ROUND = 2
TURNS_ALONE = 8
TURNS_WITHIN_SECONDS = 0.001


@dataclass(frozen=True)
class TenantLimits:
    concurrent_per_namespace: int = 256
    concurrent_per_app: int = 128
    concurrent_per_connection: int = 128
    wait_seconds: float = 2.0
    request_bytes_per_namespace: int = 24 * 1024 * 1024
    request_bytes_total: int = 64 * 1024 * 1024


class _Gate:
    """One cap's places: a count while there is room, waiters in order once it is full."""

    __slots__ = ("cap", "held", "waiters")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0
        self.waiters: deque[asyncio.Future[None]] = deque()

    @property
    def users(self) -> int:
        """Holders and waiters: an idle gate is dropped."""
        return self.held + len(self.waiters)


class Place:
    """A request's place under its caps; ``release`` (idempotent) when its answer has ended."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


_GateKey = tuple[str, str]


class ConcurrencyLimits:
    def __init__(self, limits: TenantLimits) -> None:
        self.limits = limits
        self._gates: dict[_GateKey, _Gate] = {}

    def in_flight(self, kind: str, key: str) -> int:
        gate = self._gates.get((kind, key))
        return 0 if gate is None else gate.users

    async def enter(self, namespace: str, app: str, connection: str) -> Place:
        """A place under the namespace's, the app's and the connection's caps, taken in that
        order by every request (so no two requests can wait on each other). A cap with room and
        nobody waiting is a count: only a full one is waited for."""
        limits = self.limits
        caps = (
            (("namespace", namespace), limits.concurrent_per_namespace),
            (("app", app), limits.concurrent_per_app),
            (("connection", connection), limits.concurrent_per_connection),
        )
        deadline = asyncio.get_running_loop().time() + limits.wait_seconds
        taken: list[tuple[_GateKey, _Gate]] = []
        gates = self._gates
        for gate_key, cap in caps:
            gate = gates.get(gate_key)
            if gate is None:
                gate = gates[gate_key] = _Gate(cap)
            if gate.held < gate.cap and not gate.waiters:
                gate.held += 1
            else:
                try:
                    await self._wait(gate_key, gate, deadline)
                except BaseException as error:
                    self._release(taken)
                    if isinstance(error, TimeoutError):
                        raise ProxyError(
                            "concurrency_limited",
                            f"this {gate_key[0]} already has {cap} requests in flight on this "
                            f"proxy replica and none finished within {limits.wait_seconds:g}s",
                            headers=RETRY_AFTER,
                        ) from None
                    raise
            taken.append((gate_key, gate))
        return Place(partial(self._release, taken))

    async def _wait(self, key: _GateKey, gate: _Gate, deadline: float) -> None:
        """A place handed on by a request that leaves (see ``_give_back``), by ``deadline``."""
        waiter = asyncio.get_running_loop().create_future()
        gate.waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                # Handed on as the wait ended: passed on to the next, nobody waits for it.
                self._give_back(key, gate)
            else:
                with contextlib.suppress(ValueError):
                    gate.waiters.remove(waiter)
                self._drop_if_idle(key, gate)
            raise

    def _release(self, taken: list[tuple[_GateKey, _Gate]]) -> None:
        for key, gate in taken:
            self._give_back(key, gate)

    def _give_back(self, key: _GateKey, gate: _Gate) -> None:
        """A place left: handed to the first who still waits, else counted free."""
        waiters = gate.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        gate.held -= 1
        self._drop_if_idle(key, gate)

    def _drop_if_idle(self, key: _GateKey, gate: _Gate) -> None:
        if not gate.held and not gate.waiters and self._gates.get(key) is gate:
            del self._gates[key]


class RequestBytes:
    """Bytes of request bodies held in memory, per namespace and in all."""

    def __init__(self, limits: TenantLimits) -> None:
        self.limits = limits
        self.total = 0
        self._by_namespace: dict[str, int] = {}

    def held(self, namespace: str) -> int:
        return self._by_namespace.get(namespace, 0)

    def take(self, namespace: str, size: int) -> None:
        held = self.held(namespace)
        if held + size > self.limits.request_bytes_per_namespace:
            raise ProxyError(
                "request_bytes_limited",
                f"request bodies in flight from this namespace would exceed "
                f"{self.limits.request_bytes_per_namespace} bytes on this proxy replica",
                headers={**RETRY_AFTER, "Connection": "close"},
            )
        if self.total + size > self.limits.request_bytes_total:
            raise ProxyError(
                "request_bytes_limited",
                "this proxy replica holds as many request bodies as it may; retry shortly",
                headers={**RETRY_AFTER, "Connection": "close"},
            )
        self._by_namespace[namespace] = held + size
        self.total += size

    def reservation(self, namespace: str) -> Reservation:
        return Reservation(self, namespace)

    def give_back(self, namespace: str, size: int) -> None:
        held = self.held(namespace) - size
        self.total -= size
        if held:
            self._by_namespace[namespace] = held
        else:
            self._by_namespace.pop(namespace, None)


class Reservation:
    """One request body's bytes, taken as they arrive and given back in one go."""

    def __init__(self, budget: RequestBytes, namespace: str) -> None:
        self.budget = budget
        self.namespace = namespace
        self.size = 0

    def take(self, size: int) -> None:
        self.budget.take(self.namespace, size)
        self.size += size

    def release(self) -> None:
        size, self.size = self.size, 0
        if size:
            self.budget.give_back(self.namespace, size)


class Turns:
    """Each tenant's share of the event loop: ``per_round`` turns per iteration of the loop, and
    up to ``alone`` while no other tenant waits for one and the iteration's turns began less than
    ``within`` seconds ago.

    A request takes a turn before each stretch of work it does without waiting (identifying it,
    sending it upstream, relaying the answer). A tenant whose turns in this iteration are used
    up waits for a later one, in order; meanwhile other tenants' requests run. Each such wait
    costs the burst's own requests CPU (an iteration more of the loop), so short stretches of a
    tenant alone are not spread as finely as long ones: another tenant's request that becomes
    ready behind a burst waits for ``per_round`` of its stretches, or for more only while they
    have taken less than ``within`` in all (and never more than ``alone``).
    """

    def __init__(self, per_round: int = 2, alone: int | None = None, within: float = 0.0) -> None:
        self.per_round = per_round
        self.alone = per_round if alone is None else alone
        self.within = within
        self._taken: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._round_due = False
        self._began = 0.0  # when this iteration's turns began (perf_counter)
        self._quick = False  # the last iteration's turns took less than ``within``

    def waiting(self, tenant: str) -> int:
        return len(self._waiting.get(tenant, ()))

    async def take(self, tenant: str) -> None:
        taken = self._taken.get(tenant, 0)
        waiting = self._waiting
        if tenant not in waiting and (
            taken < self.per_round
            or (
                taken < self.alone
                and not waiting
                and time.perf_counter() - self._began < self.within
            )
        ):
            self._next_round()
            self._taken[tenant] = taken + 1
            return
        turn = asyncio.get_running_loop().create_future()
        waiting.setdefault(tenant, deque()).append(turn)
        self._next_round()
        try:
            await turn
        except asyncio.CancelledError:
            if not turn.cancelled():
                # Granted as it was cancelled: the turn goes unused, nobody waits for it.
                raise
            queue = waiting.get(tenant)
            if queue is not None and turn in queue:
                queue.remove(turn)
                if not queue:
                    del waiting[tenant]
            raise

    def _next_round(self) -> None:
        if not self._round_due:
            self._round_due = True
            if not self._taken:
                self._began = time.perf_counter()  # the first turn since the loop was idle
            asyncio.get_running_loop().call_soon(self._round)

    def _round(self) -> None:
        """A new iteration of the loop: each waiting tenant's next turns are granted, more to a
        tenant alone in the queue while the last iteration's turns were quick."""
        self._round_due = False
        now = time.perf_counter()
        quick, self._began = now - self._began < self.within, now
        self._taken = {}
        share = self.alone if quick and len(self._waiting) == 1 else self.per_round
        for tenant, queue in list(self._waiting.items()):
            granted = 0
            while queue and granted < share:
                turn = queue.popleft()
                if not turn.done():
                    turn.set_result(None)
                    granted += 1
            self._taken[tenant] = granted
            if not queue:
                del self._waiting[tenant]
        if self._waiting:
            self._next_round()
