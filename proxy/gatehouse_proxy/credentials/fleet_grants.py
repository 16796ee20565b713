"""OAuth 2.0 grants (authorization code, RFC 6749 4.1) kept for the fleet, each refreshed once.

A grant is an access token, when it expires, a refresh token and the scopes granted, per
connection and owner: a viewer (the verified issuer and subject, a string given to this module)
or :data:`SHARED` (the connection's one account). Providers rotate refresh tokens: each refresh
answers a new one and retires the one used, and a retired one used again revokes the whole grant
(reuse detection). N replicas x M workers refreshing for themselves spend it twice; so:

- the grant lives only in the shared store (:mod:`gatehouse_proxy.store.grant_store`), encrypted
  (AES-256-GCM under a key derived from the keyring's, the connection and owner as associated
  data), never readable back through any API;
- **one refresh in flight per grant** across the fleet: the worker that takes the grant's lock
  (``SET NX PX`` of a random token, given back by compare-and-delete) asks the provider, and
  writes the rotated refresh token with the new access token in one compare-and-set on the
  grant's generation **before** the new access token is used;
- a refresh starts a margin before the access token expires (a quarter of its life, at most a
  minute), in the background: requests meanwhile use the current token (still valid at the
  provider: the grace window for requests under way). Only once it has expired do requests wait,
  for this worker's refresh or the fleet's (the store asked after a short backoff, 10 ms doubling
  to 100 ms, bounded by the connection's timeout), never refreshing again themselves;
- a worker killed mid-refresh: its lock lapses (the token request's deadline and a second), and
  the next request refreshes. Killed between the provider's rotation and the store's write, the
  store still holds the refresh token the provider retired: the next refresh sends it again, and
  a provider with a reuse interval (Auth0's, Okta's grace period) answers the same new pair, which
  is then written. Without one the provider revokes the grant and the person connects again
  (docs/security/credentials.md, "Viewers' grants: kept encrypted, refreshed once");
- a worker keeps an access token in memory at most ``HOLD_SECONDS`` (a disconnect, or a grant
  connected again, is seen within that) and never past its refresh time.

The provider's answers are read bounded and scrubbed as the client-credentials grant's are
(:mod:`gatehouse_proxy.credentials.token_grants`): the refresh token and the client secret, in
every form sent, are scrubbed from an error an endpoint echoes them in. ``invalid_grant`` to a
refresh drops the grant (the provider no longer accepts it): 401 ``viewer_authorization_required``;
any other failure keeps it, and is answered again by the worker for ``FAILED_SECONDS`` rather
than asked again at every request. A disconnect (:meth:`FleetGrants.drop`) revokes the refresh
tokens it drops at the provider's revocation endpoint (RFC 7009), where there is one.

The API the rest of the proxy calls: :meth:`FleetGrants.exchange` and :meth:`FleetGrants.store`
(the connect flow's callback), :meth:`FleetGrants.access_token` (the injector), and
:meth:`FleetGrants.drop` (a disconnect, one owner or all), each given the connection's route, the
owner, and a :class:`GrantClient` (its ``TokenRequest``, the client secret decrypted, the scopes).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from gatehouse_contract import sent_forms
from gatehouse_contract.connecting import (
    MAX_LABEL_CHARS,
    MAX_LISTED,
    ConnectedOwner,
    GrantsSummary,
)
from gatehouse_contract.keyring import KeyringError, KeyringFile
from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import ConnectionRoute, TokenRequest, namespace_of
from gatehouse_proxy.credentials.fleet_tokens import refresh_margin
from gatehouse_proxy.credentials.oauth2_tokens import TOKEN_TIMEOUT_SECONDS, client_form
from gatehouse_proxy.credentials.token_grants import (
    GrantedTokens,
    GrantRequest,
    TokenClient,
    TokenRefused,
)
from gatehouse_proxy.errors import ProxyError, ProxyException
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.grant_store import GrantKeys, GrantStore, StoredGrant
from gatehouse_proxy.store.shared_store import StoreFull, StoreUnavailable

log = logging.getLogger("gatehouse.proxy.grants")

SHARED = "shared"
HOLD_SECONDS = 5.0
# A refresh that failed (the endpoint down, or refusing with another error than invalid_grant)
# is answered again, not asked again, for this long by the worker that asked.
FAILED_SECONDS = 2.0
# After a refresh a 401 forced, a 401 to the new token within this long is the endpoint's
# answer (a scope the person never granted, say), not the token's: no refresh per request, each
# rotating the refresh token at the provider (and counting against its rate limits). Each worker
# forces at most one refresh per grant in this window.
FORCED_REFRESH_SECONDS = 30.0
_MOST_FORCED = 4096  # forced refreshes remembered per worker before the old ones are let go
_MOST_HELD = 4096  # owners held per worker before those past their time are let go
# A token this close to its expiry is not used: it would expire on its way (a second, or half
# its refresh margin for a token of a few seconds).
EXPIRY_FLOOR_SECONDS = 1.0
_POLL_FIRST, _POLL_MAX = 0.01, 0.1
_PURPOSE = b"gatehouse/grants"


class AuthorizationRequired(ProxyError):
    """No grant for this owner (never connected, disconnected, or no longer accepted): the
    person connects; 401 ``viewer_authorization_required``."""

    def __init__(self, message: str) -> None:
        super().__init__("viewer_authorization_required", message)


class GrantNotKept(ProxyException):
    """A new grant the store did not keep: the namespace's share is full, the store's reserve
    reached, or the store away. ``reason`` says which, in words."""


@dataclass(frozen=True)
class GrantClient:
    """The connection's OAuth 2.0 client as its route says (the token request, the scopes) and
    its secret, decrypted for this one call by the caller."""

    token_request: TokenRequest
    secret: str
    scopes: tuple[str, ...] = ()

    @property
    def binding(self) -> bytes:
        """What a grant is for: a changed token URL, client or scope is no longer its client."""
        text = "\x1f".join(
            [self.token_request.url, self.token_request.client_id, *sorted(self.scopes)]
        )
        return hashlib.sha256(text.encode()).digest()[:16]


@dataclass(frozen=True)
class _Grant:
    access_token: str
    expires_at: float  # time.time()
    refresh_at: float  # time.time(): when a refresh starts
    refresh_token: str
    scopes: tuple[str, ...]
    # What the page shows of it: whose ("" where viewers' ids are not recorded), when it was
    # connected and last refreshed (time.time(); 0: not yet).
    label: str = ""
    connected_at: float = 0.0
    refreshed_at: float = 0.0

    @property
    def used_until(self) -> float:
        """When it is no longer sent (time.time()), refreshed or not."""
        floor = min(EXPIRY_FLOOR_SECONDS, (self.expires_at - self.refresh_at) / 2)
        return self.expires_at - floor

    @classmethod
    def granted(cls, tokens: GrantedTokens, label: str, scopes: tuple[str, ...]) -> _Grant:
        """A grant just connected."""
        lifetime = tokens.access.lifetime
        now = time.time()
        return cls(
            tokens.access.value,
            now + lifetime,
            now + lifetime - refresh_margin(lifetime),
            tokens.refresh_token,
            tokens.scopes if tokens.scopes is not None else scopes,
            label,
            now,
        )

    def refreshed(self, tokens: GrantedTokens) -> _Grant:
        """This grant, refreshed: the refresh token rotated, or the one sent kept."""
        lifetime = tokens.access.lifetime
        now = time.time()
        return replace(
            self,
            access_token=tokens.access.value,
            expires_at=now + lifetime,
            refresh_at=now + lifetime - refresh_margin(lifetime),
            refresh_token=tokens.refresh_token or self.refresh_token,
            scopes=tokens.scopes if tokens.scopes is not None else self.scopes,
            refreshed_at=now,
        )


@dataclass
class _Held:
    access_token: str
    until: float  # time.monotonic()


@dataclass(frozen=True)
class GrantOwner:
    """Whose grant, of which connection: what names its keys and binds its encryption."""

    connection: str  # namespace/name
    connection_uid: str
    owner: str

    @property
    def keys(self) -> GrantKeys:
        return GrantKeys(
            namespace_of(self.connection), self.connection_uid, owner_digest(self.owner)
        )

    @property
    def context(self) -> bytes:
        return _context(self.connection_uid, self.keys.owner_digest)


def owner_digest(owner: str) -> str:
    """What names an owner's grant in the store and on the page: never the owner itself."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def _context(connection_uid: str, owner_digest: str) -> bytes:
    """What a grant's encryption is bound to: its connection and owner (by the digest its key
    is named by, so that a disconnect of all can decrypt each grant to revoke it)."""
    return f"grant|{connection_uid}|{owner_digest}".encode()


