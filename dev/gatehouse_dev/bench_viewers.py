"""What a viewer's own grant costs: a per-viewer connection's fetches against a client-credentials
connection's, same run, and the store's bytes per grant.

Fetches: one proxy with the shared store (redis-server), trusting the dev viewer issuer; the dev
authorization server; an nginx upstream that answers whatever credential it gets. Two
connections to it: OAuth 2.0 client credentials (a minted token, served from the worker's
memory), and ``oauth2AuthorizationCode`` with ``credentialScope: viewer``. VIEWERS viewers each
connect their own account as the connect flow will (scripted consent, PKCE, the code exchanged
and the grant kept by the proxy's own FleetGrants, as tests/e2e/test_viewer_grants.py does),
with access tokens that live an hour: no refresh falls in the timed window (checked). wrk at 32
connections sends the same requests to each connection in turn, ROUNDS times: the app's token
and one of the viewers' assertions in turn. The per-viewer connection verifies each assertion
and sends that viewer's token; the client-credentials one reads the assertion and drops it. The
proxy's CPU per request is measured too: the shared machine bends it far less than req/s.

The store: GRANTS grants of Google's token sizes kept by FleetGrants for a connection of their
own; per grant, ``MEMORY USAGE`` of its key, what its namespace's share is charged (with the
ledger's entry), and the growth of the store's ``used_memory``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import statistics
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import yaml

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import ConnectionRoute, Credential, Limits, TokenRequest
from gatehouse_dev import nginx, resources
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import cpu_seconds
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.viewer_issuer import AUDIENCE
from gatehouse_dev.waiting import wait_for
from gatehouse_proxy.credentials.fleet_grants import FleetGrants, GrantClient
from gatehouse_proxy.credentials.token_grants import GrantedTokens, MintedToken, TokenClient
from gatehouse_proxy.store.grant_store import GrantStore
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings
from gatehouse_proxy.store.shares import Shares, ShareSettings, prefix
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from gatehouse_proxy.viewers.assertions import Viewer

CONNECTIONS = 32
VIEWERS = 32
ROUNDS = 3
ROUND_SECONDS = 4
GRANTS = 1000
# Google's sizes: a 200-character access token, a 100-character refresh token, one scope.
ACCESS_CHARS, REFRESH_CHARS = 200, 100
ASSERTION = "Gatehouse-Viewer-Assertion"
REDIRECT = "http://127.0.0.1:9/callback"
SCOPE = "sheets.read"
CLIENT_CREDENTIALS = "OAuth 2.0 client credentials (minted token)"
PER_VIEWER = f"OAuth 2.0 authorization code, per viewer ({VIEWERS} viewers)"
LABELS = (CLIENT_CREDENTIALS, PER_VIEWER)
TARGET = 0.9

Wrk = Callable[..., dict[str, float]]
T = TypeVar("T")


@dataclass
class Measured:
    fetches: dict[str, dict[str, float]]  # per label, each figure's median over ROUNDS
    refreshes: int  # refresh requests the authorization server saw while they ran
    store: dict[str, float]  # bytes per grant (see grant_bytes)


def measure(cluster: Cluster, local: LocalGatehouse, wrk: Wrk) -> Measured:
    upstream = local.start_nginx("nginx-upstream", nginx.upstream_config).url
    tokens = local.start_token_endpoint().url
    issuer = local.start_viewer_issuer().url
    minted: dict[str, Any] = {"id": "bench", "secret": secrets.token_urlsafe(24), "method": "basic"}
    # The viewers' access tokens live an hour: none is refreshed while the bench runs.
    granted: dict[str, Any] = {
        "id": "bench-viewers",
        "secret": secrets.token_urlsafe(24),
        "method": "basic",
        "lifetime": 3600,
        "redirectUris": [REDIRECT],
    }
    for registered in (minted, granted):
        httpx.post(f"{tokens}/clients", json=registered, timeout=5).raise_for_status()
    store = local.start_store()
    local.start_operator()
    trusted = [{"issuer": issuer, "audience": AUDIENCE, "jwksURL": f"{issuer}/jwks"}]
    proxy = local.start_proxy(settings={"GATEHOUSE_VIEWER_ISSUERS": json.dumps(trusted)})
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", namespace)
    client_credentials = {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {"tokenURL": f"{tokens}/token", "clientId": minted["id"]},
        "secretRef": {"name": "minted", "key": "secret"},
    }
    per_viewer = {
        "type": "oauth2AuthorizationCode",
        "oauth2AuthorizationCode": {
            "authorizationURL": f"{tokens}/authorize",
            "tokenURL": f"{tokens}/token",
            "clientId": granted["id"],
            "scopes": [SCOPE],
            "credentialScope": "viewer",
        },
        "secretRef": {"name": "granted", "key": "secret"},
    }
    documents = [
        resources.secret("minted", secret=minted["secret"]),
        resources.secret("granted", secret=granted["secret"]),
        resources.connection(
            "minted", upstream, client_credentials, limits=resources.UNLIMITED_RATE
        ),
        resources.connection("granted", upstream, per_viewer, limits=resources.UNLIMITED_RATE),
        resources.data_app("bench", {"minted": "minted", "granted": "granted"}),
    ]
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(documents))
    authorization = "Bearer " + cluster.app_token(namespace, "dataapp-bench-gatehouse", timeout=30)
    uid = cluster.kubectl(
        "get", "externalconnection", "granted", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout
    route = _route(f"{namespace}/granted", uid)
    client = GrantClient(
        TokenRequest(url=f"{tokens}/token", client_id=granted["id"]), granted["secret"], (SCOPE,)
    )
    subjects = [f"viewer-{index:02d}" for index in range(VIEWERS)]
    owners = {Viewer(sub, "", issuer).owner: sub for sub in subjects}
    keyring = KeyringFile(local.keyring_file)
    _run(store, keyring, partial(_connect, route, client, f"{tokens}/authorize", owners))
    app = f"{namespace}/DataApp/bench"
    turns = tuple(
        {"Authorization": authorization, ASSERTION: _assertion(issuer, app, sub)}
        for sub in subjects
    )
    with httpx.Client(timeout=5, headers=turns[0]) as http:

        def routed(alias: str) -> bool:
            return http.get(f"{proxy.url}/v1/fetch/{alias}/items").status_code == 200

        for alias in ("minted", "granted"):
            wait_for(partial(routed, alias), timeout=30, what=f"{alias} routed")
    aliases = {CLIENT_CREDENTIALS: "minted", PER_VIEWER: "granted"}
    refreshed = _refreshes(tokens)
    runs: dict[str, list[dict[str, float]]] = {}
    for round_ in range(ROUNDS):
        # Each round starts with the other connection: neither always runs first.
        for label in LABELS[round_ % 2 :] + LABELS[: round_ % 2]:
            before = cpu_seconds(proxy.server.pid)
            result = wrk(
                f"{proxy.url}/v1/fetch/{aliases[label]}/items",
                CONNECTIONS,
                {},
                seconds=ROUND_SECONDS,
                turns=turns,
            )
            if result["non_2xx"]:
                # A refusal is cheaper than a fetch: the row would measure something else.
                raise RuntimeError(f"{label}: {result['non_2xx']:.0f} answers were not 200")
            used = cpu_seconds(proxy.server.pid) - before
            result["cpu_us"] = used / (result["rps"] * ROUND_SECONDS) * 1e6
            runs.setdefault(label, []).append(result)
    fetches = {
        label: {
            figure: statistics.median(run[figure] for run in measured) for figure in measured[0]
        }
        for label, measured in runs.items()
    }
    return Measured(fetches, _refreshes(tokens) - refreshed, grant_bytes(store, keyring))


def grant_bytes(store: RedisServer, keyring: KeyringFile, count: int = GRANTS) -> dict[str, float]:
    """What ``count`` grants of Google's sizes, kept by FleetGrants for a connection of their own,
    take of the store, per grant: ``memory`` (``MEMORY USAGE`` of the grant's key), ``charged``
    (to its namespace's share, the ledger's entry with it), ``used`` (the growth of the store's
    ``used_memory``)."""
    namespace = f"grants-{uuid.uuid4().hex[:6]}"
    route = _route(f"{namespace}/sheets", uuid.uuid4().hex)
    token = TokenRequest(url="https://oauth2.example.com/token", client_id="bench")
    client = GrantClient(token, "client-secret", (SCOPE,))
    tokens = GrantedTokens(
        MintedToken(secrets.token_urlsafe(ACCESS_CHARS)[:ACCESS_CHARS], 3600),
        secrets.token_urlsafe(REFRESH_CHARS)[:REFRESH_CHARS],
        (SCOPE,),
    )

    async def keep(grants: FleetGrants) -> None:
        for index in range(count):
            owner = Viewer(f"user-{index:06d}", "", "https://bi.example.com").owner
            await grants.store(route, owner, client, tokens)

    # A share that holds them all: the default (1 MiB) holds about a thousand.
    shares = ShareSettings(namespace_bytes=64 * count * 1024, namespace_keys=4 * count)
    with store.client() as redis:
        before = int(redis.info("memory")["used_memory"])
        _run(store, keyring, keep, shares)
        used = int(redis.info("memory")["used_memory"]) - before
        keys = list(redis.scan_iter(f"{prefix(namespace)}{route.uid}:grant:*", count=1000))
        memory = sum(redis.memory_usage(key) or 0 for key in keys)
        charged = int(redis.get(f"{prefix(namespace)}held") or 0)
    if len(keys) != count:
        raise RuntimeError(f"{len(keys)} grants kept of {count}")
    return {"memory": memory / count, "charged": charged / count, "used": used / count}


def table(measured: Measured) -> str:
    fetches = measured.fetches
    baseline = fetches[CLIENT_CREDENTIALS]
    lines = [
        "| connection | connections | req/s | p50 ms | p99 ms | proxy CPU µs a request "
        "| req/s vs client credentials |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in LABELS:
        result = fetches[label]
        lines.append(
            f"| {label} | {CONNECTIONS} | {result['rps']:,.0f} | {result['p50']:.2f} "
            f"| {result['p99']:.2f} | {result['cpu_us']:.0f} "
            f"| {result['rps'] / baseline['rps']:.2f} |"
        )
    ratio = fetches[PER_VIEWER]["rps"] / baseline["rps"]
    store = measured.store
    lines += [
        "",
        f"Per viewer against client credentials: {ratio:.2f}x (target at least {TARGET}x); "
        f"refresh requests while they ran: {measured.refreshes}.",
        "",
        f"| the store, {GRANTS:,} grants ({ACCESS_CHARS}-character access token, "
        f"{REFRESH_CHARS}-character refresh token, one scope) | bytes per grant |",
        "|---|---|",
        f"| the grant's key (MEMORY USAGE) | {store['memory']:,.0f} |",
        f"| charged to its namespace's share (with the ledger's entry) | {store['charged']:,.0f} |",
        f"| the store's used_memory, grown | {store['used']:,.0f} |",
    ]
    return "\n".join(lines)


async def _connect(
    route: ConnectionRoute,
    client: GrantClient,
    authorize: str,
    owners: dict[str, str],
    grants: FleetGrants,
) -> None:
    """Connects each owner (the grants' owner name: the user who consents), as the connect flow
    will: scripted consent, PKCE, the code exchanged and the grant kept."""
    async with httpx.AsyncClient(timeout=5) as http:
        for owner, user in owners.items():
            verifier = secrets.token_urlsafe(48)
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            query = {
                "response_type": "code",
                "client_id": client.token_request.client_id,
                "redirect_uri": REDIRECT,
                "scope": SCOPE,
                "code_challenge": challenge.decode().rstrip("="),
                "code_challenge_method": "S256",
                "consent": "approve",
                "user": user,
            }
            reply = await http.get(authorize, params=query)
            code = parse_qs(urlsplit(reply.headers["Location"]).query)["code"][0]
            tokens = await grants.exchange(route, client, code, REDIRECT, verifier)
            await grants.store(route, owner, client, tokens)


def _run(
    store: RedisServer,
    keyring: KeyringFile,
    work: Callable[[FleetGrants], Awaitable[T]],
    shares: ShareSettings | None = None,
) -> T:
    async def run() -> T:
        async with _fleet_grants(store, keyring, shares or ShareSettings()) as grants:
            return await work(grants)

    return asyncio.run(run())


@asynccontextmanager
async def _fleet_grants(
    server: RedisServer, keyring: KeyringFile, shares: ShareSettings
) -> AsyncIterator[FleetGrants]:
    """The proxy's own FleetGrants over ``server``, as a worker has them."""
    store = SharedStore(StoreSettings(server.url, password=server.password, deadline_seconds=1))
    await store.start()
    try:
        async with asyncio.timeout(10):
            while not store.up:  # noqa: ASYNC110 (the store's probe marks it up: no event)
                await asyncio.sleep(0.01)
        guard = NetworkPolicy(["127.0.0.0/8"])
        async with new_session(guard, tls_context()) as session:
            yield FleetGrants(
                GrantStore(store, Shares(shares)), keyring, TokenClient(session, guard, True)
            )
    finally:
        await store.close()


def _route(key: str, uid: str) -> ConnectionRoute:
    """What FleetGrants reads of a connection: its key and uid."""
    return ConnectionRoute(
        key=key,
        uid=uid,
        origin="http://127.0.0.1",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=("/",),
        credential=Credential(type="none"),
        limits=Limits(
            timeout_seconds=30,
            max_request_bytes=1024,
            max_response_bytes=1024,
            requests_per_minute=0,
        ),
    )


def _assertion(issuer: str, app: str, sub: str) -> str:
    """A viewer's assertion for the app, living as long as the installation allows (300 s): the
    timed window is well within it."""
    body = {"app": app, "sub": sub, "lifetime": 300}
    answer = httpx.post(f"{issuer}/assertions", json=body, timeout=5)
    answer.raise_for_status()
    return str(answer.json()["assertion"])


def _refreshes(tokens: str) -> int:
    stats: dict[str, Any] = httpx.get(f"{tokens}/stats", timeout=5).json()
    return int(stats["refreshes"])
