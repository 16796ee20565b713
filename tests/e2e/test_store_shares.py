"""One tenant cannot fill the fleet's shared store for the others (red-team round 4, R4-2): two
proxy replicas of two workers each share a real redis-server of their own, shrunk as the probe
shrank it (CONFIG SET maxmemory, restored after), with the operator, the API server and the dev
authorization server.

Before, a namespace's admin filled the store with big tokens from a token endpoint of its own,
and every worker read the full store's refusals as the store being down: every tenant's quotas
were then counted by each worker alone (the victim got 7 x 200 for a limit of 10) and its tokens
minted by each worker. Now a namespace holds at most its share (bytes and keys, counted in the
store with each write), a token over the size bound is refused with its size and the bound, and
a credential's token leaves the store when the credential changes or the connection goes.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    Fleet,
    app_token,
    apply,
    connection,
    connection_test,
    data_app,
    fetch,
    finished,
    get,
    register_client,
    secret,
    started_fleet,
    token_requests,
    wait_condition,
)

pytestmark = pytest.mark.e2e

# The fleet's settings: each namespace's share of the store, small enough that the tenant below
# fills its own within the test; the reserve small, for a store shrunk to a few hundred KiB over
# what Redis itself takes (the default, a quarter of maxmemory, is sized for 64 MB).
SHARE_BYTES = 128 * 1024
FLEET_SETTINGS = {
    "GATEHOUSE_STORE_NAMESPACE_BYTES": str(SHARE_BYTES),
    "GATEHOUSE_STORE_RESERVE": "0.05",
}
# The room left in the store over what it holds: the probe's figure (400 KiB), about 30 of the
# attacker's tokens before.
HEADROOM_BYTES = 384 * 1024
FILLERS = 40
FILLER_TOKEN_CHARS = 8000  # within the size bound: the share, not the bound, stops these


@pytest.fixture(scope="module")
def fleet(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with started_fleet(
        stack.local, tmp_path_factory.mktemp("share-store"), FLEET_SETTINGS
    ) as fleet:
        yield fleet


@pytest.fixture
def tenant_b(cluster: Cluster) -> Iterator[str]:
    name = f"gh-test-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _oauth2(token_url: str, client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {"tokenURL": token_url, "clientId": client_id, **extra},
        "secretRef": {"name": "client", "key": "secret"},
    }


def _registered(stack: Stack, cluster: Cluster, namespace: str) -> str:
    """A client of the dev authorization server, its secret in the namespace's Secret."""
    client_id = f"client-{secrets.token_hex(4)}"
    client_secret = "cs_" + secrets.token_urlsafe(24)
    register_client(stack.token_endpoint, client_id, client_secret, "basic")
    apply(cluster, namespace, secret("client", secret=client_secret))
    return client_id


def _uid(cluster: Cluster, namespace: str, name: str) -> str:
    found = get(cluster, namespace, f"externalconnection/{name}")
    assert found is not None
    return str(found["metadata"]["uid"])


def _token_keys(store: RedisServer, uid: str) -> list[bytes]:
    """The store's keys that hold a token of the connection ``uid`` (not its lock, its mint
    span or its failures, which live seconds)."""
    with store.client() as client:
        keys = list(client.scan_iter(match=f"*{uid}*token*", count=1000))
    passing = (b":lock", b":minted", b":fails", b":failed")
    return [key for key in keys if not key.endswith(passing)]


def _answers(url: str, token: str, alias: str, path: str, status: int) -> bool:
    return fetch(url, token, alias, path).status_code == status


def _info(store: RedisServer, field: str) -> int:
    with store.client() as client:
        return int(client.info("memory")[field])


