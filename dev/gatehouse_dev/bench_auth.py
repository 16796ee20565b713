"""What an auth kind costs a fetch: an OAuth 2.0 connection against a bearer one, same run.

One proxy with the shared store (redis-server), the dev authorization server minting the OAuth
2.0 token, and an nginx upstream that answers whatever credential it gets; wrk fetches through
each connection in turn, ROUNDS times, at 1 and 32 connections. After the first token request a
minted token is served from the worker's memory, so the two should cost the same: the ratio says
whether they do.
"""

from __future__ import annotations

import secrets
import statistics
import uuid
from collections.abc import Callable
from functools import partial

import httpx
import yaml

from gatehouse_dev import nginx, resources
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for

ROUNDS = 3
ROUND_SECONDS = 4
BEARER = "bearer token"
OAUTH2 = "OAuth 2.0 client credentials (minted token)"

Wrk = Callable[..., dict[str, float]]


def measure(
    cluster: Cluster, local: LocalGatehouse, wrk: Wrk
) -> dict[tuple[str, int], dict[str, float]]:
    upstream = local.start_nginx("nginx-upstream", nginx.upstream_config).url
    tokens = local.start_token_endpoint()
    client_id, client_secret = "bench", secrets.token_urlsafe(24)
    httpx.post(
        f"{tokens.url}/clients",
        json={"id": client_id, "secret": client_secret, "method": "basic"},
        timeout=5,
    ).raise_for_status()
    local.start_store()
    local.start_operator()
    proxy = local.start_proxy()
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", namespace)
    oauth2 = {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {"tokenURL": f"{tokens.url}/token", "clientId": client_id},
        "secretRef": {"name": "client", "key": "secret"},
    }
    bearer = {"type": "bearer", "secretRef": {"name": "token", "key": "token"}}
    documents = [
        resources.secret("client", secret=client_secret),
        resources.secret("token", token="bench-bearer-" + secrets.token_hex(16)),
        resources.connection("oauth", upstream, oauth2, limits=resources.UNLIMITED_RATE),
        resources.connection("plain", upstream, bearer, limits=resources.UNLIMITED_RATE),
        resources.data_app("bench", {"oauth": "oauth", "plain": "plain"}),
    ]
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(documents))
    token = cluster.app_token(namespace, "dataapp-bench-gatehouse", timeout=30)
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=5, headers=auth) as http:

        def routed(alias: str) -> bool:
            return http.get(f"{proxy.url}/v1/fetch/{alias}/items").status_code == 200

        for alias in ("plain", "oauth"):
            wait_for(partial(routed, alias), timeout=30)
    rows = [(BEARER, "plain"), (OAUTH2, "oauth")]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(ROUNDS):
        for connections in (1, 32):
            for label, alias in rows:
                url = f"{proxy.url}/v1/fetch/{alias}/items"
                runs.setdefault((label, connections), []).append(
                    wrk(url, connections, auth, seconds=ROUND_SECONDS)
                )
    minted = httpx.get(f"{tokens.url}/stats", timeout=5).json()["clients"][client_id]
    results = {
        key: {figure: statistics.median(run[figure] for run in measured) for figure in measured[0]}
        for key, measured in runs.items()
    }
    results[(OAUTH2, 0)] = {"token_requests": float(minted)}
    return results


def table(results: dict[tuple[str, int], dict[str, float]]) -> str:
    lines = [
        "| connection | connections | req/s | p50 ms | p99 ms | req/s vs bearer |",
        "|---|---|---|---|---|---|",
    ]
    for (label, connections), result in results.items():
        if connections == 0:
            continue
        bearer = results[(BEARER, connections)]["rps"]
        lines.append(
            f"| {label} | {connections} | {result['rps']:,.0f} | {result['p50']:.2f} "
            f"| {result['p99']:.2f} | {result['rps'] / bearer:.2f} |"
        )
    minted = int(results[(OAUTH2, 0)]["token_requests"])
    lines.append(f"\nToken requests over the whole run: {minted}.")
    return "\n".join(lines)