class FleetGrants:
    def __init__(self, store: GrantStore | None, keyring: KeyringFile, client: TokenClient) -> None:
        self.grant_store = store
        self.keyring = keyring
        self.client = client
        self._held: dict[GrantOwner, _Held] = {}
        self._locks: dict[GrantOwner, asyncio.Lock] = {}
        self._refreshing: dict[GrantOwner, asyncio.Task[str | None]] = {}
        self._failed: dict[GrantOwner, tuple[float, ProxyError]] = {}
        # When a 401 last forced a refresh of the owner's grant, and the digest of the token
        # it replaces.
        self._forced: dict[GrantOwner, tuple[float, bytes]] = {}

    # The API.

    async def store(
        self,
        connection: ConnectionRoute,
        owner: str,
        client: GrantClient,
        tokens: GrantedTokens,
        label: str = "",
    ) -> None:
        """Keeps a new grant (a code exchanged: the connect flow), in place of any before;
        raises GrantNotKept. ``label``: whose, as the page shows it."""
        if not tokens.refresh_token:
            raise GrantNotKept("the provider granted no refresh_token")
        who = GrantOwner(connection.key, connection.uid, owner)
        grant = _Grant.granted(tokens, label, client.scopes)
        if self.grant_store is None:
            raise GrantNotKept("this installation has no shared store")
        try:
            kept = await self.grant_store.keep(
                who.keys, client.binding, self._encrypt(who.context, grant)
            )
        except StoreUnavailable as error:
            raise GrantNotKept(f"the shared store did not keep it ({error})") from None
        if isinstance(kept, str):
            self.grant_store.shares.refused(who.keys.namespace, "grants", kept)
            raise GrantNotKept(_NOT_KEPT[kept])
        self._held.pop(who, None)

    async def access_token(
        self,
        connection: ConnectionRoute,
        owner: str,
        client: GrantClient,
        *,
        within: float,
        refused: str = "",
    ) -> str:
        """The owner's access token, refreshed once for the fleet when due; raises
        AuthorizationRequired, or a ProxyError (the refresh failed, or did not end within
        ``within`` seconds; the store is away). ``refused``: the owner's token the upstream
        refused this request, never given again: the grant is refreshed now (once for the
        fleet) unless another worker did already."""
        who = GrantOwner(connection.key, connection.uid, owner)
        held = self._held.get(who)
        if held is not None and held.until > time.monotonic() and held.access_token != refused:
            return held.access_token
        try:
            async with asyncio.timeout(within):
                return await self._access_token(who, client, within, refused)
        except TimeoutError:
            raise ProxyError(
                "token_endpoint_failed",
                f"the grant's refresh did not end within {within:g}s",
            ) from None
        except StoreFull:
            raise ProxyError(
                "connection_unavailable", "the shared store, where grants are kept, is full"
            ) from None
        except StoreUnavailable:
            raise ProxyError(
                "connection_unavailable",
                "the shared store, where grants are kept, does not answer",
            ) from None

    async def exchange(
        self,
        connection: ConnectionRoute,
        client: GrantClient,
        code: str,
        redirect_uri: str,
        verifier: str,
    ) -> GrantedTokens:
        """The tokens an authorization code is exchanged for (RFC 6749 4.1.3, PKCE's verifier),
        the code and verifier scrubbed as the secret is: the connect flow's callback, which then
        keeps them (:meth:`store`)."""
        grant = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        return await self._post(
            connection.key, client, grant, (code, verifier), TOKEN_TIMEOUT_SECONDS
        )

    async def drop(
        self,
        connection: ConnectionRoute,
        owner: str | None,
        *,
        revoke_at: str = "",
        client: GrantClient | None = None,
        by_digest: bool = False,
    ) -> int:
        """Drops the owner's grant (None: every grant of the connection): disconnected. Other
        workers stop using its access token within HOLD_SECONDS. With ``revoke_at`` (the
        provider's revocation endpoint, RFC 7009) and the ``client``, each refresh token dropped
        is revoked there too, best effort: a failure is logged (never the token) and the grant
        is gone here anyway. Answers how many went. ``owner`` may be given by its digest alone
        (:func:`owner_digest`, as the page names it) with ``by_digest``."""
        digest = None if owner is None else owner if by_digest else owner_digest(owner)
        for who in [w for w in self._held if w.connection_uid == connection.uid]:
            if digest is None or who.keys.owner_digest == digest:
                del self._held[who]
        if self.grant_store is None:
            return 0
        namespace = namespace_of(connection.key)
        if digest is None:
            dropped = await self.grant_store.drop_all(namespace, connection.uid)
        else:
            keys = GrantKeys(namespace, connection.uid, digest)
            encrypted = await self.grant_store.drop(keys)
            dropped = [] if encrypted is None else [(digest, encrypted)]
        if revoke_at and client is not None:
            tokens = []
            for dropped_owner, encrypted in dropped:
                with contextlib.suppress(ProxyError):
                    context = _context(connection.uid, dropped_owner)
                    tokens.append(self._decrypt(context, encrypted).refresh_token)
            await asyncio.gather(
                *(self._revoke(connection.key, client, revoke_at, token) for token in tokens)
            )
        return len(dropped)

    async def summary(self, connection: ConnectionRoute) -> GrantsSummary:
        """What the connection's page shows of its grants: how many, whose and when (the most
        recently refreshed first), and the refreshes that failed; never a token."""
        if self.grant_store is None:
            raise StoreUnavailable("this installation has no shared store")
        listing = await self.grant_store.listed(namespace_of(connection.key), connection.uid)
        listed = []
        for listed_owner, encrypted in listing.grants:
            with contextlib.suppress(ProxyError):  # a key this replica lacks: counted, not listed
                grant = self._decrypt(_context(connection.uid, listed_owner), encrypted)
                listed.append(
                    ConnectedOwner(
                        owner=listed_owner,
                        label=grant.label[:MAX_LABEL_CHARS],
                        connected_at=grant.connected_at,
                        refreshed_at=grant.refreshed_at,
                    )
                )
        listed.sort(key=lambda grant: max(grant.refreshed_at, grant.connected_at), reverse=True)
        return GrantsSummary(
            connected=listing.count,
            listed=tuple(listed[:MAX_LISTED]),
            refreshed_at=max((grant.refreshed_at for grant in listed), default=0.0),
            failures=listing.failures,
            last_failure=listing.last_failure[:1000],
        )

    async def _revoke(
        self, connection: str, client: GrantClient, url: str, refresh_token: str
    ) -> None:
        if _origin(url) != _origin(client.token_request.url):
            # The client secret goes where the token URL is, which only those who may use the
            # Secret can set (the revocation URL is not guarded so): never elsewhere.
            log.warning(
                "a grant of connection %s was dropped, not revoked at the provider: its "
                "revocation URL is not on its token URL's origin",
                connection,
            )
            return
        form = {"token": refresh_token, "token_type_hint": "refresh_token"}
        sent = client_form(client.token_request, client.secret, form)
        forms = sent_forms.form_field(refresh_token).forms
        try:
            await self.client.revoke(
                GrantRequest(
                    url,
                    form=sent.form,
                    headers=sent.headers,
                    seconds=TOKEN_TIMEOUT_SECONDS,
                    code="token_endpoint_failed",
                    redact=Redactor((*sent.secret_forms, *forms)),
                )
            )
        except ProxyError as error:
            log.warning(
                "a grant of connection %s was dropped, not revoked at the provider: %s",
                connection,
                error.message,
            )

    def forget(self, keep: Iterable[str]) -> None:
        """The routing table routes the connections of these uids: what this worker holds of
        others is dropped."""
        kept = set(keep)
        for who in [w for w in self._held if w.connection_uid not in kept]:
            del self._held[who]
        for who in [w for w in self._forced if w.connection_uid not in kept]:
            del self._forced[who]
        for who in [w for w in self._failed if w.connection_uid not in kept]:
            del self._failed[who]
        for who in [w for w, lock in self._locks.items() if not lock.locked()]:
            if who.connection_uid not in kept:
                del self._locks[who]

    async def close(self) -> None:
        """Waits for the refreshes under way (each within its deadline)."""
        await asyncio.gather(*self._refreshing.values(), return_exceptions=True)

    # The way to a token.

    async def _access_token(
        self, who: GrantOwner, client: GrantClient, within: float, refused: str
    ) -> str:
        pause = _POLL_FIRST
        while True:
            lock = self._locks.setdefault(who, asyncio.Lock())
            async with lock:
                held = self._held.get(who)
                if held is not None and held.until > time.monotonic():
                    if held.access_token != refused:
                        return held.access_token
                    del self._held[who]
                stored, grant = await self._read(who, client)
                now = time.time()
                if refused and grant.access_token == refused and self._force(who, refused):
                    # Refused before its time (revoked at the provider, say): due now, and
                    # waited for, since the upstream no longer takes it.
                    grant = replace(grant, refresh_at=now, expires_at=now)
                if now < grant.refresh_at:
                    self._hold(who, grant.access_token, min(HOLD_SECONDS, grant.refresh_at - now))
                    return grant.access_token
                left = grant.used_until - now
                refreshing = self._refreshing.get(who)
                failed = self._failed.get(who)
                if refreshing is None and failed is not None and failed[0] > time.monotonic():
                    if left > 0:
                        return grant.access_token
                    raise failed[1].again()
                if refreshing is None:
                    refreshing = asyncio.ensure_future(
                        self._refresh(who, client, stored, grant, within)
                    )
                    self._refreshing[who] = refreshing
                    refreshing.add_done_callback(lambda task: self._refreshed(who, task))
                if left > 0:
                    # Still good at the provider: used while the refresh is under way.
                    self._hold(who, grant.access_token, min(HOLD_SECONDS, left))
                    return grant.access_token
                refreshed = await asyncio.shield(refreshing)
                if refreshed is not None:
                    return refreshed
            # Another worker is refreshing: its grant is read again after a short pause.
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)

    def _force(self, who: GrantOwner, refused: str) -> bool:
        """Whether a 401 to the owner's token ``refused`` forces a refresh: yes for the token a
        forced refresh is replacing (the requests that met it join that refresh), not for
        another within FORCED_REFRESH_SECONDS of the last this worker forced."""
        now = time.monotonic()
        digest = hashlib.sha256(refused.encode()).digest()[:16]
        at, replacing = self._forced.get(who, (-FORCED_REFRESH_SECONDS, b""))
        if digest == replacing:
            return True
        if now - at < FORCED_REFRESH_SECONDS:
            return False
        if len(self._forced) >= _MOST_FORCED:
            self._forced = {
                w: f for w, f in self._forced.items() if now - f[0] < FORCED_REFRESH_SECONDS
            }
        self._forced[who] = (now, digest)
        return True

    def _refreshed(self, who: GrantOwner, task: asyncio.Task[str | None]) -> None:
        self._refreshing.pop(who, None)
        # A refresh in the background that failed is the next requests' to tell, for a while.
        error = None if task.cancelled() else task.exception()
        if isinstance(error, ProxyError) and not isinstance(error, AuthorizationRequired):
            self._failed[who] = (time.monotonic() + FAILED_SECONDS, error)
        else:
            self._failed.pop(who, None)

    async def _read(self, who: GrantOwner, client: GrantClient) -> tuple[StoredGrant, _Grant]:
        if self.grant_store is None:
            raise StoreUnavailable("this installation has no shared store")
        stored = await self.grant_store.read(who.keys)
        if stored is None:
            raise AuthorizationRequired(_connect(who, "is not connected"))
        if stored.binding != client.binding:
            await self.grant_store.drop(who.keys, stored.generation)
            raise AuthorizationRequired(
                _connect(
                    who, "was connected for another client id, token URL or scopes, and dropped"
                )
            )
        return stored, self._decrypt(who.context, stored.encrypted)

    async def _refresh(
        self,
        who: GrantOwner,
        client: GrantClient,
        stored: StoredGrant,
        grant: _Grant,
        within: float,
    ) -> str | None:
        """The refreshed access token, or None when another worker holds the grant's lock (or
        wrote a newer generation): read the store again."""
        assert self.grant_store is not None
        seconds = min(within, TOKEN_TIMEOUT_SECONDS)
        token = secrets.token_hex(16)
        if await self.grant_store.lock(who.keys, token, seconds + 1, stored.generation) != 0:
            return None
        try:
            tokens = await self._ask(who, client, grant.refresh_token, seconds)
        except TokenRefused as refused:
            await self._unlock(who, token)
            await self._count_failure(who, refused.message)
            if refused.error != "invalid_grant":
                raise
            await self.grant_store.drop(who.keys, stored.generation)
            raise AuthorizationRequired(
                _connect(who, "is no longer accepted by the provider (invalid_grant)")
            ) from None
        except ProxyError as error:
            await self._unlock(who, token)
            await self._count_failure(who, error.message)
            raise
        except BaseException:
            await self._unlock(who, token)
            raise
        refreshed = grant.refreshed(tokens)
        try:
            written = await self.grant_store.rotate(
                who.keys, stored.generation, self._encrypt(who.context, refreshed), token
            )
        except StoreUnavailable:
            # The provider has rotated: this worker uses the new pair; the store's refresh token
            # is the retired one, which the provider's reuse interval still answers.
            log.warning("a refreshed grant of connection %s was not written", who.connection)
            written = True
        if not written:
            # Our lock lapsed and another refresh wrote first (or the grant was dropped): the
            # store's grant is the one used.
            log.warning("a grant of connection %s moved on during its refresh", who.connection)
            return None
        self._hold(
            who, refreshed.access_token, min(HOLD_SECONDS, refreshed.refresh_at - time.time())
        )
        return refreshed.access_token

    async def _ask(
        self, who: GrantOwner, client: GrantClient, refresh_token: str, seconds: float
    ) -> GrantedTokens:
        grant = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        return await self._post(who.connection, client, grant, (refresh_token,), seconds)

    async def _post(
        self,
        connection: str,
        client: GrantClient,
        grant: dict[str, str],
        secrets_sent: tuple[str, ...],
        seconds: float,
    ) -> GrantedTokens:
        sent = client_form(client.token_request, client.secret, grant)
        # What the form carries of the grant (the refresh token, the code and verifier), in
        # each form it is sent in, is scrubbed from an error as the client secret is.
        forms = [form for value in secrets_sent for form in sent_forms.form_field(value).forms]
        try:
            tokens = await self.client.post_for_grant(
                GrantRequest(
                    client.token_request.url,
                    form=sent.form,
                    headers=sent.headers,
                    seconds=seconds,
                    code="token_endpoint_failed",
                    redact=Redactor((*sent.secret_forms, *forms)),
                )
            )
        except ProxyError:
            metrics.count_token_request(connection, "failed", shared=True)
            raise
        metrics.count_token_request(connection, "issued", shared=True)
        return tokens

    async def _count_failure(self, who: GrantOwner, message: str) -> None:
        """For the connection's page: how many refreshes failed, and the last one's words."""
        assert self.grant_store is not None
        with contextlib.suppress(StoreUnavailable):
            await self.grant_store.failed(who.keys.namespace, who.connection_uid, message)

    async def _unlock(self, who: GrantOwner, token: str) -> None:
        assert self.grant_store is not None
        with contextlib.suppress(StoreUnavailable):
            await self.grant_store.unlock(who.keys, token)

    def _hold(self, who: GrantOwner, access_token: str, seconds: float) -> None:
        now = time.monotonic()
        if len(self._held) >= _MOST_HELD:
            # A connection with many viewers: the held tokens past their time are let go (an
            # access token is kept in memory only while it is used).
            self._held = {w: held for w, held in self._held.items() if held.until > now}
            self._failed = {w: f for w, f in self._failed.items() if f[0] > now}
            self._locks = {
                w: lock
                for w, lock in self._locks.items()
                if lock.locked() or w in self._held or w in self._refreshing
            }
        self._held[who] = _Held(access_token, now + max(seconds, 0))

    # Encrypting: AES-256-GCM under a key derived from the keyring's active key, for grants only.

    def _encrypt(self, context: bytes, grant: _Grant) -> bytes:
        plain = json.dumps(
            {
                "a": grant.access_token,
                "e": grant.expires_at,
                "d": grant.refresh_at,
                "r": grant.refresh_token,
                "s": list(grant.scopes),
                "o": grant.label,
                "c": grant.connected_at,
                "f": grant.refreshed_at,
            }
        ).encode()
        return self.keyring.current().encrypt_compact(_PURPOSE, plain, context)

    def _decrypt(self, context: bytes, encrypted: bytes) -> _Grant:
        try:
            fields = json.loads(self.keyring.decrypt_compact(_PURPOSE, encrypted, context))
            return _Grant(
                str(fields["a"]),
                float(fields["e"]),
                float(fields["d"]),
                str(fields["r"]),
                tuple(str(scope) for scope in fields["s"]),
                str(fields.get("o", "")),
                float(fields.get("c", 0.0)),
                float(fields.get("f", 0.0)),
            )
        except (KeyringError, ValueError, KeyError, TypeError, OSError):
            raise ProxyError(
                "connection_unavailable",
                "a grant of this connection cannot be decrypted here (a keyring key this "
                "replica does not hold)",
            ) from None


def _connect(who: GrantOwner, what: str) -> str:
    if who.owner == SHARED:
        return (
            f"the connection's shared account {what}: an admin connects it from the "
            "connection's page"
        )
    return f"the viewer's account {what}: connect it (again) through the app's connect link"


_NOT_KEPT = {
    "share": "the namespace's share of the shared store is full",
    "reserve": "the shared store's used memory has reached its reserve",
}


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port, the default port made explicit."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ("", url, None)
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(), port or {"https": 443, "http": 80}.get(scheme))
