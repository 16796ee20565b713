"""Where a connect under way is kept between its steps, for whichever replica takes the next: a
connect link until it is clicked, and a begun connect's state until the vendor's callback.

Each record is taken once (read and deleted in one script): a link clicked twice, or a state
sent back twice, finds nothing the second time. A record lives its step's time at most (the
store expires it) and is counted to its namespace's share as every key is: a tenant whose apps
mint links without end fills its own share, never the store.

The store sees the record as the caller encrypted it, under a key that names its kind and the
digest of its random part, never the part itself (what is in the store is no link).
"""

from __future__ import annotations

from typing import Literal

from gatehouse_proxy.store.shared_store import Script, SharedStore
from gatehouse_proxy.store.shares import LEDGER, Shares, prefix

DEADLINE_SECONDS = 1.0
Record = Literal["link", "state"]

# KEYS: the record, ledger's. ARGV: the encrypted record, ms, the namespace's keys and bytes at
# most, the reserve. Answers 1, or why nothing was kept ('share', 'reserve').
_PUT = Script(
    LEDGER + "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "local bytes = ledger_usage(KEYS[1], ARGV[1]) "
    "local refused = false "
    "if not ledger_fits({{KEYS[1], bytes}}, 3) then refused = 'share' "
    "elseif not ledger_off_reserve(ARGV[5]) then refused = 'reserve' end "
    "if refused then ledger_drop(KEYS[1]) return refused end "
    "ledger_count(KEYS[1], bytes, ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 1"
)
# KEYS: the record, ledger's. Answers the record, now gone, or false.
_TAKE = Script(
    LEDGER + "local v = redis.call('GET', KEYS[1]) if v then ledger_drop(KEYS[1]) end return v"
)


class ConnectStore:
    def __init__(self, store: SharedStore, shares: Shares) -> None:
        self.store = store
        self.shares = shares

    def _keys(self, namespace: str, record: Record, digest: str) -> list[str]:
        return [f"{prefix(namespace)}connect:{record}:{digest}", *self.shares.keys(namespace)]

    async def put(
        self, namespace: str, record: Record, digest: str, encrypted: bytes, seconds: int
    ) -> str:
        """'' once kept; else why not ('share', 'reserve')."""
        answer = await self.store.run(
            _PUT,
            self._keys(namespace, record, digest),
            [encrypted, seconds * 1000, *self.shares.limits, self.shares.settings.reserve],
            deadline=DEADLINE_SECONDS,
        )
        if isinstance(answer, int):
            return ""
        refused = bytes(answer).decode()
        self.shares.refused(namespace, f"connect {record}s", refused)
        return refused

    async def take(self, namespace: str, record: Record, digest: str) -> bytes | None:
        answer = await self.store.run(
            _TAKE, self._keys(namespace, record, digest), [], deadline=DEADLINE_SECONDS
        )
        return bytes(answer) if answer else None
