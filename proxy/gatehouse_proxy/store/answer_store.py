"""Where the fleet keeps cached answers (:mod:`gatehouse_proxy.caching`): one hash per answer, a
lock per answer being fetched, and a marker for an answer not to wait for.

The store sees only digests and ciphertext: an answer's key is a digest of what identifies it
(:mod:`gatehouse_proxy.caching.answer_keys`), its value the answer encrypted by the caller. Each
namespace's answers are counted in a ledger of their own (``gatehouse:{<ns>}:cache:ledger``, the
functions of :mod:`gatehouse_proxy.store.shares`), against the namespace's cache share
(``cache_bytes``, ``cache_keys``): an answer that does not fit evicts the namespace's own
entries nearest their end, never another namespace's, and is not kept at all when even that
would not make room, or when the store's memory has reached the reserve counters keep.

- ``read``: the answer (its ciphertext and serial), the lock's time left, whether a pass marker
  is set.
- ``lock``: ``SET NX PX`` of the fetcher's token, taken only if the answer is still the serial
  the caller read (else another fetch ended meanwhile: read again); ``beat`` keeps it while the
  fetch runs, so that a lock whose worker died ends within one beat's lifetime.
- ``keep``: the answer written under a new serial, the lock given back; ``pass_on``: a marker
  that sends identical requests straight to the vendor for a while (an answer that may not be
  kept, or a fetch that failed), the lock given back, the old answer dropped if asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_proxy.store.shared_store import Script, SharedStore
from gatehouse_proxy.store.shares import LEDGER, Shares, prefix

# How long a store call on an answer's way may take: an answer is up to a few MiB.
DEADLINE_SECONDS = 0.5
# The most entries one write evicts to make room; past them the write is refused.
MOST_EVICTED = 64
# How long identical requests go straight to the vendor after an answer that may not be kept.
PASS_MS = 30_000

_READ = Script(
    "local a = redis.call('HMGET', KEYS[1], 'a', 'n') "
    "return {a[1] or '', a[2] or '', redis.call('PTTL', KEYS[2]), "
    "  redis.call('GET', KEYS[3]) or ''}"
)
# KEYS: answer, lock, pass, ledger's. ARGV: token, ms, the serial read ('' none). Answers 0
# (taken), the holder's ms left, -2 (a pass marker is set) or -3 (the answer changed: read again).
# Counted, never refused: a lock lives seconds, one per fetch in flight.
_LOCK = Script(
    LEDGER + "local left = redis.call('PTTL', KEYS[2]) "
    "if left > 0 then return left end "
    "if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end "
    "if (redis.call('HGET', KEYS[1], 'n') or '') ~= ARGV[3] then return -3 end "
    "redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) "
    "ledger_count(KEYS[2], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 0"
)
# KEYS: lock. ARGV: token, ms. Answers 1 while the lock is the token's.
_BEAT = Script(
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1"
)
_UNLOCK = Script(
    LEDGER + "if redis.call('GET', KEYS[1]) == ARGV[1] then ledger_drop(KEYS[1]) return 1 end "
    "return 0"
)
# KEYS: answer, lock, pass, ledger's. ARGV: ciphertext, serial, ms, token, the namespace's
# cache keys and bytes at most, the cache's ceiling (a share of maxmemory kept free of answers),
# the pass marker's ms. Answers {'kept' / 'share' / 'reserve', evicted}; an answer not kept sets
# the pass marker, so that identical requests do not queue for a fetch nobody can keep.
_KEEP = Script(
    LEDGER + "local function refused(why, evicted) "
    "  ledger_drop(KEYS[1]) "
    "  redis.call('SET', KEYS[3], '1', 'PX', ARGV[8]) "
    "  ledger_count(KEYS[3], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[8] / 1000)) "
    "  return {why, evicted} "
    "end "
    "if redis.call('GET', KEYS[2]) == ARGV[4] then ledger_drop(KEYS[2]) end "
    "ledger_drop(KEYS[3]) "
    "if not ledger_off_reserve(ARGV[7]) then return refused('reserve', 0) end "
    "redis.call('DEL', KEYS[1]) "
    "redis.call('HSET', KEYS[1], 'a', ARGV[1], 'n', ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
    "local entry = {{KEYS[1], ledger_usage(KEYS[1], ARGV[1])}} "
    # An answer larger than the whole share evicts nothing: it would never fit.
    "if ledger_cost(KEYS[1], entry[1][2]) > tonumber(ARGV[6]) then return refused('share', 0) end "
    "local own, evicted = ledger_member(KEYS[1]), 0 "
    f"while not ledger_fits(entry, 5) and evicted < {MOST_EVICTED} do "
    # The namespace's own entry nearest its end (a lock or a marker in flight is left be).
    "  local victim = nil "
    "  for _, member in ipairs(redis.call('ZRANGE', ledger_key, 0, 15)) do "
    "    local tail = string.sub(member, -5) "
    "    if member ~= own and tail ~= ':lock' and tail ~= ':pass' then "
    "      victim = member break "
    "    end "
    "  end "
    "  if not victim then break end "
    "  ledger_drop(ledger_prefix .. victim) evicted = evicted + 1 "
    "end "
    "if not ledger_fits(entry, 5) then return refused('share', evicted) end "
    "ledger_count(KEYS[1], entry[1][2], ledger_now() + math.ceil(ARGV[3] / 1000)) "
    "return {'kept', evicted}"
)
# KEYS: answer, lock, pass, ledger's. ARGV: token, ms, '1' to drop the answer too, the marker
# ('1': go to the vendor; 'e': the vendor is failing, a stale answer may stand in).
_PASS = Script(
    LEDGER + "if redis.call('GET', KEYS[2]) == ARGV[1] then ledger_drop(KEYS[2]) end "
    "if ARGV[3] == '1' then ledger_drop(KEYS[1]) end "
    "redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[2]) "
    "ledger_count(KEYS[3], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 1"
)


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """What the store holds for an answer's key."""

    ciphertext: bytes  # b"": no answer
    serial: str  # "": no answer
    lock_ms: int  # how long the lock of a fetch in flight has left (<= 0: none)
    # A pass marker: "pass" (go to the vendor, neither wait nor keep), "failing" (the last fetch
    # failed: a stale answer may stand in), "" none.
    marker: str


