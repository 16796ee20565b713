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
  (:mod:`gatehouse_proxy.token_refusals`): the token is dropped from the store only if the store
  still holds that very token (compared by digest) and the endpoint that refused it has not
  refused another token before, and at most ``MAX_RENEWALS`` times a minute. A storm of 401s
  after a revocation makes one new token, not one per request, and a path that answers 401 to
  every token makes one per mark, not one per request. The request that was refused asks for a
  token other than its own; the others keep the one this worker holds until it is replaced, so
  no request waits for a token it did not lose. Tokens of a credential are minted at least
  ``MINT_SPACING_SECONDS`` apart (a mint waits for the end of that span);
- a failing endpoint is remembered, fleet-wide, for a backoff that doubles from 2 s to 60 s.

With no store, or while it is down, each worker mints for itself (one request at a time per
credential); that is the fallback, counted and shown in /readyz, not the design.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from gatehouse_contract.errors import as_refusal_code
from gatehouse_contract.keyring import Encrypted, KeyringError, KeyringFile
from gatehouse_proxy import metrics
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.shared_store import Script, SharedStore, StoreUnavailable
from gatehouse_proxy.token_grants import MintedToken
from gatehouse_proxy.token_refusals import Judged, Refusals

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

# The token and how long the store keeps it, or else the failure remembered and for how long,
# in one round trip.
_READ = Script(
    "local v = redis.call('GET', KEYS[1]) "
    "if v then return {v, redis.call('PTTL', KEYS[1])} end "
    "local f = redis.call('GET', KEYS[2]) "
    "if f then return {false, redis.call('PTTL', KEYS[2]), f} end "
    "return {false, 0}"
)
# A stored token: its digest (64 hex digits), then the token encrypted with the keyring.
_DIGEST_END = 64
# Takes the credential's lock to mint, unless another worker holds it (-1: poll for its token)
# or the last mint was less than a span ago (the milliseconds left of the span).
_TAKE = Script(
    "local left = redis.call('PTTL', KEYS[2]) "
    "if left > 0 then return left end "
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end "
    "return -1"
)
# Stores the token, starts the span before the next mint, clears the failures and gives the lock
# back, if it is still this worker's.
_STORE = Script(
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "redis.call('SET', KEYS[4], '1', 'PX', ARGV[4]) "
    "redis.call('DEL', KEYS[3]) "
    "if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end "
    "return 1"
)
# Remembers a failure for a backoff that doubles with each failure in a row, and gives the
# lock back; answers the backoff in milliseconds.
_FAIL = Script(
    "local n = redis.call('INCR', KEYS[3]) "
    "redis.call('PEXPIRE', KEYS[3], 600000) "
    "local delay = math.min(tonumber(ARGV[2]) * 2 ^ (n - 1), tonumber(ARGV[3])) "
    "redis.call('SET', KEYS[4], ARGV[1], 'PX', math.floor(delay)) "
    "if redis.call('GET', KEYS[2]) == ARGV[4] then redis.call('DEL', KEYS[2]) end "
    "return math.floor(delay)"
)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def refresh_margin(lifetime: float) -> float:
    return min(MAX_REFRESH_MARGIN_SECONDS, lifetime / 4)


