"""Where the fleet keeps OAuth 2.0 grants (a viewer's, or a connection's shared one): one Redis hash
per grant, a generation that every write is compared against, and a lock so that one refresh at a
time is in flight per grant, whatever the replica or worker.

The store sees only what it needs: the grant's generation (a counter), the digest of what it was
granted to (token URL, client, scopes: a changed client reads as no grant), and the grant as the
caller encrypted it (:mod:`gatehouse_proxy.credentials.fleet_grants`); keys name the namespace, the
connection's uid and a digest of the owner, never the owner itself. Every key is counted to the
namespace (:mod:`gatehouse_proxy.store.shares`): a new grant is refused past the namespace's share
(or into the store's reserve); a refreshed one is written whatever the share says, since the
provider has retired the refresh token it replaces, and losing the new one would lose the grant.

- ``read``: the generation, the binding, the encrypted grant, and the refresh lock's time left.
- ``keep``: a new grant (a connect), generation one past the last.
- ``lock``: ``SET NX PX`` of a random token, in the script that counts it; ``rotate`` writes the
  refreshed grant only if the generation is still the one refreshed (compare-and-set) and gives
  the lock back if it is still this worker's (compare-and-delete); ``unlock`` gives it back alone.
- ``drop``: one grant (if still the generation given), or every grant of a connection (the
  namespace's ledger lists them: no SCAN), answering what was dropped, encrypted (the caller
  revokes its refresh token at the provider).
- ``listed``: a connection's grants as the page shows them (how many, and the first
  :data:`MOST_LISTED` encrypted, for the caller to read whose and when), with the refreshes that
  failed (``failed`` counts them in the connection's ``stats`` entry, among its grants' keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_proxy.store.shared_store import Script, SharedStore
from gatehouse_proxy.store.shares import LEDGER, Shares, prefix

# A grant not refreshed (nor connected again) for this long is forgotten: its provider's refresh
# token has most likely lapsed too (Google's lapse after six months unused, many sooner).
IDLE_SECONDS = 90 * 24 * 3600
# Grants a listing reads (and decrypts) at most; the count is of all.
MOST_LISTED = 1000
# How long a store call on a grant's way may take (a loaded worker's event loop is part of it).
DEADLINE_SECONDS = 1.0

_READ = Script(
    "local v = redis.call('HMGET', KEYS[1], 'g', 'b', 'v') "
    "if not v[1] then return {} end "
    "return {v[1], v[2], v[3], redis.call('PTTL', KEYS[2])}"
)
# KEYS: grant, lock, ledger's. ARGV: binding, encrypted, idle ms, the namespace's keys and bytes at
# most, the reserve. Answers the generation written, or 'share' / 'reserve' (nothing kept).
_KEEP = Script(
    LEDGER + "local g = (tonumber(redis.call('HGET', KEYS[1], 'g')) or 0) + 1 "
    "redis.call('DEL', KEYS[1]) "
    "redis.call('HSET', KEYS[1], 'g', g, 'b', ARGV[1], 'v', ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
    "local bytes = ledger_usage(KEYS[1], ARGV[2]) "
    "local refused = false "
    "if not ledger_fits({{KEYS[1], bytes}}, 4) then refused = 'share' "
    "elseif not ledger_off_reserve(ARGV[6]) then refused = 'reserve' end "
    "if refused then ledger_drop(KEYS[1]) return refused end "
    "ledger_count(KEYS[1], bytes, ledger_now() + math.ceil(ARGV[3] / 1000)) "
    "return g"
)
# KEYS: grant, lock, ledger's. ARGV: the taker's token, ms, the generation it would refresh.
# Answers 0 (taken), the ms the holder's lock has left, or -1: the grant is no longer that
# generation (a refresh ended since it was read: refreshing it again would spend a retired
# refresh token). Counted, never refused: a grant whose refresh could not be locked is lost.
_LOCK = Script(
    LEDGER + "local left = redis.call('PTTL', KEYS[2]) "
    "if left > 0 then return left end "
    "if redis.call('HGET', KEYS[1], 'g') ~= ARGV[3] then return -1 end "
    "redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) "
    "ledger_count(KEYS[2], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 0"
)
_UNLOCK = Script(
    LEDGER + "if redis.call('GET', KEYS[1]) == ARGV[1] then ledger_drop(KEYS[1]) return 1 end "
    "return 0"
)
# KEYS: grant, lock, ledger's. ARGV: the generation refreshed, the encrypted grant, idle ms, the
# lock's token. Answers 1 (written) or 0 (the generation moved on, or the grant was dropped).
_ROTATE = Script(
    LEDGER + "if redis.call('GET', KEYS[2]) == ARGV[4] then ledger_drop(KEYS[2]) end "
    "if redis.call('HGET', KEYS[1], 'g') ~= ARGV[1] then return 0 end "
    "redis.call('HSET', KEYS[1], 'g', tonumber(ARGV[1]) + 1, 'v', ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
    "ledger_count(KEYS[1], ledger_usage(KEYS[1], ARGV[2]), "
    "  ledger_now() + math.ceil(ARGV[3] / 1000)) "
    "return 1"
)
# KEYS: grant, lock, ledger's. ARGV: the generation to drop ('' any). Answers the encrypted
# grant dropped (a revocation at the provider needs its refresh token), or false.
_DROP = Script(
    LEDGER + "local v = redis.call('HMGET', KEYS[1], 'g', 'v') "
    "if not v[1] or (ARGV[1] ~= '' and v[1] ~= ARGV[1]) then return false end "
    "ledger_drop(KEYS[1]) ledger_drop(KEYS[2]) "
    "return v[2]"
)
# KEYS: ledger's. ARGV: the members' beginning (``<uid>:grant:``). Answers each grant dropped,
# as its owner's digest and its encrypted grant, flat.
_DROP_ALL = Script(
    LEDGER + "local dropped = {} "
    "for _, member in ipairs(redis.call('ZRANGE', ledger_key, 0, -1)) do "
    "  if string.sub(member, 1, #ARGV[1]) == ARGV[1] then "
    "    if string.sub(member, -5) ~= ':lock' then "
    "      local v = redis.call('HGET', ledger_prefix .. member, 'v') "
    "      if v then "
    "        table.insert(dropped, string.sub(member, #ARGV[1] + 1)) "
    "        table.insert(dropped, v) "
    "      end "
    "    end "
    "    ledger_drop(ledger_prefix .. member) "
    "  end "
    "end "
    "return dropped"
)
# KEYS: ledger's. ARGV: the members' beginning (``<uid>:grant:``), at most how many. Answers the
# count, the stats' failures and last failure, then each grant listed as its owner's digest and
# its encrypted grant, flat.
_LIST = Script(
    LEDGER + "local listed, count = {}, 0 "
    "for _, member in ipairs(redis.call('ZRANGE', ledger_key, 0, -1)) do "
    "  if string.sub(member, 1, #ARGV[1]) == ARGV[1] and #member == #ARGV[1] + 32 then "
    "    count = count + 1 "
    "    if count <= tonumber(ARGV[2]) then "
    "      local v = redis.call('HGET', ledger_prefix .. member, 'v') "
    "      if v then "
    "        table.insert(listed, string.sub(member, #ARGV[1] + 1)) "
    "        table.insert(listed, v) "
    "      end "
    "    end "
    "  end "
    "end "
    "local stats = redis.call('HMGET', ledger_prefix .. ARGV[1] .. 'stats', 'f', 'm') "
    "return {count, tonumber(stats[1]) or 0, stats[2] or '', listed}"
)
# KEYS: stats, ledger's. ARGV: the failure's words, idle ms.
_FAILED = Script(
    LEDGER + "redis.call('HINCRBY', KEYS[1], 'f', 1) "
    "redis.call('HSET', KEYS[1], 'm', ARGV[1]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
    "ledger_count(KEYS[1], ledger_usage(KEYS[1], ARGV[1]), "
    "  ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 1"
)


@dataclass(frozen=True)
class Listing:
    """A connection's grants: how many, up to MOST_LISTED of them (each owner's digest and the
    encrypted grant), and its refreshes that failed."""

    count: int
    grants: list[tuple[str, bytes]]
    failures: int
    last_failure: str


@dataclass(frozen=True)
class StoredGrant:
    generation: int
    binding: bytes
    encrypted: bytes
    lock_ms: int  # how long another's refresh lock has left (<= 0: none)


@dataclass(frozen=True)
class GrantKeys:
    """A grant's keys: its namespace (whose share counts it), the connection's uid and the
    owner's digest."""

    namespace: str
    connection_uid: str
    owner_digest: str

    def grant(self, prefix: str) -> str:
        return f"{prefix}{self.connection_uid}:grant:{self.owner_digest}"


