"""Connecting a person's account to an ``oauth2AuthorizationCode`` connection (RFC 6749 4.1 with
PKCE S256, RFC 7636), the proxy's part: the operator's page is what the browser reaches, and it
asks a replica on the table channel (:mod:`gatehouse_contract.connecting`) for each step.

1. **The link.** An app's request for a viewer without a grant, on a connection of each viewer's
   own account (``credentialScope: viewer``), is answered 401 ``viewer_authorization_required``
   with ``connectUrl``: the page's ``/ui/connect#<id>``. The link is minted from the verified
   assertion and bound to the connection (by uid: a connection made again under the name is
   another), the app and the viewer; it lives :data:`LINK_SECONDS` and works once. It is encrypted,
   not stored (AES-256-GCM under a key derived from the keyring, the namespace as associated
   data): an app asking again and again for a viewer who never connects writes nothing, and each
   401 carries a fresh link. An admin's link for the shared account is minted on the page's
   asking (``link``).
2. **Begin.** The link is opened and spent (its digest marked in the store until it would have
   expired: a second click finds the mark), and the page is given the vendor's authorization URL
   with a fresh ``state`` and PKCE challenge, and whose account it connects (the page says so
   before the browser goes on: a link someone forwarded would connect the clicker's account to
   them). The state's record (the link's binding, the verifier and the page's redirect URI) is
   kept :data:`FLOW_SECONDS`, single-use too; the page keeps the state in the browser's cookie,
   so a callback is finished only in the browser that began it.
3. **Finish.** The state is spent; the redirect URI must be the one begun with; the connection
   must still be the one linked; the code is exchanged (with the verifier, the client's
   secret) and the grant kept (:meth:`FleetGrants.store`), in place of the owner's before.

What the store keeps of a state is encrypted with the keyring (its digest as associated data)
under the digest of its random part; of a link, only the digest, once spent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlencode, urlsplit

from gatehouse_contract.connecting import (
    CONNECT_PATH,
    FLOW_ID,
    FLOW_SECONDS,
    LINK_SECONDS,
    MAX_LABEL_CHARS,
    MAX_URL_CHARS,
    GrantsAnswered,
    GrantsAsked,
    namespace_of_flow,
)
from gatehouse_contract.connection_tests import Problem
from gatehouse_contract.keyring import Encrypted, KeyringError, KeyringFile
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.credentials.fleet_grants import (
    SHARED,
    AuthorizationRequired,
    FleetGrants,
    GrantNotKept,
)
from gatehouse_proxy.credentials.grant_changes import grant_client, revoking
from gatehouse_proxy.errors import ProxyError, ProxyException
from gatehouse_proxy.store.connect_store import ConnectStore
from gatehouse_proxy.store.shared_store import StoreUnavailable
from gatehouse_proxy.viewers.assertions import Viewer
from gatehouse_proxy.viewers.keys import b64url

log = logging.getLogger("gatehouse.proxy.connecting")

_LINK_PURPOSE = b"gatehouse/connect-links"


class ConnectRefused(ProxyException):
    """A step the page asked for that cannot be taken: ``code`` and words for the person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class _Binding:
    """What a link and its state are bound to, and (a state) what the callback needs."""

    connection: str  # namespace/name
    connection_uid: str
    app: str  # the app's key; "" for the shared account
    owner: str  # Viewer.owner, or SHARED
    label: str  # whose, as the page says it
    verifier: str = ""
    redirect_uri: str = ""
    expires_at: float = 0.0  # a link's: time.time()

    def dumped(self) -> bytes:
        return json.dumps(
            [
                self.connection,
                self.connection_uid,
                self.app,
                self.owner,
                self.label,
                self.verifier,
                self.redirect_uri,
                self.expires_at,
            ]
        ).encode()

    @classmethod
    def loaded(cls, data: bytes) -> _Binding:
        fields = json.loads(data)
        if not isinstance(fields, list) or len(fields) != 8:
            raise ValueError("not a connect record")
        connection, uid, app, owner, label, verifier, redirect_uri, expires_at = fields
        return cls(
            str(connection),
            str(uid),
            str(app),
            str(owner),
            str(label),
            str(verifier),
            str(redirect_uri),
            float(expires_at),
        )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _digest(flow: str) -> str:
    return hashlib.sha256(flow.partition(".")[2].encode()).hexdigest()


def _link_context(namespace: str) -> bytes:
    """What a link is bound to: its namespace (whose share counts it once clicked)."""
    return f"connect-link|{namespace}".encode()


