"""What an upstream's 401 to a minted token says: that the token is bad, or only that the
endpoint refuses.

A 401 on one endpoint is no proof that the token is bad: an endpoint outside the token's scopes,
or with an authorization of its own, answers 401 to every token. Renewing the token on every
such 401 let one app make the fleet ask the token endpoint every 2 s (the mint spacing), and
against a provider that revokes the previous token at each mint, every other app's token went
with it (round four's R4-5: 17 token requests in 30 s, another app's p50 from 63 ms to 1.5 s).
So each 401 is judged, for the fleet, by what the token endpoint and the endpoints said before:

- **endpoint**: the endpoint refused two different tokens (the one a renewal replaced, and a
  newer one): it answers 401 whatever the token. It is marked for ``MARK_SECONDS``, and its 401s
  are relayed as they are, the token kept;
- **replaced**: the refused token is no longer the fleet's (a renewal made a newer one, or the
  token is being minted): the request is sent again with the current one, and no token is asked
  for on its account;
- **bounded**: the credential renewed ``MAX_RENEWALS`` times within the window already: the 401
  is relayed and the token kept until the window ends (a metric and an Event say so);
- **renewed**: else the token was refused: it is dropped for the fleet, the endpoint remembered
  as having refused it (for ``SUSPECT_SECONDS``), and a new token asked for; the request is sent
  again with it (if it may be sent twice), which either works (the token had been revoked) or is
  refused too (the endpoint's answer: marked).

So a path that always answers 401 costs its credential one token request per ``MARK_SECONDS``
(not one per 2 s), and a real revocation still gets a new token with one token request. Only the
request that was refused waits for the new token: the others keep using the token the worker
holds until it is replaced (see gatehouse_proxy.credentials.fleet_tokens). The state is in the
shared store under the connection's keys, atomically (one script), counted to its namespace
(gatehouse_proxy.store.shares); while the store is away, or the namespace's share has no room
for it, each worker judges alone, with the same rules on what it holds.
"""

from __future__ import annotations

import time
from collections.abc import Container, Hashable
from dataclasses import dataclass
from typing import Literal

from gatehouse_contract.frames import MAX_RENEWALS, RENEWAL_WINDOW_SECONDS
from gatehouse_proxy.store.shared_store import Script, SharedStore, digest_field
from gatehouse_proxy.store.shares import LEDGER

Verdict = Literal["renewed", "replaced", "endpoint", "bounded"]
# What a request refused with a minted token may be sent again for: a token other than its own.
RETRIED: frozenset[Verdict] = frozenset({"renewed", "replaced"})
MARK_SECONDS = 600.0
SUSPECT_SECONDS = 60.0
# The most endpoints a credential remembers at once (the store's hash stays small); past it, an
# endpoint's 401s renew as any others, within MAX_RENEWALS.
MAX_ENDPOINTS = 64
_VERDICTS: tuple[Verdict, ...] = ("renewed", "replaced", "endpoint", "bounded")