@dataclass(frozen=True, slots=True)
class Kept:
    outcome: str  # kept, share (the namespace's cache share is full), reserve
    evicted: int


class AnswerStore:
    def __init__(self, store: SharedStore, shares: Shares) -> None:
        self.store = store
        self.shares = shares

    def _keys(self, namespace: str, digest: str) -> list[str]:
        answer = f"{prefix(namespace)}cache:{digest}"
        return [answer, answer + ":lock", answer + ":pass", *self.shares.cache_keys(namespace)]

    async def read(self, namespace: str, digest: str) -> StoredAnswer:
        ciphertext, serial, lock_ms, marker = await self.store.run(
            _READ, self._keys(namespace, digest)[:3], [], deadline=DEADLINE_SECONDS
        )
        marked = {b"1": "pass", b"e": "failing"}.get(bytes(marker), "")
        return StoredAnswer(bytes(ciphertext), bytes(serial).decode(), int(lock_ms), marked)

    async def lock(self, namespace: str, digest: str, token: str, ms: int, serial: str) -> int:
        """0 if ``token`` now holds the answer's lock; else the holder's ms left, -2 (pass
        marker) or -3 (the answer is no longer ``serial``)."""
        return int(
            await self.store.run(
                _LOCK,
                self._keys(namespace, digest),
                [token, ms, serial],
                deadline=DEADLINE_SECONDS,
            )
        )

    async def beat(self, namespace: str, digest: str, token: str, ms: int) -> bool:
        lock = self._keys(namespace, digest)[1]
        return int(await self.store.run(_BEAT, [lock], [token, ms])) == 1

    async def unlock(self, namespace: str, digest: str, token: str) -> None:
        keys = self._keys(namespace, digest)
        await self.store.run(_UNLOCK, [keys[1], *keys[3:]], [token], deadline=DEADLINE_SECONDS)

    async def keep(
        self, namespace: str, digest: str, answer: tuple[bytes, str], ms: int, token: str
    ) -> Kept:
        """``answer`` (ciphertext, serial) kept for ``ms``, the lock given back; not kept, a
        pass marker for ``PASS_MS`` instead."""
        settings = self.shares.settings
        outcome, evicted = await self.store.run(
            _KEEP,
            self._keys(namespace, digest),
            [
                *answer,
                ms,
                token,
                settings.cache_keys,
                settings.cache_bytes,
                settings.cache_ceiling,
                PASS_MS,
            ],
            deadline=DEADLINE_SECONDS,
        )
        return Kept(bytes(outcome).decode(), int(evicted))

    async def pass_on(
        self, namespace: str, digest: str, token: str, ms: int, *, failing: bool
    ) -> None:
        """A pass marker for ``ms``, the lock given back: after an answer that may not be
        kept, which replaces the answer kept before it (dropped); after a failed fetch
        (``failing``), which leaves it for stale-if-error."""
        await self.store.run(
            _PASS,
            self._keys(namespace, digest),
            [token, ms, "0" if failing else "1", "e" if failing else "1"],
            deadline=DEADLINE_SECONDS,
        )
