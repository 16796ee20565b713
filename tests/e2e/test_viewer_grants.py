"""The viewer's own OAuth 2.0 token (``oauth2AuthorizationCode``) injected end to end:
kubectl-applied connections, two proxy replicas of two workers trusting the dev viewer issuer and
sharing the store, and the dev authorization server on 127.0.0.1, whose /api answers only a live
token and names the user it was granted by.

The grants are seeded as the connect flow connects them (test_connect_flow goes through its
pages): /authorize with scripted consent and PKCE, the code exchanged and the grant kept by the
proxy's own :class:`FleetGrants`, under the owner the proxy names a verified viewer by
(``Viewer.owner``).
Every count of API calls and revocations is what the authorization server saw.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import TokenRequest
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import Endpoint
from gatehouse_dev.viewer_issuer import AUDIENCE
from gatehouse_dev.waiting import wait_for
from gatehouse_proxy.credentials.fleet_grants import SHARED, FleetGrants, GrantClient, GrantOwner
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.store.grant_store import GrantStore
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings
from gatehouse_proxy.store.shares import Shares, ShareSettings
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from gatehouse_proxy.viewers.assertions import Viewer
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    get,
    secret,
    wait_condition,
)
from tests.proxy.stores import quota_route

pytestmark = pytest.mark.e2e

ASSERTION = "Gatehouse-Viewer-Assertion"
REDIRECT = "http://127.0.0.1:9/callback"


@dataclass
class Fleet:
    issuer: str
    replicas: list[Endpoint]

    def assertion(self, app: str, sub: str) -> str:
        body = {"app": app, "sub": sub}
        answer = httpx.post(f"{self.issuer}/assertions", json=body, timeout=5)
        answer.raise_for_status()
        return str(answer.json()["assertion"])


@pytest.fixture(scope="module")
def fleet(stack: Stack) -> Iterator[Fleet]:
    """Two proxy replicas of two workers each, trusting the dev issuer, sharing the store."""
    endpoint = stack.local.start_viewer_issuer()
    trusted = [{"issuer": endpoint.url, "audience": AUDIENCE, "jwksURL": f"{endpoint.url}/jwks"}]
    replicas = [
        stack.local.start_proxy(
            workers=2, settings={"GATEHOUSE_VIEWER_ISSUERS": json.dumps(trusted)}
        )
        for _ in range(2)
    ]
    try:
        yield Fleet(endpoint.url, replicas)
    finally:
        for server in (*(replica.server for replica in replicas), endpoint.server):
            server.stop()
            stack.local.servers.remove(server)


@dataclass
class Connected:
    """A connection of the kind, its app's token, and what seeds and reads its grants."""

    namespace: str
    uid: str
    token: str
    client: GrantClient
    scope: str