# KEYS: the token, the renewals of the window, the endpoints (field: an endpoint; value: "m:<ends>"
# for a marked one, "s:<ends>:<digest>" for one that refused the token of that digest, 16 raw
# bytes; ends in the store's milliseconds), the namespace's marker that its tokens are each
# worker's, and its ledger's keys (gatehouse_proxy.store.shares: the renewals and the endpoints
# are counted to the namespace, the endpoints at their largest size). ARGV: the refused token's
# digest (as a stored token holds it, gatehouse_proxy.credentials.fleet_tokens: bytes 18 to 33), the
# endpoint's field, MAX_RENEWALS, the window, MARK and SUSPECT (milliseconds), MAX_ENDPOINTS, and
# the namespace's keys and bytes at most. Answer: {verdict's index, ms}: how long a mark or the
# bound holds; {4, 0} when the namespace's share has no room for what the judgement keeps
# (nothing written but the marker: the worker judges alone).
_JUDGE = Script(
    LEDGER
    + """
local clock = redis.call('TIME')
local now = math.floor(tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000)
local function no_room()
  redis.call('SET', KEYS[4], 'share', 'PX', LEDGER_FULL_MS)
  return {4, 0}
end
local function keep(key, bytes)
  ledger_count(key, bytes, ledger_now() + math.ceil(redis.call('PTTL', key) / 1000))
end
local seen = redis.call('HGET', KEYS[3], ARGV[2])
if seen then
  local kind, ends, refused = string.match(seen, '^(%a):(%d+):?(.*)$')
  ends = tonumber(ends)
  if ends and ends > now then
    if kind == 'm' then return {2, ends - now} end
    if refused ~= ARGV[1] then
      if not ledger_fits({{KEYS[3], LEDGER_ENDPOINTS}}, 8) then return no_room() end
      local mark = tonumber(ARGV[5])
      redis.call('HSET', KEYS[3], ARGV[2], 'm:' .. (now + mark))
      if redis.call('PTTL', KEYS[3]) < mark then redis.call('PEXPIRE', KEYS[3], mark) end
      keep(KEYS[3], LEDGER_ENDPOINTS)
      return {2, mark}
    end
  end
end
local current = redis.call('GET', KEYS[1])
if not current or string.sub(current, 18, 33) ~= ARGV[1] then return {1, 0} end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[3]) then
  return {3, math.max(redis.call('PTTL', KEYS[2]), 0)}
end
if not ledger_fits({{KEYS[2], LEDGER_SMALL}, {KEYS[3], LEDGER_ENDPOINTS}}, 8) then
  return no_room()
end
if redis.call('INCR', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
keep(KEYS[2], LEDGER_SMALL)
ledger_drop(KEYS[1])
if not seen and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[7]) then
  local fields = redis.call('HGETALL', KEYS[3])
  for i = 1, #fields, 2 do
    local ends = tonumber(string.match(fields[i + 1], '^%a:(%d+)'))
    if not ends or ends <= now then redis.call('HDEL', KEYS[3], fields[i]) end
  end
end
if seen or redis.call('HLEN', KEYS[3]) < tonumber(ARGV[7]) then
  local suspect = tonumber(ARGV[6])
  redis.call('HSET', KEYS[3], ARGV[2], 's:' .. (now + suspect) .. ':' .. ARGV[1])
  if redis.call('PTTL', KEYS[3]) < suspect then redis.call('PEXPIRE', KEYS[3], suspect) end
  keep(KEYS[3], LEDGER_ENDPOINTS)
end
return {0, 0}
"""
)
_NO_ROOM = 4


@dataclass(frozen=True)
class Refusal:
    """An upstream's 401 to a minted token: the token's credential (fleet_tokens'
    CredentialKey), the token's digest (as a stored token holds it) and the endpoint that
    answered. The same 401s of a storm are one refusal, judged once."""

    credential: Hashable
    token: bytes
    endpoint: str


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    seconds: float = 0.0  # how long the endpoint's mark, or the bound, holds
    # The first bound of its window this worker met: to be told (an Event), once.
    news: bool = False


@dataclass(frozen=True)
class _Said:
    """What an endpoint said of a credential's tokens, until ``ends`` (time.monotonic())."""

    marked: bool  # it answers 401 whatever the token; else it refused the token ``refused``
    ends: float
    refused: bytes = b""