def test_a_tenant_filling_its_share_changes_nothing_for_another(
    cluster: Cluster, stack: Stack, namespace: str, tenant_b: str, fleet: Fleet
) -> None:
    # Tenant B: an OAuth 2.0 connection, 10 requests a minute for its app.
    b_client = _registered(stack, cluster, tenant_b)
    apply(
        cluster,
        tenant_b,
        connection(
            "crm",
            stack.token_endpoint,
            _oauth2(f"{stack.token_endpoint}/token", b_client),
            limits={"requestsPerMinute": 10},
        ),
        data_app("sales", {"crm": "crm"}),
    )
    # Tenant A: a namespace admin with a token endpoint of its own, minting 8,000-character
    # tokens that live a day, one credential per connection.
    apply(cluster, namespace, secret("client", secret="s3cret-value-fill"))
    fillers = [f"fill-{index}" for index in range(FILLERS)]
    apply(
        cluster,
        namespace,
        *(
            connection(
                name,
                stack.upstream,
                _oauth2(f"{stack.token_endpoint}/hostile/size={FILLER_TOKEN_CHARS}", name),
                limits={"requestsPerMinute": 100_000},
            )
            for name in fillers
        ),
        data_app("filler", {name: name for name in fillers}),
    )
    wait_condition(cluster, tenant_b, "dataapp/sales", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/filler", "True", "Routed")
    b_token = app_token(cluster, tenant_b, "dataapp-sales-gatehouse")
    a_token = app_token(cluster, namespace, "dataapp-filler-gatehouse")
    # Every replica routes both tenants before the store is shrunk (A's first connection, B's
    # route checked without spending B's quota: an unknown alias is refused before counting).
    for url in fleet.urls:
        wait_for(
            partial(_answers, url, a_token, fillers[0], "/echo/ready", 200),
            timeout=30,
            what="tenant A routed",
        )
        wait_for(
            partial(_answers, url, b_token, "nothing", "/x", 404),
            timeout=30,
            what="tenant B routed",
        )

    with fleet.store.client() as client:
        restore = client.config_get("maxmemory")["maxmemory"]
        client.config_set("maxmemory", _info(fleet.store, "used_memory") + HEADROOM_BYTES)
    try:
        filled = [
            fetch(fleet.urls[index % 2], a_token, name, "/echo/fill").status_code
            for index, name in enumerate(fillers[1:])
        ]
        # B, with A's tokens kept: 12 requests spread over the replicas and their workers.
        b_codes = [
            httpx.get(
                f"{fleet.urls[index % 2]}/v1/fetch/crm/api/orders",
                headers={"Authorization": f"Bearer {b_token}"},
                timeout=30,
            ).status_code
            for index in range(12)
        ]
        stored = {
            "A": len(
                [
                    key
                    for name in fillers
                    for key in _token_keys(fleet.store, _uid(cluster, namespace, name))
                ]
            ),
            "B": len(_token_keys(fleet.store, _uid(cluster, tenant_b, "crm"))),
        }
        used, limit = _info(fleet.store, "used_memory"), _info(fleet.store, "maxmemory")
        ready = [
            httpx.get(f"{replica.admin_url}/readyz", timeout=5).json()["store"]
            for replica in fleet.replicas
        ]
    finally:
        with fleet.store.client() as client:
            client.config_set("maxmemory", restore)
    assert filled == [200] * (FILLERS - 1)  # A's own fetches go on, its tokens minted alone
    assert (b_codes.count(200), b_codes.count(429)) == (10, 2), b_codes
    assert token_requests(stack.token_endpoint, b_client) == 1  # B's token still the fleet's
    assert stored["B"] == 1
    # A holds what its share allows: each token about 10 KiB in the store.
    assert 1 <= stored["A"] <= SHARE_BYTES // (FILLER_TOKEN_CHARS + 1000), stored
    assert used < limit
    assert all(state["counting"] == "shared" for state in ready), ready
    assert any(namespace in state["sharesFull"] for state in ready), ready
    assert not any(tenant_b in state["sharesFull"] for state in ready), ready


def test_a_token_over_the_size_bound_is_refused_with_its_size_and_the_bound(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("client", secret="s3cret-value-big"))
    apply(
        cluster,
        namespace,
        connection(
            "big", stack.upstream, _oauth2(f"{stack.token_endpoint}/hostile/size=16000", "big")
        ),
        data_app("app", {"big": "big"}),
    )
    wait_condition(cluster, namespace, "dataapp/app", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-app-gatehouse")
    reply = fetch(stack.proxy, token, "big", "/echo/x")
    assert reply.status_code == 502, reply.text
    error = reply.json()["error"]
    assert error["code"] == "token_endpoint_failed"
    said = "access_token is 16,000 characters, over the 8,192"
    assert said in error["message"]
    apply(cluster, namespace, connection_test("big", "big", method="GET", path="/echo/x"))
    test = finished(cluster, namespace, "big")
    passed = next(c for c in test["status"]["conditions"] if c["type"] == "Passed")
    assert passed["status"] == "False"
    assert said in passed["message"]


def test_a_credentials_token_leaves_the_store_when_it_changes_and_when_the_connection_goes(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    client_id = _registered(stack, cluster, namespace)
    auth = _oauth2(f"{stack.token_endpoint}/token", client_id, scopes=["crm.read"])
    apply(
        cluster,
        namespace,
        connection("crm", stack.token_endpoint, auth),
        data_app("sales", {"crm": "crm"}),
    )
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    uid = _uid(cluster, namespace, "crm")
    wait_for(
        lambda: fetch(fleet.urls[0], token, "crm", "/api/orders").status_code == 200,
        timeout=30,
        what="the connection routed",
    )
    assert len(_token_keys(fleet.store, uid)) == 1
    # A changed scope is another credential: another token, and the old one leaves the store.
    changed = _oauth2(f"{stack.token_endpoint}/token", client_id, scopes=["crm.write"])
    apply(cluster, namespace, connection("crm", stack.token_endpoint, changed))

    def minted_again() -> bool:
        seen = fetch(fleet.urls[1], token, "crm", "/api/orders")
        return seen.status_code == 200 and seen.json()["scope"] == "crm.write"

    wait_for(minted_again, timeout=30, what="the new credential's token")
    assert token_requests(stack.token_endpoint, client_id) == 2
    wait_for(
        lambda: len(_token_keys(fleet.store, uid)) == 1,
        timeout=10,
        what="one token of the connection in the store",
    )
    cluster.kubectl("delete", "externalconnection", "crm", "-n", namespace)
    wait_for(
        lambda: not _token_keys(fleet.store, uid),
        timeout=20,
        what="the deleted connection's token gone from the store",
    )