@dataclass(frozen=True)
class CredentialKey:
    """Names a credential's token: the connection's uid (which the store's keys are grouped by)
    and a digest of everything the token depends on (the encrypted credential's fingerprint, the
    token URL, the client, the scopes). A changed secret or scope is another token."""

    connection: str  # namespace/name, for metrics and logs
    connection_uid: str
    digest: str

    @classmethod
    def of(cls, connection: str, connection_uid: str, parts: Iterable[str]) -> CredentialKey:
        text = "\x1f".join([connection_uid, *parts])
        return cls(connection, connection_uid, hashlib.sha256(text.encode()).hexdigest()[:32])

    def store_key(self, suffix: str) -> str:
        # The braces keep a credential's keys in one slot of a Redis Cluster.
        return f"gatehouse:{{{self.connection_uid}}}:token:{self.digest}{suffix}"


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
    def __init__(self, store: SharedStore | None, keyring: KeyringFile) -> None:
        self.store = store
        self.keyring = keyring
        self.owner = f"{os.getpid()}-{os.urandom(6).hex()}"
        self._held: dict[CredentialKey, _Held] = {}
        self._locks: dict[CredentialKey, asyncio.Lock] = {}
        self._failed: dict[CredentialKey, _Failed] = {}
        self.refusals = Refusals()
        # The 401s being judged (credential, token digest, endpoint): the same 401s of a storm
        # wait for that one judgement instead of making their own.
        self._judging: dict[tuple[CredentialKey, str, str], asyncio.Future[Judged]] = {}
        # When this worker last minted alone, per credential (the store keeps the fleet's).
        self._last_mint: dict[CredentialKey, float] = {}

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
        which = (key, digest(token), endpoint)
        pending = self._judging.get(which)
        if pending is None:
            pending = asyncio.ensure_future(self._judge(key, which[1], endpoint, shared))
            self._judging[which] = pending
            pending.add_done_callback(lambda _: self._judging.pop(which, None))
        return await asyncio.shield(pending)

    async def _judge(self, key: CredentialKey, refused: str, endpoint: str, shared: bool) -> Judged:
        if shared and self.store is not None and self.store.up:
            keys = [key.store_key(""), key.store_key(":renewals"), key.store_key(":endpoints")]
            with contextlib.suppress(StoreUnavailable):
                return await self.refusals.judge_in_store(
                    self.store, keys, key, refused, endpoint, STORE_DEADLINE_SECONDS
                )
        held = self._held.get(key)
        current = digest(held.value) if held is not None else ""
        return self.refusals.judge_alone(key, refused, endpoint, current)

    def forget(self, keep: set[CredentialKey]) -> None:
        known = {*self._held, *self._failed, *self._locks, *self._last_mint}
        for key in [key for key in known if key not in keep]:
            self.discard(key)
        self.refusals.forget(keep)

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
        assert self.store is not None
        token_key, lock_key = key.store_key(""), key.store_key(":lock")
        fails_key, failed_key = key.store_key(":fails"), key.store_key(":failed")
        pause = _POLL_FIRST
        while True:
            stored, ttl_ms, *failure = await self.store.run(
                _READ, [token_key, failed_key], [], deadline=STORE_DEADLINE_SECONDS
            )
            now = time.monotonic()
            if stored:
                value = self._decrypt(key, stored)
                if value is not None:
                    # The store's clock, not this replica's: its TTL ends at the refresh time.
                    self._held[key] = _Held(value, now + int(ttl_ms) / 1000)
                    return value
            if failure:
                error = _stored_failure(failure[0])
                delay = max(int(ttl_ms), 1) / 1000
                self._failed[key] = _Failed(now + delay, delay, error)
                raise error.again()
            wait_ms = await self.store.run(
                _TAKE,
                [lock_key, key.store_key(":minted")],
                [self.owner, int(LOCK_SECONDS * 1000)],
                deadline=STORE_DEADLINE_SECONDS,
            )
            if int(wait_ms) == 0:
                return await self._mint_for_fleet(
                    key, mint, token_key, lock_key, fails_key, failed_key
                )
            if int(wait_ms) > 0:
                # The last mint was too recent: wait for its span to end (the store's clock).
                await asyncio.sleep(int(wait_ms) / 1000)
                continue
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)

    async def _mint_for_fleet(
        self,
        key: CredentialKey,
        mint: Mint,
        token_key: str,
        lock_key: str,
        fails_key: str,
        failed_key: str,
    ) -> str:
        assert self.store is not None
        started = time.monotonic()
        try:
            minted = await self._mint(key, mint, shared=True)
        except ProxyError as error:
            try:
                await self.store.run(
                    _FAIL,
                    [token_key, lock_key, fails_key, failed_key],
                    [
                        f"{error.code}\n{error.message}",
                        int(BACKOFF_SECONDS * 1000),
                        int(MAX_BACKOFF_SECONDS * 1000),
                        self.owner,
                    ],
                    deadline=STORE_DEADLINE_SECONDS,
                )
            except StoreUnavailable:
                self._failed[key] = _Failed(
                    time.monotonic() + BACKOFF_SECONDS, BACKOFF_SECONDS, error
                )
            raise
        keep_ms = int((minted.lifetime - refresh_margin(minted.lifetime)) * 1000)
        encrypted = self.keyring.current().encrypt(minted.value.encode(), _context(key))
        stored = digest(minted.value) + encrypted.model_dump_json()
        self._keep(key, minted.value, minted.lifetime, started)
        # If the store went away, this worker has it; the others mint after the lock lapses, or
        # alone.
        with contextlib.suppress(StoreUnavailable):
            await self.store.run(
                _STORE,
                [token_key, lock_key, fails_key, key.store_key(":minted")],
                [stored, max(keep_ms, 1), self.owner, int(MINT_SPACING_SECONDS * 1000)],
                deadline=STORE_DEADLINE_SECONDS,
            )
        return minted.value

    def _decrypt(self, key: CredentialKey, stored: bytes) -> str | None:
        """The stored token, or None when it cannot be decrypted here (encrypted with a key this
        replica does not hold yet, or not ours): then it is minted again."""
        try:
            encrypted = Encrypted.model_validate_json(stored[_DIGEST_END:])
            return self.keyring.current().decrypt(encrypted, _context(key)).decode()
        except (KeyringError, ValueError, OSError):
            log.warning("a stored token of connection %s does not decrypt here", key.connection)
            return None


def _context(key: CredentialKey) -> str:
    return f"token|{key.connection_uid}|{key.digest}"


def _stored_failure(stored: bytes) -> ProxyError:
    code, _, message = stored.decode("utf-8", "replace").partition("\n")
    return ProxyError(as_refusal_code(code) or "token_endpoint_failed", message)
