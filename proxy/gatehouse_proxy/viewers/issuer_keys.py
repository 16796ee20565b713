"""One trusted issuer's keys as a worker holds them: read once, kept for a while, read again
within bounds.

The set is read when first needed and again once it is older than ``fresh_seconds``; an assertion
naming a ``kid`` the set lacks (the issuer rotated its keys) reads it again at once, but never
more than once per ``refetch_seconds``: a flood of assertions with made-up kids costs the issuer
one read per interval, not one per assertion. Reads are one at a time: the requests that find
the set stale together wait for the same read. A read that fails keeps the set held before, if
any (stale keys verify what they verified); with none held, the issuer's assertions cannot be
verified until a read succeeds, tried again at most once per ``refetch_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.viewers.keys import Key, KeysUnreadable, parse_jwks

log = logging.getLogger("gatehouse.proxy.viewers")

# A JWKS document's bytes, from wherever the issuer's keys are (a URL, a mounted Secret).
Load = Callable[[], Awaitable[bytes]]


class IssuerKeys:
    def __init__(
        self,
        issuer: str,
        load: Load,
        fresh_seconds: float = 300.0,
        refetch_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._load = load
        self.fresh_seconds = fresh_seconds
        self.refetch_seconds = refetch_seconds
        self._clock = clock
        self._keys: tuple[Key, ...] = ()
        self._read_at = -float("inf")  # the last read that succeeded
        self._tried_at = -float("inf")  # the last read, whatever came of it
        self._problem = ""  # why the last read failed; "" if it did not
        self._reading: asyncio.Future[None] | None = None
        self.reads = 0  # reads begun, for the tests and the log

    async def find(self, kid: str) -> tuple[Key, ...]:
        """The keys an assertion with ``kid`` ("" if none) may be signed with: the one of that
        kid, or (no kid) every key. Raises viewer_keys_unavailable while none can be read."""
        now = self._clock()
        if now - self._read_at >= self.fresh_seconds and now - self._tried_at >= self._retry_after:
            await self._read()
        found = self._matching(kid)
        if not found and kid and self._clock() - self._tried_at >= self.refetch_seconds:
            await self._read()  # a kid the set lacks: the issuer may have rotated
            found = self._matching(kid)
        if not self._keys:
            raise ProxyError(
                "viewer_keys_unavailable",
                f"the keys of the viewer assertions' issuer cannot be read: {self._problem}",
                headers={"Retry-After": str(max(1, round(self.refetch_seconds)))},
            )
        return found

    def fresh_since(self) -> float | None:
        """When the keys held were read, while :meth:`find` would use them without reading the
        set again; None once they are due (or none are held)."""
        if not self._keys or self._clock() - self._read_at >= self.fresh_seconds:
            return None
        return self._read_at

    @property
    def _retry_after(self) -> float:
        """How soon after a read another may be begun: at once when the last one worked and the
        set has aged, else (it failed) after the refetch interval."""
        return self.refetch_seconds if self._problem else 0.0

    def _matching(self, kid: str) -> tuple[Key, ...]:
        if not kid:
            return self._keys
        return tuple(key for key in self._keys if key.kid == kid)

    async def _read(self) -> None:
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read_once())
        reading = self._reading
        # Shielded: a request that gives up waiting does not cancel the others' read.
        await asyncio.shield(reading)

    async def _read_once(self) -> None:
        self._tried_at = self._clock()
        self.reads += 1
        try:
            keys = parse_jwks(await self._load())
        except (KeysUnreadable, OSError, TimeoutError, ValueError) as error:
            self._problem = str(error) or type(error).__name__
            log.warning("could not read the keys of viewer issuer %s: %s", self.issuer, error)
        else:
            self._keys, self._read_at, self._problem = keys, self._clock(), ""
        finally:
            self._reading = None
