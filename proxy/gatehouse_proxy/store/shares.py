"""Each namespace's share of the shared store: what it may hold there, counted in the store itself.

A tenant's admin decides how many connections, credentials and apps the namespace has, and a
token endpoint of its own decides how large its tokens are and how long they live; so, left
alone, one namespace could fill the store (64 MB by default) and every tenant's quotas and tokens
would then fall back to each worker alone (red-team round 4, R4-2: 2,670 tokens of 16 KiB). So:

- **Every key the proxy writes is counted to its namespace**, by the script that writes it,
  atomically: the namespace's ledger (a sorted set, ``gatehouse:{<namespace>}:ledger``) has an
  entry per key, its score packing when the key expires (a second of the store's clock) and the
  bytes it is charged (in 8-byte units), and ``...:held`` the sum. A token or a failure is
  charged what the store says it takes (``MEMORY USAGE``); a counter, a lock, a pause or a
  bounded hash its largest size (a minute's hash at 63 buckets, a hash of endpoints at 64), so
  that its growth needs no accounting; each entry is charged its own cost in the ledger too.
  Expired entries are released when the namespace next needs room, and every 30 s by each
  worker for the namespaces it routes (an entry whose key lives on, a minute counted again
  since, is given the key's new time); the ledger itself expires a minute after the last of
  what it counts.
- **A namespace may hold** ``namespace_bytes`` and ``namespace_keys`` (1 MiB and 2,048 by
  default). A write that would take it past either is refused for that namespace alone: its
  requests are then counted by each worker alone (its share of each limit) and its tokens minted
  and kept by each worker, counted (``gatehouse_proxy_store_refused_total``) and shown in
  ``/readyz`` (``store.sharesFull``). Nothing changes for any other namespace.
- **Tokens keep off a reserve**: a token is stored only while the store's used memory stays
  under ``1 - reserve`` of its ``maxmemory`` (a quarter kept by default), so that counters,
  locks and pauses, small and fixed in size, can always be written, however many namespaces
  hold their whole share of tokens.

Keys of a namespace share its hash tag (``{<namespace>}``), its ledger's included, so that every
script touches one Redis Cluster slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.shared_store import Script, SharedStore, StoreUnavailable

log = logging.getLogger("gatehouse.proxy.store")

# How long a namespace's refused write keeps its tokens with each worker before the store is
# asked again (the store's marker, ``...:full``, that every worker reads).
FULL_MARKER_MS = 10_000
# How long /readyz names a namespace whose write was refused.
SHOWN_SECONDS = 300.0
SHOWN_AT_MOST = 20
# How often a worker reads the store's memory and the namespaces' ledgers for its metrics, and
# how long each answer may take (off the requests' path: their deadline is not this one's).
WATCH_SECONDS = 30.0
WATCH_DEADLINE_SECONDS = 1.0

# What a counter, a lock or a pause is charged: its largest size in the store, measured
# (``MEMORY USAGE`` with a 100-character key, and the 40 bytes of its expiry): a minute's hash
# with 63 buckets takes 920 bytes, a day's 152, a pause, a lock, a mint's span or a credential's
# renewals 120; the hashes bounded at 64 endpoints: the endpoints' pauses 2,200, what endpoints
# said of a credential's tokens (gatehouse_proxy.credentials.token_refusals) 3,736.
MINUTE_BYTES = 1024
DAY_BYTES = 256
SMALL_BYTES = 192
PAUSES_BYTES = 2304
ENDPOINTS_BYTES = 4096

# The ledger's functions, which every script that writes a namespace's keys begins with. The
# ledger's keys are passed as the script's last two KEYS (ledger, held); members are key names
# without the namespace's prefix (``gatehouse:{<namespace>}:``). A score is the second the key
# expires (the store's clock) times 2^20, plus its charge in 8-byte units: exact in a double
# until the year 2106, for charges up to 8 MiB.
LEDGER = (
    f"local LEDGER_SMALL, LEDGER_MINUTE, LEDGER_DAY = {SMALL_BYTES}, {MINUTE_BYTES}, {DAY_BYTES} "
    f"local LEDGER_PAUSES, LEDGER_ENDPOINTS = {PAUSES_BYTES}, {ENDPOINTS_BYTES} "
    f"local LEDGER_FULL_MS = {FULL_MARKER_MS} "
    + """