def _connected(
    cluster: Cluster,
    stack: Stack,
    namespace: str,
    credential_scope: str,
    *,
    redirect: str = REDIRECT,
    endpoint_path: str = "/token",
) -> Connected:
    """``redirect``: the redirect URI the client registers; ``endpoint_path``: the token URL's
    path at the dev authorization server (a /hostile/ one misbehaves)."""
    client_id = f"sheets-{secrets.token_hex(4)}"
    client_secret = "cs_" + secrets.token_urlsafe(24)
    client = {
        "id": client_id,
        "secret": client_secret,
        "method": "basic",
        "lifetime": 3600,
        "redirectUris": [redirect],
    }
    httpx.post(f"{stack.token_endpoint}/clients", json=client, timeout=5).raise_for_status()
    apply(cluster, namespace, secret("sheets-client", secret=client_secret))
    apply(
        cluster,
        namespace,
        connection(
            "sheets",
            stack.token_endpoint,
            _auth(stack, client_id, credential_scope, endpoint_path=endpoint_path),
        ),
        data_app("sales", {"sheets": "sheets"}),
    )
    wait_condition(cluster, namespace, "externalconnection/sheets", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    found = get(cluster, namespace, "externalconnection/sheets") or {}
    request = TokenRequest(url=f"{stack.token_endpoint}{endpoint_path}", client_id=client_id)
    return Connected(
        namespace,
        found["metadata"]["uid"],
        app_token(cluster, namespace, "dataapp-sales-gatehouse"),
        GrantClient(request, client_secret, ("sheets.read",)),
        credential_scope,
    )


def _auth(
    stack: Stack,
    client_id: str,
    credential_scope: str,
    *scopes: str,
    endpoint_path: str = "/token",
) -> dict[str, Any]:
    return {
        "type": "oauth2AuthorizationCode",
        "oauth2AuthorizationCode": {
            "authorizationURL": f"{stack.token_endpoint}/authorize",
            "tokenURL": f"{stack.token_endpoint}{endpoint_path}",
            "clientId": client_id,
            "scopes": list(scopes or ("sheets.read",)),
            "revocationURL": f"{stack.token_endpoint}/revoke",
            "credentialScope": credential_scope,
        },
        "secretRef": {"name": "sheets-client", "key": "secret"},
    }


async def _with_grants(stack: Stack, work: Any) -> Any:
    """Runs ``work(grants, session)`` with the proxy's own FleetGrants over the stack's store."""
    assert stack.local.store is not None
    shared = stack.local.store
    store = SharedStore(StoreSettings(shared.url, password=shared.password, deadline_seconds=1))
    await store.start()
    while not store.up:  # noqa: ASYNC110 (the store's probe marks it up: no event to wait on)
        await asyncio.sleep(0.01)
    guard = NetworkPolicy(["127.0.0.0/8"])
    try:
        async with new_session(guard, tls_context()) as session:
            grants = FleetGrants(
                GrantStore(store, Shares(ShareSettings())),
                KeyringFile(stack.local.keyring_file),
                TokenClient(session, guard, True),
            )
            return await work(grants, session)
    finally:
        await store.close()


def _seed(stack: Stack, connected: Connected, owners: dict[str, str]) -> list[str]:
    """Connects each owner (the grants' owner name: the user who consents), as the connect flow
    does: scripted consent, PKCE, the code exchanged and the grant kept. Answers every token
    granted (access and refresh), which no answer may carry."""
    route = quota_route(f"{connected.namespace}/sheets", connected.uid)

    async def work(grants: FleetGrants, session: Any) -> list[str]:
        granted = []
        for owner, user in owners.items():
            verifier = secrets.token_urlsafe(48)
            digest = hashlib.sha256(verifier.encode()).digest()
            query = {
                "response_type": "code",
                "client_id": connected.client.token_request.client_id,
                "redirect_uri": REDIRECT,
                "scope": "sheets.read",
                "code_challenge": base64.urlsafe_b64encode(digest).decode().rstrip("="),
                "code_challenge_method": "S256",
                "consent": "approve",
                "user": user,
            }
            authorize = f"{stack.token_endpoint}/authorize"
            async with session.get(authorize, params=query, allow_redirects=False) as reply:
                code = parse_qs(urlsplit(reply.headers["Location"]).query)["code"][0]
            tokens = await grants.exchange(route, connected.client, code, REDIRECT, verifier)
            await grants.store(route, owner, connected.client, tokens)
            granted += [tokens.access.value, tokens.refresh_token or ""]
        return granted

    tokens: list[str] = asyncio.run(_with_grants(stack, work))
    return tokens


def _kept(stack: Stack, connected: Connected, owner: str) -> bool:
    keys = GrantOwner(f"{connected.namespace}/sheets", connected.uid, owner).keys

    async def work(grants: FleetGrants, session: Any) -> bool:
        assert grants.grant_store is not None
        return await grants.grant_store.read(keys) is not None

    kept: bool = asyncio.run(_with_grants(stack, work))
    return kept


def _owner(fleet: Fleet, sub: str) -> str:
    return Viewer(sub, "", fleet.issuer).owner


def _stats(stack: Stack) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{stack.token_endpoint}/stats", timeout=5).json()
    return stats


def test_each_viewer_is_served_with_their_own_grant_and_a_viewer_without_one_is_asked_to_connect(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer")
    app = f"{namespace}/DataApp/sales"
    tokens = _seed(stack, connected, {_owner(fleet, "ada"): "ada", _owner(fleet, "bob"): "bob"})
    # Every replica and worker, each viewer in turn: each answered with their own token.
    for round_ in range(8):
        for sub in ("ada", "bob"):
            proxy = fleet.replicas[round_ % 2].url
            sent = {ASSERTION: fleet.assertion(app, sub)}
            answer = fetch(proxy, connected.token, "sheets", "/api/rows", headers=sent)
            assert answer.status_code == 200, answer.text
            assert answer.json()["user"] == sub
            # The API echoes the Authorization it was sent: scrubbed, as every sent secret.
            assert not [token for token in tokens if token in answer.text]
    # A viewer who never connected: 401, the person asked to connect, nothing sent upstream.
    calls = _stats(stack)["apiCalls"], _stats(stack)["apiRefusals"]
    sent = {ASSERTION: fleet.assertion(app, "cyd")}
    answer = fetch(fleet.replicas[0].url, connected.token, "sheets", "/api/rows", headers=sent)
    assert answer.status_code == 401, answer.text
    error = answer.json()["error"]
    assert error["code"] == "viewer_authorization_required"
    assert "connect" in error["message"]
    # No assertion: the viewer refusal, never the shared account nor anyone's grant.
    answer = fetch(fleet.replicas[1].url, connected.token, "sheets", "/api/rows")
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "viewer_assertion_missing"
    assert (_stats(stack)["apiCalls"], _stats(stack)["apiRefusals"]) == calls


def test_a_changed_scope_drops_and_revokes_the_connections_grants(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer")
    app = f"{namespace}/DataApp/sales"
    owners = {_owner(fleet, "ada"): "ada", _owner(fleet, "bob"): "bob"}
    _seed(stack, connected, owners)
    sent = {ASSERTION: fleet.assertion(app, "ada")}
    answer = fetch(fleet.replicas[0].url, connected.token, "sheets", "/api/rows", headers=sent)
    assert answer.status_code == 200, answer.text
    client_id = connected.client.token_request.client_id
    auth = _auth(stack, client_id, "viewer", "sheets.read", "sheets.write")
    apply(cluster, namespace, connection("sheets", stack.token_endpoint, auth))
    # Dropped by the replicas as the table changes, before anyone asks (and revoked: the
    # provider is told of both refresh tokens).
    wait_for(
        lambda: not any(_kept(stack, connected, owner) for owner in owners),
        timeout=20,
        interval=0.2,
        what="the grants dropped",
    )

    def revoked() -> bool:
        grants = _stats(stack)["grants"].values()
        return sum(1 for g in grants if g["client"] == client_id and g["revoked"]) == 2

    wait_for(revoked, timeout=10, interval=0.2, what="both grants revoked at the provider")
    answer = fetch(fleet.replicas[1].url, connected.token, "sheets", "/api/rows", headers=sent)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "viewer_authorization_required"


def test_a_shared_grant_serves_every_request_without_an_assertion(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "shared")
    tokens = _seed(stack, connected, {SHARED: "admin"})
    for replica in fleet.replicas:
        for _ in range(4):
            answer = fetch(replica.url, connected.token, "sheets", "/api/rows")
            assert answer.status_code == 200, answer.text
            assert answer.json()["user"] == "admin"
            assert not [token for token in tokens if token in answer.text]
