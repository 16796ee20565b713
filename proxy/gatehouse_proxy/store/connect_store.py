"""Where a connect under way is kept between its steps, for whichever replica takes the next: a
begun connect's state until the vendor's callback, and the mark of each link spent.

- A state is taken once (read and deleted in one script): sent back twice, it finds nothing the
  second time. The store sees it as the caller encrypted it, under a key that names the digest of
  its random part, never the part itself.
- A link is sealed, not stored (gatehouse_proxy.credentials.connecting): clicked, its digest is
  marked spent (``SET NX``) until it would have expired, so a second click finds the mark.

Each lives its step's time at most (the store expires it) and is counted to its namespace's share
as every key is: a tenant's flood of connects fills its own share, never the store.
"""

from __future__ import annotations

from gatehouse_proxy.store.shared_store import Script, SharedStore
from gatehouse_proxy.store.shares import LEDGER, Shares, prefix

DEADLINE_SECONDS = 1.0

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
# KEYS: the mark, ledger's. ARGV: ms, the namespace's keys and bytes at most, the reserve.
# Answers 1 (marked now), 0 (marked before), or why nothing was marked ('share', 'reserve').
_MARK = Script(
    LEDGER + "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
    "redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) "
    "local bytes = ledger_usage(KEYS[1], '1') "
    "local refused = false "
    "if not ledger_fits({{KEYS[1], bytes}}, 2) then refused = 'share' "
    "elseif not ledger_off_reserve(ARGV[4]) then refused = 'reserve' end "
    "if refused then ledger_drop(KEYS[1]) return refused end "
    "ledger_count(KEYS[1], bytes, ledger_now() + math.ceil(ARGV[1] / 1000)) "
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

    def _keys(self, namespace: str, record: str, digest: str) -> list[str]:
        return [f"{prefix(namespace)}connect:{record}:{digest}", *self.shares.keys(namespace)]

    async def put(self, namespace: str, digest: str, encrypted: bytes, seconds: int) -> str:
        """Keeps a state: '' once kept; else why not ('share', 'reserve')."""
        answer = await self.store.run(
            _PUT,
            self._keys(namespace, "state", digest),
            [encrypted, seconds * 1000, *self.shares.limits, self.shares.settings.reserve],
            deadline=DEADLINE_SECONDS,
        )
        if isinstance(answer, int):
            return ""
        refused = bytes(answer).decode()
        self.shares.refused(namespace, "connect states", refused)
        return refused

    async def mark(self, namespace: str, digest: str, seconds: float) -> bool | str:
        """Marks a link spent for ``seconds``: True now, False if it was before; else why not
        ('share', 'reserve')."""
        answer = await self.store.run(
            _MARK,
            self._keys(namespace, "spent", digest),
            [max(1, int(seconds * 1000)), *self.shares.limits, self.shares.settings.reserve],
            deadline=DEADLINE_SECONDS,
        )
        if isinstance(answer, int):
            return answer == 1
        refused = bytes(answer).decode()
        self.shares.refused(namespace, "connect links", refused)
        return refused

    async def take(self, namespace: str, digest: str) -> bytes | None:
        """A state, taken: None if it was taken before, expired, or never kept."""
        answer = await self.store.run(
            _TAKE, self._keys(namespace, "state", digest), [], deadline=DEADLINE_SECONDS
        )
        return bytes(answer) if answer else None