local LEDGER_SHIFT = 1048576
local ledger_key, held_key = KEYS[#KEYS - 1], KEYS[#KEYS]
local ledger_prefix = string.sub(ledger_key, 1, -7)

local function ledger_now()
  return tonumber(redis.call('TIME')[1])
end

local function ledger_member(key)
  return string.sub(key, #ledger_prefix + 1)
end

-- What an entry is charged: the key's bytes and its own place in the ledger (a skiplist node
-- and the member, measured at 105 to 109 bytes besides the member).
local function ledger_cost(key, bytes)
  return math.ceil((bytes + #key + 112) / 8) * 8
end

local function ledger_score(expires, charge)
  return string.format('%.0f', expires * LEDGER_SHIFT + charge / 8)
end

local function ledger_charge(score)
  return (tonumber(score) % LEDGER_SHIFT) * 8
end

-- The ledger lives a minute past the last of what it counts, so that it never expires before
-- what it counts (what lives on past its noted time is noted again before that: every
-- worker settles each namespace's ledger every 30 s).
local function ledger_keep()
  local last = redis.call('ZRANGE', ledger_key, -1, -1, 'WITHSCORES')
  if #last == 0 then return end
  local lasting = math.floor(tonumber(last[2]) / LEDGER_SHIFT) - ledger_now() + 60
  redis.call('EXPIRE', ledger_key, math.max(lasting, 60))
  redis.call('EXPIRE', held_key, math.max(lasting, 60))
end

-- Releases what expired, at most 512 entries a call (the rest the next time).
local function ledger_settle()
  local now = ledger_now()
  local due = redis.call('ZRANGEBYSCORE', ledger_key, '-inf',
    string.format('%.0f', (now + 1) * LEDGER_SHIFT - 1), 'WITHSCORES', 'LIMIT', 0, 512)
  local freed, renewed = 0, false
  for i = 1, #due, 2 do
    local member, charge = due[i], ledger_charge(due[i + 1])
    local ttl = redis.call('PTTL', ledger_prefix .. member)
    if ttl == -2 then
      redis.call('ZREM', ledger_key, member)
      freed = freed + charge
    else
      -- Counted again since (a minute's key lives on): the key's time, not the one noted.
      if ttl < 0 then ttl = 3600000 end
      redis.call('ZADD', ledger_key, ledger_score(now + math.ceil(ttl / 1000), charge), member)
      renewed = true
    end
  end
  if freed > 0 then redis.call('DECRBY', held_key, freed) end
  if renewed then ledger_keep() end
end

-- Whether the namespace has room for each {key, bytes} of `entries` (some may be counted
-- already, at another size): within its keys and bytes at most, ARGV[max_at] and
-- ARGV[max_at + 1], once what expired is released.
local function ledger_fits(entries, max_at)
  ledger_settle()
  local keys, bytes = 0, 0
  for _, entry in ipairs(entries) do
    local old = redis.call('ZSCORE', ledger_key, ledger_member(entry[1]))
    if not old then keys = keys + 1 end
    bytes = bytes + ledger_cost(entry[1], entry[2]) - (old and ledger_charge(old) or 0)
  end
  if keys > 0 and redis.call('ZCARD', ledger_key) + keys > tonumber(ARGV[max_at]) then
    return false
  end
  local held = tonumber(redis.call('GET', held_key)) or 0
  return bytes <= 0 or held + bytes <= tonumber(ARGV[max_at + 1])
end

-- Counts `key` at `bytes` until `expires` (the store's seconds), in place of what it was
-- counted at before.
local function ledger_count(key, bytes, expires)
  local member = ledger_member(key)
  local old = redis.call('ZSCORE', ledger_key, member)
  local charge = ledger_cost(key, bytes)
  redis.call('ZADD', ledger_key, ledger_score(expires, charge), member)
  local delta = charge - (old and ledger_charge(old) or 0)
  if delta ~= 0 then redis.call('INCRBY', held_key, delta) end
  ledger_keep()
end

-- Deletes `key` and what it was counted at.
local function ledger_drop(key)
  local member = ledger_member(key)
  local old = redis.call('ZSCORE', ledger_key, member)
  redis.call('DEL', key)
  if old then
    redis.call('ZREM', ledger_key, member)
    redis.call('DECRBY', held_key, ledger_charge(old))
  end
end

-- What the store says `key` takes, with its expiry's entry (an estimate where MEMORY is
-- refused, as some managed stores do).
local function ledger_usage(key, value)
  local used = redis.pcall('MEMORY', 'USAGE', key)
  if type(used) ~= 'number' then used = #value + #key + 64 end
  return used + 40
end

-- Whether the store's used memory is within 1 - `reserve` of its maxmemory (no maxmemory:
-- nothing to keep; INFO refused: not known, allowed).
local function ledger_off_reserve(reserve)
  local info = redis.pcall('INFO', 'memory')
  if type(info) ~= 'string' then return true end
  local used = tonumber(string.match(info, 'used_memory:(%d+)'))
  local most = tonumber(string.match(info, 'maxmemory:(%d+)'))
  if not used or not most or most == 0 then return true end
  return used <= most * (1 - tonumber(reserve))
end
"""
)

# The namespace's keys and bytes, after releasing what expired: for its metrics.
_USAGE = Script(
    LEDGER
    + "ledger_settle() "
    + "return {redis.call('ZCARD', ledger_key), tonumber(redis.call('GET', held_key)) or 0}"
)


@dataclass(frozen=True)
class ShareSettings:
    """What one namespace may hold in the store, and what tokens leave to counters.

    The defaults hold 48 namespaces at their whole share within three quarters of the bundled
    store's 64 MB (docs/operating/shared-store.md, "The shared store")."""

    namespace_bytes: int = 1024 * 1024
    namespace_keys: int = 2048
    reserve: float = 0.25
    # Cached answers (gatehouse_proxy.store.answer_store) have a ledger and a share of their
    # own, so that a full cache never refuses a namespace's tokens and counters; like tokens,
    # they keep off the reserve.
    cache_bytes: int = 4 * 1024 * 1024
    cache_keys: int = 1024

    @property
    def cache_ceiling(self) -> float:
        """The share of the store's maxmemory kept free of cached answers: twice the tokens'
        reserve (half the store by default), so that answers, however many namespaces fill
        their cache share, never take the room tokens, grants and connect links are written
        into."""
        return min(2 * self.reserve, 0.9)


def prefix(namespace: str) -> str:
    """Where a namespace's keys begin: its hash tag keeps them, and its ledger, in one slot."""
    return f"gatehouse:{{{namespace}}}:"


@dataclass
class _Refusal:
    what: str  # tokens, counters
    reason: str  # share, reserve, full
    at: float  # time.monotonic()


class Shares:
    """The namespaces' shares: the keys and arguments the scripts take, and the writes the store
    refused (for /readyz and the metric)."""

    def __init__(self, settings: ShareSettings) -> None:
        self.settings = settings
        self._refused: dict[str, _Refusal] = {}
        self.usage: dict[str, tuple[int, int]] = {}  # namespace: (keys, bytes), as last read
        self.memory: tuple[int, int] | None = None  # the store's used memory and maxmemory

    def keys(self, namespace: str) -> list[str]:
        """The ledger's keys, passed last to every script that counts."""
        return [prefix(namespace) + "ledger", prefix(namespace) + "held"]

    def cache_keys(self, namespace: str) -> list[str]:
        """The cache's ledger's keys (its functions read the ledger's prefix off its name)."""
        return [prefix(namespace) + "cache:ledger", prefix(namespace) + "cache:held"]

    @property
    def limits(self) -> list[int]:
        return [self.settings.namespace_keys, self.settings.namespace_bytes]

    def refused(self, namespace: str, what: str, reason: str) -> None:
        metrics.count_store_refusal(namespace, what, reason)
        now = time.monotonic()
        last = self._refused.get(namespace)
        if last is None or now - last.at >= SHOWN_SECONDS:  # once a while, not per request
            log.warning(
                "the shared store refused %s of namespace %s (%s): each worker keeps them alone",
                what,
                namespace,
                _REASONS.get(reason, reason),
            )
        self._refused[namespace] = _Refusal(what, reason, now)

    def describe(self) -> dict[str, object]:
        """The namespaces whose writes were refused lately, the latest first."""
        now = time.monotonic()
        self._refused = {
            namespace: refusal
            for namespace, refusal in self._refused.items()
            if now - refusal.at < SHOWN_SECONDS
        }
        latest = sorted(self._refused.items(), key=lambda item: -item[1].at)[:SHOWN_AT_MOST]
        return {
            namespace: {
                "what": refusal.what,
                "reason": _REASONS.get(refusal.reason, refusal.reason),
                "secondsAgo": round(now - refusal.at, 1),
            }
            for namespace, refusal in latest
        }

    async def watch(self, store: SharedStore, namespaces: Callable[[], Iterable[str]]) -> None:
        """Reads the store's memory and the namespaces' ledgers every WATCH_SECONDS, for the
        metrics (and releases what expired in the ledgers of namespaces that write nothing)."""
        while True:
            with contextlib.suppress(StoreUnavailable):
                await self.read(store, sorted(set(namespaces())))
            await asyncio.sleep(WATCH_SECONDS)

    async def read(self, store: SharedStore, namespaces: list[str]) -> None:
        """One call per namespace, on the store's pool: the requests' batches have their own
        connection, which a reading of every namespace would hold up."""
        if not store.up:
            return
        self.memory = await store.memory(deadline=WATCH_DEADLINE_SECONDS)
        usage = {}
        for namespace in namespaces:
            keys, held = await store.run(
                _USAGE, self.keys(namespace), [], deadline=WATCH_DEADLINE_SECONDS
            )
            if int(keys):
                usage[namespace] = (int(keys), int(held))
        self.usage = usage


_REASONS = {
    "share": "the namespace's share of the store is full",
    "reserve": "the store's used memory has reached its reserve, kept for counters",
    "full": "the store is full (maxmemory)",
}