class Connecting:
    """The connect flow's steps on this worker; ``routes``: the routed connection of a key."""

    def __init__(
        self,
        grants: FleetGrants,
        store: ConnectStore | None,
        keyring: KeyringFile,
        page_url: str,
        routes: Callable[[str], ConnectionRoute | None],
        record_ids: bool,
    ) -> None:
        self.grants = grants
        self.record_ids = record_ids
        self.store = store
        self.keyring = keyring
        self.page_url = page_url.rstrip("/")
        self.routes = routes

    # The link, in a viewer's 401.

    def required(
        self, required: AuthorizationRequired, connection: ConnectionRoute, app: str, viewer: Viewer
    ) -> ProxyError:
        """The 401 for a viewer without a grant, with the link to connect in ``connectUrl``; the
        refusal as it was on a connection of a shared account (an admin connects it), and with
        why when no link can be made (no page URL)."""
        authorization = connection.credential.authorization
        if authorization is None or authorization.credential_scope != "viewer":
            return required
        if not self.page_url:
            return ProxyError(
                required.code,
                f"{required.message} (this installation names no page URL, operator.page.url, "
                "so no connect link can be made)",
            )
        # Whose grant, as the connection's page lists it; nothing where the installation does
        # not record viewers' ids.
        label = (viewer.email or viewer.id)[:MAX_LABEL_CHARS] if self.record_ids else ""
        binding = _Binding(connection.key, connection.uid, app, viewer.owner, label)
        return ProxyError(
            required.code, required.message, details={"connectUrl": self._link(binding)}
        )

    # The page's asking.

    async def answer(self, asked: GrantsAsked) -> GrantsAnswered:
        """The answer to one of the page's steps; a step refused says why in ``problem``."""
        try:
            return await self._answer(asked)
        except ConnectRefused as refused:
            problem = Problem.of(refused.code, refused.message)
        except ProxyError as error:
            problem = Problem.of(error.code, error.message)
        except StoreUnavailable:
            problem = Problem.of(
                "connection_unavailable", "the shared store, where grants are kept, does not answer"
            )
        return GrantsAnswered(id=asked.id, problem=problem)

    async def _answer(self, asked: GrantsAsked) -> GrantsAnswered:
        if asked.action == "begin":
            return await self._begin(asked)
        if asked.action == "finish":
            return await self._finish(asked)
        connection = self._granting(asked.connection, "")
        if asked.action == "link":
            authorization = connection.credential.authorization
            if authorization is None or authorization.credential_scope != "shared":
                # Only an admin's link for the one shared account: a viewer's is minted from
                # their verified assertion, never on the page's asking.
                raise ConnectRefused(
                    "connect_failed",
                    f"connection {connection.key} uses each viewer's own account: each viewer "
                    "connects through the app's link",
                )
            url = self._link(
                _Binding(connection.key, connection.uid, "", SHARED, "the shared account")
            )
            return GrantsAnswered(id=asked.id, flow=url.rpartition("#")[2])
        if asked.action == "drop":
            return GrantsAnswered(
                id=asked.id, dropped=await self.disconnect(connection, asked.owner or None)
            )
        return GrantsAnswered(id=asked.id, summary=await self.grants.summary(connection))

    async def disconnect(self, connection: ConnectionRoute, digest: str | None) -> int:
        """Drops one owner's grant (by its digest) or all, revoked where the connection says and
        its client can be had (a connection routed unavailable may have lost its secret: its
        grants are dropped all the same)."""
        revoke_at, client = revoking(self.keyring, connection)
        return await self.grants.drop(
            connection, digest, revoke_at=revoke_at, client=client, by_digest=True
        )

    async def _begin(self, asked: GrantsAsked) -> GrantsAnswered:
        binding = await self._spend(asked.flow)
        connection = self._granting(binding.connection, binding.connection_uid)
        authorization = connection.credential.authorization
        request = connection.credential.token_request
        assert authorization is not None  # _granting checked both
        assert request is not None
        namespace = namespace_of(connection.key)
        state = f"{namespace}.{secrets.token_urlsafe(32)}"
        verifier = secrets.token_urlsafe(48)
        await self._keep(
            state, replace(binding, verifier=verifier, redirect_uri=asked.redirect_uri)
        )
        query = {
            # The connection's own parameters first: the flow's are the last word (and the
            # operator refuses a connection that names one of them).
            **dict(authorization.parameters),
            "response_type": "code",
            "client_id": request.client_id,
            "redirect_uri": asked.redirect_uri,
            "state": state,
            "code_challenge": _b64url(hashlib.sha256(verifier.encode()).digest()),
            "code_challenge_method": "S256",
        }
        if connection.credential.scopes:
            query["scope"] = " ".join(connection.credential.scopes)
        joiner = "&" if urlsplit(authorization.url).query else "?"
        url = f"{authorization.url}{joiner}{urlencode(query)}"
        if len(url) > MAX_URL_CHARS:
            raise ConnectRefused("connect_failed", "the authorization URL would be too long")
        return GrantsAnswered(
            id=asked.id,
            flow=state,
            authorization_url=url,
            connection=binding.connection,
            app=binding.app,
            owner_label=binding.label,
        )

    async def _finish(self, asked: GrantsAsked) -> GrantsAnswered:
        flow = await self._take(asked.flow)
        if flow.redirect_uri != asked.redirect_uri:
            raise ConnectRefused(
                "connect_failed", "the callback came to another redirect URI than it began with"
            )
        connection = self._granting(flow.connection, flow.connection_uid)
        client = grant_client(self.keyring, connection)
        tokens = await self.grants.exchange(
            connection, client, asked.code, flow.redirect_uri, flow.verifier
        )
        try:
            await self.grants.store(connection, flow.owner, client, tokens, flow.label)
        except GrantNotKept as not_kept:
            raise ConnectRefused("connect_failed", f"the grant was not kept: {not_kept}") from None
        log.info("an account was connected to connection %s", connection.key)
        return GrantsAnswered(
            id=asked.id, connection=flow.connection, app=flow.app, owner_label=flow.label
        )

    # The parts.

    def _granting(self, key: str, uid: str) -> ConnectionRoute:
        """The routed connection of ``key`` that takes grants (and, given ``uid``, is still the
        one a link was made for)."""
        connection = self.routes(key)
        if connection is None or (uid and connection.uid != uid):
            raise ConnectRefused(
                "connect_failed",
                f"connection {key} is no longer routed (deleted, or made again since the link "
                "was made): ask the app for a new link",
            )
        credential = connection.credential
        if (
            credential.type != "oauth2AuthorizationCode"
            or credential.authorization is None
            or credential.token_request is None
        ):
            raise ConnectRefused(
                "connect_failed", f"connection {key} does not use oauth2AuthorizationCode"
            )
        return connection

    def _link(self, binding: _Binding) -> str:
        """A link: the binding and its expiry, encrypted under the keyring's active key."""
        namespace = namespace_of(binding.connection)
        plain = replace(binding, expires_at=time.time() + LINK_SECONDS).dumped()
        token = self.keyring.current().encrypt_compact(
            _LINK_PURPOSE, plain, _link_context(namespace)
        )
        return f"{self.page_url}{CONNECT_PATH}#{namespace}.{_b64url(token)}"

    def _opened(self, flow: str) -> _Binding:
        """The binding a link carries, if this installation encrypted it and it is not past its
        time."""
        namespace, _, encrypted = flow.partition(".")
        try:
            plain = self.keyring.decrypt_compact(
                _LINK_PURPOSE, b64url(encrypted), _link_context(namespace)
            )
            binding = _Binding.loaded(plain)
        except (KeyringError, ValueError, OSError):
            raise ConnectRefused("connect_unknown", _UNKNOWN["link"]) from None
        if binding.expires_at < time.time():
            raise ConnectRefused("connect_unknown", _UNKNOWN["link"])
        return binding

    async def _spend(self, flow: str) -> _Binding:
        """The link's binding, once: its digest is marked spent until it would have expired."""
        binding = self._opened(flow)
        store = self._store()
        marked = await store.mark(
            namespace_of_flow(flow), _digest(flow), binding.expires_at - time.time()
        )
        if marked is False:
            raise ConnectRefused("connect_unknown", _UNKNOWN["link"])
        if isinstance(marked, str):
            raise ConnectRefused("connect_failed", _NOT_KEPT[marked])
        return binding

    async def _keep(self, state: str, binding: _Binding) -> None:
        store = self._store()
        digest = _digest(state)
        encrypted = self.keyring.current().encrypt(binding.dumped(), f"connect|state|{digest}")
        refused = await store.put(
            namespace_of_flow(state), digest, encrypted.model_dump_json().encode(), FLOW_SECONDS
        )
        if refused:
            raise ConnectRefused("connect_failed", _NOT_KEPT[refused])

    async def _take(self, state: str) -> _Binding:
        store = self._store()
        if not FLOW_ID.match(state):
            raise ConnectRefused("connect_unknown", _UNKNOWN["state"])
        digest = _digest(state)
        taken = await store.take(namespace_of_flow(state), digest)
        if taken is None:
            raise ConnectRefused("connect_unknown", _UNKNOWN["state"])
        try:
            encrypted = Encrypted.model_validate_json(taken)
            keyring = self.keyring.current()
            if encrypted.key_id not in keyring.key_ids:
                keyring = self.keyring.current(fresh=True)
            return _Binding.loaded(keyring.decrypt(encrypted, f"connect|state|{digest}"))
        except (KeyringError, ValueError):
            raise ConnectRefused("connect_unknown", _UNKNOWN["state"]) from None

    def _store(self) -> ConnectStore:
        if self.store is None:
            raise ConnectRefused("connect_failed", "this installation has no shared store")
        return self.store


_NOT_KEPT = {
    "share": "the shared store did not keep the connect (the namespace's share is full)",
    "reserve": "the shared store did not keep the connect (it is nearly full)",
}
_UNKNOWN = {
    "link": "this connect link was used already, is over ten minutes old, or was never made: "
    "ask the app for a new one",
    "state": "this connect was finished already, took over ten minutes, or was not begun here: "
    "start again from the app's link",
}
