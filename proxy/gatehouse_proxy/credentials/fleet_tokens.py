"""One access token per credential for the whole fleet, minted once and renewed once.

Several minters race and lose: providers that revoke the previous token at each mint (or limit their
token endpoint) answer N replicas x M workers minting for themselves with ``invalid_grant`` and
401s. So a token is kept in the shared store (encrypted with the keyring, under a key named by the
connection's uid and a digest of the credential), and only the worker that takes the credential's
lock asks the endpoint; the others wait for its token and use it. In each worker:

- a token in memory is used until its refresh time (a margin before it expires: a quarter of its
  life, at most a minute), with no call to the store;
- then one request per worker asks the store (the others in that worker wait for it): a fresh
  token there is taken, else the worker that takes the lock mints and stores it, and the others
  poll until it is there;
- a 401 from the upstream with a token is judged for the fleet
  (:mod:`gatehouse_proxy.credentials.token_refusals`): the token is dropped from the store only if
  the store still holds that very token (compared by digest) and the endpoint that refused it has
  not refused another token before, and at most ``MAX_RENEWALS`` times a minute. A storm of 401s
  after a revocation makes one new token, not one per request, and a path that answers 401 to
  every token makes one per mark, not one per request. The request that was refused asks for a
  token other than its own; the others keep the one this worker holds until it is replaced, so
  no request waits for a token it did not lose. Tokens of a credential are minted at least
  ``MINT_SPACING_SECONDS`` apart (a mint waits for the end of that span);
- a failing endpoint is remembered, fleet-wide, for a backoff that doubles from 2 s to 60 s.

With no store, or while it is down, each worker mints for itself (one request at a time per
credential); that is the fallback, counted and shown in /readyz, not the design.

What a connection keeps in the store is counted to its namespace (:mod:`gatehouse_proxy.
store_shares`): its token, its lock, its mint's span, its failures, its renewals and what its
endpoints said of its tokens (the judgement of 401s). A token over the
namespace's share (or into the store's reserve) is not kept there: the worker that minted it
keeps it, and for a few seconds (the namespace's ``full`` marker) every worker mints that
namespace's tokens alone; other namespaces share theirs as before. Keys are named by the
connection alone (``gatehouse:{<namespace>}:<uid>:token...``), one token per connection, the
credential's digest leading the stored value: a changed credential's token is another, never
read, and is replaced by the next mint. When the routing table changes a credential or drops a
connection, every worker deletes its old token, its renewals and its endpoints' judgements
(idempotent: the first finds them, the others nothing), so that no credential outlives its
route in the store.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from gatehouse_contract.errors import as_refusal_code
from gatehouse_contract.keyring import Encrypted, KeyringError, KeyringFile
from gatehouse_proxy.credentials.token_grants import MintedToken
from gatehouse_proxy.credentials.token_refusals import Judged, Refusal, Refusals
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.shared_store import Script, SharedStore, StoreFull, StoreUnavailable
from gatehouse_proxy.store.shares import LEDGER, Shares, ShareSettings, prefix

log = logging.getLogger("gatehouse.proxy.tokens")

MAX_REFRESH_MARGIN_SECONDS = 60.0
MINT_SPACING_SECONDS = 2.0
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 60.0
# How long a worker that did not get the lock waits for the token of the one that did before it
# asks again (the lock lapses with its holder); the lock outlives the longest token request.
LOCK_SECONDS = 15.0
# A token is asked of the store rarely and waited for anyway: a store answer may take this long
# (a loaded worker's event loop is part of it) before the worker mints alone.
STORE_DEADLINE_SECONDS = 1.0
_POLL_FIRST, _POLL_MAX = 0.01, 0.1

Mint = Callable[[], Awaitable[MintedToken]]

# A stored token: the format (1 byte), the credential's digest (16 bytes: a changed credential
# does not read another's token), the token's own (16: a 401 drops only the token it refused),
# the keyring key's id (its length in 2 bytes, then the id), and the token encrypted with it (a
# 12-byte nonce, the ciphertext with its 16-byte tag). Raw bytes, not the JSON of base64 the
# credentials travel in: a 16,000-character token took 24,712 bytes of the store that way, and
# about 16,500 so (what the store says, MEMORY USAGE).
_FORMAT = b"\x01"
_DIGEST_BYTES = 16
_NONCE_BYTES = 12

# The token (1), else the failure remembered (2), else whether the namespace's tokens are kept
# by each worker for now (3), and how long the store keeps what it answers, in one round trip.
_READ = Script(
    "local v = redis.call('GET', KEYS[1]) "
    "if v and string.sub(v, 2, 17) == ARGV[1] then return {1, v, redis.call('PTTL', KEYS[1])} end "
    "local f = redis.call('GET', KEYS[2]) "
    "if f and string.sub(f, 1, 16) == ARGV[1] then "
    "  return {2, string.sub(f, 17), redis.call('PTTL', KEYS[2])} end "
    "if redis.call('EXISTS', KEYS[3]) == 1 then return {3, '', 0} end "
    "return {0, '', 0}"
)
# Drops the token only if it is the one that was refused (by its digest): a 401 judged by the
# worker alone, the namespace's share having no room for the judgement's keys.
_DROP = Script(
    LEDGER + "local v = redis.call('GET', KEYS[1]) "
    "if v and string.sub(v, 18, 33) == ARGV[1] then ledger_drop(KEYS[1]) return 1 end "
    "return 0"
)
# Takes the credential's lock to mint, unless another worker holds it (-1: poll for its token),
# the last mint was less than a span ago (the milliseconds left of the span), or the namespace
# has no room for the lock (-2: its tokens are kept by each worker for now).
_TAKE = Script(
    LEDGER + "local left = redis.call('PTTL', KEYS[2]) "
    "if left > 0 then return left end "
    "if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end "
    "if not ledger_fits({{KEYS[1], LEDGER_SMALL}}, 3) then "
    "  redis.call('SET', KEYS[3], 'share', 'PX', LEDGER_FULL_MS) return -2 end "
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "ledger_count(KEYS[1], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[2] / 1000)) "
    "return 0"
)
# Gives the lock back (if it is still this worker's), clears the failures and stores the token,
# counted at what the store says it takes, with the span before the next mint; or, past the
# namespace's share or into the store's reserve, deletes it again and marks the namespace's
# tokens as each worker's for a while. Answers 'kept', 'share' or 'reserve'.
_STORE = Script(
    LEDGER + "if redis.call('GET', KEYS[2]) == ARGV[3] then ledger_drop(KEYS[2]) end "
    "ledger_drop(KEYS[3]) "
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "local bytes = ledger_usage(KEYS[1], ARGV[1]) "
    "local refused = false "
    "if not ledger_fits({{KEYS[1], bytes}, {KEYS[4], LEDGER_SMALL}}, 5) then refused = 'share' "
    "elseif not ledger_off_reserve(ARGV[7]) then refused = 'reserve' end "
    "if refused then "
    "  ledger_drop(KEYS[1]) "
    "  redis.call('SET', KEYS[5], refused, 'PX', LEDGER_FULL_MS) "
    "  return refused "
    "end "
    "local now = ledger_now() "
    "ledger_count(KEYS[1], bytes, now + math.ceil(ARGV[2] / 1000)) "
    "redis.call('SET', KEYS[4], '1', 'PX', ARGV[4]) "
    "ledger_count(KEYS[4], LEDGER_SMALL, now + math.ceil(ARGV[4] / 1000)) "
    "return 'kept'"
)
# Remembers a failure (the credential's digest, then the code, a line feed and the message) for
# a backoff that doubles with each failure in a row, and gives the lock back; answers the
# backoff in milliseconds (negative: not remembered, the namespace's share being full).
_FAIL = Script(
    LEDGER + "if redis.call('GET', KEYS[1]) == ARGV[4] then ledger_drop(KEYS[1]) end "
    "local n = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1 "
    "local delay = math.floor(math.min(tonumber(ARGV[2]) * 2 ^ (n - 1), tonumber(ARGV[3]))) "
    "local record = LEDGER_SMALL + math.ceil(#ARGV[1] * 1.25) "
    "if not ledger_fits({{KEYS[2], LEDGER_SMALL}, {KEYS[3], record}}, 5) then return -delay end "
    "local now = ledger_now() "
    "redis.call('SET', KEYS[2], n, 'EX', 600) "
    "ledger_count(KEYS[2], LEDGER_SMALL, now + 600) "
    "redis.call('SET', KEYS[3], ARGV[1], 'PX', delay) "
    "ledger_count(KEYS[3], record, now + math.ceil(delay / 1000)) "
    "return delay"
)
# Deletes a connection's token and failure that are not the credential's (ARGV[1]), and its
# failures in a row, mint's span, renewals and what its endpoints said of its tokens (the new
# credential starts afresh); with ARGV[1] empty (the connection is gone), all of them and its
# lock. KEYS: as _FORGOTTEN names them, then the ledger's. Answers whether a token was deleted.
_FORGOTTEN = ("", ":lock", ":minted", ":fails", ":failed", ":renewals", ":endpoints")
_FORGET = Script(
    LEDGER + "local function stale(key, at) "
    "  local v = redis.call('GET', KEYS[key]) "
    "  return v and (ARGV[1] == '' or string.sub(v, at, at + 15) ~= ARGV[1]) "
    "end "
    "local dropped = 0 "
    "if stale(1, 2) then ledger_drop(KEYS[1]) dropped = 1 end "
    "if stale(5, 1) then ledger_drop(KEYS[5]) end "
    "ledger_drop(KEYS[3]) "
    "ledger_drop(KEYS[4]) "
    "ledger_drop(KEYS[6]) "
    "ledger_drop(KEYS[7]) "
    "if ARGV[1] == '' then ledger_drop(KEYS[2]) end "
    "return dropped"
)


def digest(token: str) -> bytes:
    """What names a token in the store (a 401 drops it only if the store still holds it)."""
    return hashlib.sha256(token.encode()).digest()[:_DIGEST_BYTES]


def refresh_margin(lifetime: float) -> float:
    return min(MAX_REFRESH_MARGIN_SECONDS, lifetime / 4)


@dataclass(frozen=True)
class CredentialKey:
    """Names a credential's token: the connection's uid (which the store's keys are named by)
    and a digest of everything the token depends on (the encrypted credential's fingerprint, the
    token URL, the client, the scopes). A changed secret or scope is another token."""

    connection: str  # namespace/name, for metrics and logs
    connection_uid: str
    digest: str

    @classmethod
    def of(cls, connection: str, connection_uid: str, parts: Iterable[str]) -> CredentialKey:
        text = "\x1f".join([connection_uid, *parts])
        return cls(connection, connection_uid, hashlib.sha256(text.encode()).hexdigest()[:32])

    @property
    def namespace(self) -> str:
        return self.connection.partition("/")[0]

    def store_key(self, suffix: str) -> str:
        """The connection's token key, and its lock's and failures' (``suffix``): one token per
        connection, in its namespace's slot, whatever the credential."""
        return f"{prefix(self.namespace)}{self.connection_uid}:token{suffix}"

    @property
    def stored_digest(self) -> bytes:
        return bytes.fromhex(self.digest)


@dataclass
class _Held:
    value: str
    refresh_at: float  # time.monotonic()


@dataclass
class _Failed:
    until: float
    delay: float
    error: ProxyError


class FleetTokens:
    def __init__(
        self, store: SharedStore | None, keyring: KeyringFile, shares: Shares | None = None
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.shares = shares or Shares(ShareSettings())
        self.owner = f"{os.getpid()}-{os.urandom(6).hex()}"
        self._held: dict[CredentialKey, _Held] = {}
        self._locks: dict[CredentialKey, asyncio.Lock] = {}
        self._failed: dict[CredentialKey, _Failed] = {}
        self.refusals = Refusals()
        # The 401s being judged (credential, token digest, endpoint): the same 401s of a storm
        # wait for that one judgement instead of making their own.
        self._judging: dict[Refusal, asyncio.Future[Judged]] = {}
        # When this worker last minted alone, per credential (the store keeps the fleet's).
        self._last_mint: dict[CredentialKey, float] = {}
        # The credentials the routing table had last, by connection uid (None: no table yet),
        # and the deletions of changed or dropped ones' tokens under way in the store.
        self._routed: dict[str, CredentialKey] | None = None
        self._forgetting: set[asyncio.Task[None]] = set()

    async def token(
        self,
        key: CredentialKey,
        mint: Mint,
        *,
        shared: bool = True,
        within: float = 60.0,
        refused: str = "",
    ) -> str:
        """A token for ``key``; ``mint`` asks the endpoint (only when nobody has a fresh one).
        ``shared=False`` keeps it to this worker (a draft's test). A request waits at most
        ``within`` seconds for it (its own timeout), however many wait before it. ``refused``:
        a token the upstream refused this request, which it must not be given again."""
        held = self._held.get(key)
        if held is not None and held.refresh_at > time.monotonic() and held.value != refused:
            return held.value
        try:
            async with asyncio.timeout(within):
                return await self._token(key, mint, shared=shared, refused=refused)
        except TimeoutError:
            raise ProxyError(
                "token_endpoint_failed",
                f"no token for this connection within {within:g}s (its tokens are being asked "
                "for, or refused, faster than the provider may be asked)",
            ) from None

    async def _token(self, key: CredentialKey, mint: Mint, *, shared: bool, refused: str) -> str:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            held = self._held.get(key)
            if held is not None and held.refresh_at > time.monotonic() and held.value != refused:
                return held.value
            failed = self._failed.get(key)
            if failed is not None and failed.until > time.monotonic():
                raise failed.error.again()
            if shared and self.store is not None and self.store.up:
                try:
                    return await self._through_store(key, mint)
                except StoreFull:
                    self.shares.refused(key.namespace, "tokens", "full")
                except StoreUnavailable:
                    pass
            return await self._mint_alone(key, mint)

    async def refused(
        self, key: CredentialKey, token: str, endpoint: str, *, shared: bool = True
    ) -> Judged:
        """The upstream answered 401 to ``token`` on ``endpoint``: what that says, judged for
        the fleet (or by this worker alone: the store away, or ``shared=False``). On "renewed"
        the token is dropped from the store, and a request that asks for a token other than it
        (``token(refused=...)``) gets a new one."""
        judged = self.refusals.marked(key, endpoint)
        if judged is not None:
            return judged
        which = Refusal(key, digest(token), endpoint)
        pending = self._judging.get(which)
        if pending is None:
            pending = asyncio.ensure_future(self._judge(key, which, shared))
            self._judging[which] = pending
            pending.add_done_callback(lambda _: self._judging.pop(which, None))
        return await asyncio.shield(pending)

    async def _judge(self, key: CredentialKey, refusal: Refusal, shared: bool) -> Judged:
        if shared and self.store is not None and self.store.up:
            keys = [
                key.store_key(""),
                key.store_key(":renewals"),
                key.store_key(":endpoints"),
                prefix(key.namespace) + "full",
                *self.shares.keys(key.namespace),
            ]
            full = ""
            try:
                judged = await self.refusals.judge_in_store(
                    self.store, keys, self.shares.limits, refusal, STORE_DEADLINE_SECONDS
                )
            except StoreFull:
                full = "full"
            except StoreUnavailable:
                pass
            else:
                if judged is not None:
                    return judged
                # No room in the namespace's share for what the judgement keeps: its tokens
                # are each worker's for now (the store's marker), and so is this judgement.
                full = "share"
            if full:
                self.shares.refused(key.namespace, "tokens", full)
                judged = self._judge_alone(key, refusal)
                if judged.verdict == "renewed":
                    # The store still holds the refused token: no worker is to read it again.
                    await self._drop(key, refusal.token)
                return judged
        return self._judge_alone(key, refusal)

    def _judge_alone(self, key: CredentialKey, refusal: Refusal) -> Judged:
        held = self._held.get(key)
        current = digest(held.value) if held is not None else b""
        return self.refusals.judge_alone(refusal, current)

    async def _drop(self, key: CredentialKey, refused: bytes) -> None:
        assert self.store is not None
        with contextlib.suppress(StoreUnavailable):
            await self.store.run(
                _DROP,
                [key.store_key(""), *self.shares.keys(key.namespace)],
                [refused],
                deadline=STORE_DEADLINE_SECONDS,
            )

    def forget(self, keep: set[CredentialKey]) -> None:
        """The routing table now routes the credentials ``keep``: what this worker holds of
        any other is dropped, and so is, in the store, the token of a credential the table
        changed or dropped since the last one."""
        known = {*self._held, *self._failed, *self._locks, *self._last_mint}
        for key in [key for key in known if key not in keep]:
            self.discard(key)
        self.refusals.forget(keep)
        routed = {key.connection_uid: key for key in keep}
        if self._routed is not None and self.store is not None:
            stale = [
                (old, routed.get(uid))
                for uid, old in self._routed.items()
                if routed.get(uid) != old
            ]
            if stale:
                task = asyncio.ensure_future(self._forget_in_store(stale))
                self._forgetting.add(task)
                task.add_done_callback(self._forgetting.discard)
        self._routed = routed

    async def _forget_in_store(
        self, stale: list[tuple[CredentialKey, CredentialKey | None]]
    ) -> None:
        """Deletes the tokens of credentials the table changed (all but the new one's) or
        dropped (all of the connection's keys), one call each on the store's pool (off the
        requests' batches)."""
        assert self.store is not None
        for old, new in stale:
            with contextlib.suppress(StoreUnavailable):
                await self.store.run(
                    _FORGET,
                    [*(old.store_key(s) for s in _FORGOTTEN), *self.shares.keys(old.namespace)],
                    [new.stored_digest if new is not None else b""],
                    deadline=STORE_DEADLINE_SECONDS,
                )

    async def close(self) -> None:
        """Waits for the deletions under way (the store answers each within its deadline)."""
        await asyncio.gather(*self._forgetting, return_exceptions=True)

    def discard(self, key: CredentialKey) -> None:
        self._held.pop(key, None)
        self._failed.pop(key, None)
        self._last_mint.pop(key, None)
        self.refusals.discard(key)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    async def _mint_alone(self, key: CredentialKey, mint: Mint) -> str:
        # Runs under the credential's lock: the requests waiting for it wait for the span too.
        wait = self._last_mint.get(key, -MINT_SPACING_SECONDS) + MINT_SPACING_SECONDS
        await asyncio.sleep(max(wait - time.monotonic(), 0))
        started = time.monotonic()
        self._last_mint[key] = started
        try:
            minted = await self._mint(key, mint, shared=False)
        except ProxyError as error:
            failed = self._failed.get(key)
            delay = min(failed.delay * 2, MAX_BACKOFF_SECONDS) if failed else BACKOFF_SECONDS
            self._failed[key] = _Failed(time.monotonic() + delay, delay, error)
            raise
        self._failed.pop(key, None)
        self._keep(key, minted.value, minted.lifetime, started)
        return minted.value

    async def _mint(self, key: CredentialKey, mint: Mint, *, shared: bool) -> MintedToken:
        try:
            minted = await mint()
        except ProxyError:
            metrics.count_token_request(key.connection, "failed", shared=shared)
            raise
        metrics.count_token_request(key.connection, "issued", shared=shared)
        return minted

    def _keep(self, key: CredentialKey, value: str, lifetime: float, started: float) -> None:
        self._held[key] = _Held(value, started + lifetime - refresh_margin(lifetime))

    async def _through_store(self, key: CredentialKey, mint: Mint) -> str:
        """The fleet's token: the store's, or minted under the credential's lock and kept
        there. Raises StoreUnavailable when this worker should mint alone (the store is away,
        or the namespace's tokens are each worker's for now)."""
        assert self.store is not None
        token_key, lock_key = key.store_key(""), key.store_key(":lock")
        ledger = self.shares.keys(key.namespace)
        pause = _POLL_FIRST
        while True:
            found, stored, ttl_ms = await self.store.run(
                _READ,
                [token_key, key.store_key(":failed"), prefix(key.namespace) + "full"],
                [key.stored_digest],
                deadline=STORE_DEADLINE_SECONDS,
            )
            now = time.monotonic()
            if found == _FOUND_TOKEN:
                value = self._decrypt(key, stored)
                if value is not None:
                    # The store's clock, not this replica's: its TTL ends at the refresh time.
                    self._held[key] = _Held(value, now + int(ttl_ms) / 1000)
                    return value
            if found == _FOUND_FAILURE:
                error = _stored_failure(stored)
                delay = max(int(ttl_ms), 1) / 1000
                self._failed[key] = _Failed(now + delay, delay, error)
                raise error.again()
            if found == _FOUND_FULL:
                raise StoreUnavailable("the namespace's tokens are kept by each worker for now")
            wait_ms = await self.store.run(
                _TAKE,
                [lock_key, key.store_key(":minted"), prefix(key.namespace) + "full", *ledger],
                [self.owner, int(LOCK_SECONDS * 1000), *self.shares.limits],
                deadline=STORE_DEADLINE_SECONDS,
            )
            if int(wait_ms) == 0:
                return await self._mint_for_fleet(key, mint)
            if int(wait_ms) == _NO_ROOM:
                self.shares.refused(key.namespace, "tokens", "share")
                raise StoreUnavailable("the namespace's share of the store is full")
            if int(wait_ms) > 0:
                # The last mint was too recent: wait for its span to end (the store's clock).
                await asyncio.sleep(int(wait_ms) / 1000)
                continue
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)

    async def _mint_for_fleet(self, key: CredentialKey, mint: Mint) -> str:
        assert self.store is not None
        ledger = self.shares.keys(key.namespace)
        lock_key, fails_key = key.store_key(":lock"), key.store_key(":fails")
        started = time.monotonic()
        try:
            minted = await self._mint(key, mint, shared=True)
        except ProxyError as error:
            try:
                delay_ms = await self.store.run(
                    _FAIL,
                    [lock_key, fails_key, key.store_key(":failed"), *ledger],
                    [
                        key.stored_digest + f"{error.code}\n{error.message}".encode(),
                        int(BACKOFF_SECONDS * 1000),
                        int(MAX_BACKOFF_SECONDS * 1000),
                        self.owner,
                        *self.shares.limits,
                    ],
                    deadline=STORE_DEADLINE_SECONDS,
                )
                if int(delay_ms) < 0:  # not remembered: the namespace's share is full
                    self.shares.refused(key.namespace, "tokens", "share")
                    delay = -int(delay_ms) / 1000
                    self._failed[key] = _Failed(time.monotonic() + delay, delay, error)
            except StoreUnavailable:
                self._failed[key] = _Failed(
                    time.monotonic() + BACKOFF_SECONDS, BACKOFF_SECONDS, error
                )
            raise
        keep_ms = int((minted.lifetime - refresh_margin(minted.lifetime)) * 1000)
        encrypted = self.keyring.current().encrypt(minted.value.encode(), _context(key))
        self._keep(key, minted.value, minted.lifetime, started)
        # If the store went away, or has no room for it, this worker has it; the others mint
        # after the lock lapses, or alone.
        try:
            kept = await self.store.run(
                _STORE,
                [
                    key.store_key(""),
                    lock_key,
                    fails_key,
                    key.store_key(":minted"),
                    prefix(key.namespace) + "full",
                    *ledger,
                ],
                [
                    _pack(key, minted.value, encrypted),
                    max(keep_ms, 1),
                    self.owner,
                    int(MINT_SPACING_SECONDS * 1000),
                    *self.shares.limits,
                    self.shares.settings.reserve,
                ],
                deadline=STORE_DEADLINE_SECONDS,
            )
        except StoreFull:
            self.shares.refused(key.namespace, "tokens", "full")
        except StoreUnavailable:
            pass
        else:
            if kept != b"kept":
                self.shares.refused(key.namespace, "tokens", kept.decode())
        return minted.value

    def _decrypt(self, key: CredentialKey, stored: bytes) -> str | None:
        """The stored token, or None when it cannot be decrypted here (encrypted with a key this
        replica does not hold yet, or not ours): then it is minted again."""
        try:
            return self.keyring.current().decrypt(_unpack(stored), _context(key)).decode()
        except (KeyringError, ValueError, OSError):
            log.warning("a stored token of connection %s does not decrypt here", key.connection)
            return None


_FOUND_TOKEN, _FOUND_FAILURE, _FOUND_FULL = 1, 2, 3
_NO_ROOM = -2


def _pack(key: CredentialKey, token: str, encrypted: Encrypted) -> bytes:
    key_id = encrypted.key_id.encode()
    nonce, ciphertext = encrypted.raw
    return b"".join(
        [
            _FORMAT,
            key.stored_digest,
            digest(token),
            len(key_id).to_bytes(2, "big"),
            key_id,
            nonce,
            ciphertext,
        ]
    )


def _unpack(stored: bytes) -> Encrypted:
    """The encrypted token of a stored value (its digests, checked by the store, skipped);
    ValueError if it is not one."""
    at = 1 + 2 * _DIGEST_BYTES
    if stored[:1] != _FORMAT or len(stored) < at + 2:
        raise ValueError("not a stored token")
    end = at + 2 + int.from_bytes(stored[at : at + 2], "big")
    return Encrypted(
        key_id=stored[at + 2 : end].decode(),
        nonce=base64.b64encode(stored[end : end + _NONCE_BYTES]).decode(),
        ciphertext=base64.b64encode(stored[end + _NONCE_BYTES :]).decode(),
    )


def _context(key: CredentialKey) -> str:
    return f"token|{key.connection_uid}|{key.digest}"


def _stored_failure(stored: bytes) -> ProxyError:
    """A failure as the store keeps it (after the credential's digest): code, line feed,
    message."""
    code, _, message = stored.decode("utf-8", "replace").partition("\n")
    return ProxyError(as_refusal_code(code) or "token_endpoint_failed", message)