class GrantStore:
    def __init__(self, store: SharedStore, shares: Shares) -> None:
        self.store = store
        self.shares = shares

    def _keys(self, keys: GrantKeys) -> list[str]:
        grant = keys.grant(prefix(keys.namespace))
        return [grant, grant + ":lock", *self.shares.keys(keys.namespace)]

    async def read(self, keys: GrantKeys) -> StoredGrant | None:
        answer = await self.store.run(_READ, self._keys(keys)[:2], [], deadline=DEADLINE_SECONDS)
        if not answer:
            return None
        generation, binding, encrypted, lock_ms = answer
        return StoredGrant(int(generation), bytes(binding), bytes(encrypted), int(lock_ms))

    async def keep(self, keys: GrantKeys, binding: bytes, encrypted: bytes) -> int | str:
        """The generation kept, or why not ('share', 'reserve')."""
        answer = await self.store.run(
            _KEEP,
            self._keys(keys),
            [
                binding,
                encrypted,
                IDLE_SECONDS * 1000,
                *self.shares.limits,
                self.shares.settings.reserve,
            ],
            deadline=DEADLINE_SECONDS,
        )
        return int(answer) if isinstance(answer, int) else bytes(answer).decode()

    async def lock(self, keys: GrantKeys, token: str, seconds: float, generation: int) -> int:
        """0 if this worker now holds the lock to refresh the grant's ``generation``; else the
        ms the holder's lock has, or -1 if the grant is another generation by now."""
        return int(
            await self.store.run(
                _LOCK,
                self._keys(keys),
                [token, int(seconds * 1000), generation],
                deadline=DEADLINE_SECONDS,
            )
        )

    async def unlock(self, keys: GrantKeys, token: str) -> None:
        all_keys = self._keys(keys)
        await self.store.run(
            _UNLOCK, [all_keys[1], *all_keys[2:]], [token], deadline=DEADLINE_SECONDS
        )

    async def rotate(self, keys: GrantKeys, generation: int, encrypted: bytes, token: str) -> bool:
        written = await self.store.run(
            _ROTATE,
            self._keys(keys),
            [generation, encrypted, IDLE_SECONDS * 1000, token],
            deadline=DEADLINE_SECONDS,
        )
        return int(written) == 1

    async def drop(self, keys: GrantKeys, generation: int | None = None) -> bytes | None:
        """The encrypted grant dropped (if it was that generation), or None."""
        dropped = await self.store.run(
            _DROP,
            self._keys(keys),
            ["" if generation is None else generation],
            deadline=DEADLINE_SECONDS,
        )
        return bytes(dropped) if dropped else None

    async def drop_all(self, namespace: str, connection_uid: str) -> list[tuple[str, bytes]]:
        """Each grant of the connection dropped: its owner's digest and the encrypted grant."""
        flat = await self.store.run(
            _DROP_ALL,
            self.shares.keys(namespace),
            [f"{connection_uid}:grant:"],
            deadline=DEADLINE_SECONDS,
        )
        return [(bytes(flat[i]).decode(), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]

    async def listed(self, namespace: str, connection_uid: str) -> Listing:
        count, failures, last, flat = await self.store.run(
            _LIST,
            self.shares.keys(namespace),
            [f"{connection_uid}:grant:", MOST_LISTED],
            deadline=DEADLINE_SECONDS,
        )
        grants = [(bytes(flat[i]).decode(), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]
        return Listing(int(count), grants, int(failures), bytes(last).decode(errors="replace"))

    async def failed(self, namespace: str, connection_uid: str, message: str) -> None:
        """Counts a refresh of the connection's grants that failed, and keeps its words."""
        stats = f"{prefix(namespace)}{connection_uid}:grant:stats"
        await self.store.run(
            _FAILED,
            [stats, *self.shares.keys(namespace)],
            [message[:1000], IDLE_SECONDS * 1000],
            deadline=DEADLINE_SECONDS,
        )