class Refusals:
    """One worker's part: the endpoints it knows to answer 401 whatever the token (so their
    401s cost no store call), and, while the store is away, the whole judgement on its own.
    Credentials are keyed by anything hashable (fleet_tokens' CredentialKey)."""

    def __init__(self) -> None:
        self._endpoints: dict[Hashable, dict[str, _Said]] = {}
        self._renewals: dict[Hashable, tuple[int, float]] = {}  # credential -> (count, ends)
        self._bounds_told: dict[Hashable, float] = {}  # credential -> when the bound it told ends

    def marked(self, credential: Hashable, endpoint: str) -> Judged | None:
        """The endpoint's mark, if this worker knows of one that holds."""
        said = self._endpoints.get(credential, {}).get(endpoint)
        left = said.ends - time.monotonic() if said is not None and said.marked else 0.0
        return Judged("endpoint", left) if left > 0 else None

    async def judge_in_store(
        self,
        store: SharedStore,
        keys: list[str],
        limits: list[int],
        refusal: Refusal,
        deadline: float,
    ) -> Judged | None:
        """The fleet's judgement (``keys``: the credential's token, renewals and endpoints, the
        namespace's marker and ledger; ``limits``: the namespace's keys and bytes at most);
        None when the namespace's share has no room for it (then judge alone); raises
        StoreUnavailable."""
        credential, endpoint = refusal.credential, refusal.endpoint
        index, ms = await store.run(
            _JUDGE,
            keys,
            [
                refusal.token,
                digest_field(endpoint),
                MAX_RENEWALS,
                RENEWAL_WINDOW_SECONDS * 1000,
                int(MARK_SECONDS * 1000),
                int(SUSPECT_SECONDS * 1000),
                MAX_ENDPOINTS,
                *limits,
            ],
            deadline=deadline,
        )
        if int(index) == _NO_ROOM:
            return None
        verdict, seconds = _VERDICTS[int(index)], int(ms) / 1000
        if verdict == "bounded":
            return self._bounded(credential, seconds)
        if verdict == "endpoint":
            self._remember(credential, endpoint, _Said(True, time.monotonic() + seconds))
        return Judged(verdict, seconds)

    def judge_alone(self, refusal: Refusal, current: bytes) -> Judged:
        """As the store's script, on this worker's own state (``current``: the digest of the
        token it holds, empty if none)."""
        credential, refused, endpoint = refusal.credential, refusal.token, refusal.endpoint
        now = time.monotonic()
        said = self._endpoints.get(credential, {}).get(endpoint)
        if said is not None and said.ends > now:
            if said.marked:
                return Judged("endpoint", said.ends - now)
            if said.refused != refused:
                self._remember(credential, endpoint, _Said(True, now + MARK_SECONDS))
                return Judged("endpoint", MARK_SECONDS)
        if current != refused:
            return Judged("replaced")
        count, window_ends = self._renewals.get(credential, (0, 0.0))
        if window_ends <= now:
            count, window_ends = 0, now + RENEWAL_WINDOW_SECONDS
        if count >= MAX_RENEWALS:
            return self._bounded(credential, window_ends - now)
        self._renewals[credential] = (count + 1, window_ends)
        self._remember(credential, endpoint, _Said(False, now + SUSPECT_SECONDS, refused))
        return Judged("renewed")

    def _bounded(self, credential: Hashable, seconds: float) -> Judged:
        now = time.monotonic()
        news = self._bounds_told.get(credential, 0.0) <= now
        if news:
            self._bounds_told[credential] = now + seconds
        return Judged("bounded", seconds, news)

    def _remember(self, credential: Hashable, endpoint: str, said: _Said) -> None:
        """Keeps what the endpoint said, at most MAX_ENDPOINTS per credential: ended entries
        make room; past that, nothing new is kept."""
        known = self._endpoints.setdefault(credential, {})
        if endpoint not in known and len(known) >= MAX_ENDPOINTS:
            now = time.monotonic()
            known = {name: kept for name, kept in known.items() if kept.ends > now}
            self._endpoints[credential] = known
            if len(known) >= MAX_ENDPOINTS:
                return
        known[endpoint] = said

    def discard(self, credential: Hashable) -> None:
        self._endpoints.pop(credential, None)
        self._renewals.pop(credential, None)
        self._bounds_told.pop(credential, None)

    def forget(self, keep: Container[Hashable]) -> None:
        self._endpoints = {key: said for key, said in self._endpoints.items() if key in keep}
        self._renewals = {key: count for key, count in self._renewals.items() if key in keep}
        self._bounds_told = {key: end for key, end in self._bounds_told.items() if key in keep}
