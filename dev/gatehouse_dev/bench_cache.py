"""What the fleet's response cache buys a fetch: cache hits against the same connection without a
cache, in the same run, and the shared store's bytes per cached answer.

Fetches: one proxy with the shared store (redis-server), an nginx upstream answering the same
JSON body of about 1 KiB (BODY_BYTES) to every request, and two connections to it that differ
only in the cache: ``plain`` (none) and ``cached`` (answers fresh for TTL_SECONDS, so every timed
request is a hit: checked on the proxy's metrics). Both inject the same API key and count each
request's quota in the store, as shipped. The proxy holds a table written here
(gatehouse_dev.proxy_with_table): the operator does not compile a connection's cache into the
table on this branch yet. wrk at 1 and CONNECTIONS connections through each connection in turn and
to the upstream directly (what the proxy adds is its p50 over the direct call's), ROUNDS times, each
round in another order, and each figure's median; the proxy's CPU per request too (the shared
machine bends it far less than requests per second); then each connection profiled under the
same load (py-spy, see bench_profile).

The store: ENTRIES answers of that body kept for paths of their own; per entry, ``MEMORY USAGE``
of its key, what its namespace's cache share is charged (the ledger's entry with it), the growth
of the store's ``used_memory``, and the answer's ciphertext (the scrubbed answer's headers and
body, encrypted).
"""

from __future__ import annotations

import json
import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gatehouse_contract.frames import Snapshot
from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import (
    CachePolicy,
    ConnectionRoute,
    Credential,
    Limits,
)
from gatehouse_dev import bench_profile, nginx
from gatehouse_dev.processes import cpu_seconds
from gatehouse_dev.proxy_with_table import TABLE, snapshot_of
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for
from gatehouse_proxy.store.shares import prefix

CONNECTIONS = 32
ROUNDS = 3
ROUND_SECONDS = 4
ENTRIES = 500
# Each proxied target profiled once more (py-spy), its samples kept in PROFILES.
PROFILE_SECONDS = 8
PROFILES = Path(".gatehouse/bench")
BODY_BYTES = 1024
TTL_SECONDS = 300
NAMESPACE = "bench-cache"
APP_TOKEN = secrets.token_urlsafe(24)  # the bench app's, for this run
DIRECT = "upstream (nginx), direct"
PLAIN = "Gatehouse proxy, a connection without a cache"
HITS = "Gatehouse proxy, the same connection with a cache: hits"
LABELS = (DIRECT, PLAIN, HITS)
ALIASES = {PLAIN: "plain", HITS: "cached"}
# Issue 51's targets: hits at least 1.5 times the uncached requests per second, and at most
# 0.5 ms added to the direct call's p50.
RPS_TARGET = 1.5
ADDED_TARGET_MS = 0.5

Wrk = Callable[..., dict[str, float]]


@dataclass
class Measured:
    # per (label, connections), each figure's median over ROUNDS
    fetches: dict[tuple[str, int], dict[str, float]]
    outcomes: dict[str, float]  # what the cache did for the timed requests (its metric)
    store: dict[str, float]  # bytes per entry (see entry_bytes)
    # per proxied label, where the proxy's CPU went at CONNECTIONS connections (bench_profile)
    profiles: dict[str, str] = field(default_factory=dict)


def body(size: int = BODY_BYTES) -> str:
    """A JSON answer of at least ``size`` bytes, as a typical API's list of records."""
    items: list[dict[str, object]] = []
    while len(json.dumps({"items": items}, separators=(",", ":"))) < size:
        index = len(items)
        items.append({"id": index, "name": f"item-{index:03d}", "price": 12.5, "tags": ["a"]})
    return json.dumps({"items": items}, separators=(",", ":"))


def snapshot(keyring: Keyring, origin: str) -> Snapshot:
    """The proxy's table: the two connections (the same upstream and API key, one with a cache)
    and one app linking both."""
    limits = Limits(
        timeout_seconds=30,
        max_request_bytes=1024 * 1024,
        max_response_bytes=1024 * 1024,
        requests_per_minute=100_000,  # the schema's largest: no timed run reaches it
    )
    policy = CachePolicy(
        ttl_seconds=TTL_SECONDS, max_ttl_seconds=TTL_SECONDS, max_body_bytes=64 * 1024
    )
    routes = []
    for alias, cache in (("plain", None), ("cached", policy)):
        uid = f"uid-{alias}"
        credential = Credential(type="apiKey", parameter=nginx.HEADER[0], location="header")
        secret = keyring.encrypt(nginx.HEADER[1].encode(), credential.context(uid, origin))
        routes.append(
            ConnectionRoute(
                key=f"{NAMESPACE}/{alias}",
                uid=uid,
                origin=origin,
                allowed_methods=frozenset({"GET"}),
                allowed_paths=("/",),
                credential=credential.model_copy(update={"encrypted": secret}),
                limits=limits,
                cache=cache,
            )
        )
    return snapshot_of(routes, APP_TOKEN)


def measure(local: LocalGatehouse, wrk: Wrk) -> Measured:
    upstream = local.start_nginx(
        "nginx-upstream-1k", partial(nginx.upstream_config, body=body())
    ).url
    store = local.start_store()
    table = local.workdir / "cache-table.json"
    keyring = Keyring.parse(local.keyring_file.read_bytes())
    table.write_text(snapshot(keyring, upstream).model_dump_json())
    proxy = local.start_proxy(module="gatehouse_dev.proxy_with_table", settings={TABLE: str(table)})
    headers = {"Authorization": f"Bearer {APP_TOKEN}"}
    urls = {
        DIRECT: f"{upstream}/items",
        **{label: f"{proxy.url}/v1/fetch/{alias}/items" for label, alias in ALIASES.items()},
    }
    with httpx.Client(timeout=5, headers=headers) as http:
        for label in ALIASES:
            wait_for(partial(_answers, http, urls[label]), timeout=30, what=f"{label} routed")
        kept = http.get(urls[HITS]).headers.get("cache-status", "")
        if "hit" not in kept:
            raise RuntimeError(f"the cached connection's answer was not kept: {kept!r}")
        before = _outcomes(http, proxy.admin_url)
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        for round_ in range(ROUNDS):
            for connections in (1, CONNECTIONS):
                for label in LABELS[round_ % 3 :] + LABELS[: round_ % 3]:
                    started = cpu_seconds(proxy.server.pid)
                    proxied = label in ALIASES
                    result = wrk(
                        urls[label], connections, headers if proxied else {}, seconds=ROUND_SECONDS
                    )
                    if result["non_2xx"]:
                        # A refusal is cheaper than a fetch: the row would measure another thing.
                        raise RuntimeError(f"{label}: {result['non_2xx']:.0f} answers not 200")
                    if proxied:
                        used = cpu_seconds(proxy.server.pid) - started
                        result["cpu_us"] = used / (result["rps"] * ROUND_SECONDS) * 1e6
                    runs.setdefault((label, connections), []).append(result)
        after = _outcomes(http, proxy.admin_url)
        outcomes = {outcome: after[outcome] - before.get(outcome, 0.0) for outcome in after}
        profiles = {
            label: bench_profile.profile(
                proxy.server.pid,
                partial(wrk, urls[label], CONNECTIONS, headers, seconds=PROFILE_SECONDS),
                PROFILE_SECONDS,
                PROFILES / f"cache-{alias}-profile.txt",
            )
            for label, alias in ALIASES.items()
        }
        stored = entry_bytes(store, http, f"{proxy.url}/v1/fetch/cached/entries")
    fetches = {
        label: {
            figure: statistics.median(run[figure] for run in measured) for figure in measured[0]
        }
        for label, measured in runs.items()
    }
    return Measured(fetches, outcomes, stored, profiles)


def _answers(http: httpx.Client, url: str) -> bool:
    return http.get(url).status_code == 200


def _outcomes(http: httpx.Client, admin_url: str) -> dict[str, float]:
    """The cached connection's requests by what the cache did, from the proxy's metrics."""
    outcomes: dict[str, float] = {}
    for family in text_string_to_metric_families(http.get(f"{admin_url}/metrics").text):
        if family.name == "gatehouse_proxy_cache_requests":
            for sample in family.samples:
                labels = sample.labels
                if sample.name.endswith("_total") and labels["connection"] == "cached":
                    outcomes[labels["outcome"]] = sample.value
    return outcomes


def entry_bytes(store: RedisServer, http: httpx.Client, url: str) -> dict[str, float]:
    """What ENTRIES cached answers take of the store, per entry: ``memory`` (``MEMORY USAGE``
    of the answer's key), ``charged`` (to its namespace's cache share, with the ledger's entry),
    ``used`` (the growth of the store's ``used_memory``), ``ciphertext`` (the answer kept)."""
    held = prefix(NAMESPACE) + "cache:held"
    with store.client() as redis:

        def answers() -> set[bytes]:
            return {
                key
                for key in redis.scan_iter(f"{prefix(NAMESPACE)}cache:*", count=1000)
                if redis.type(key) == b"hash"
            }

        known = answers()
        charged = int(redis.get(held) or 0)
        used = int(redis.info("memory")["used_memory"])
        for index in range(ENTRIES):
            reply = http.get(f"{url}/{index}")
            if "stored" not in reply.headers.get("cache-status", ""):
                raise RuntimeError(f"entry {index} not kept: {reply.headers.get('cache-status')}")
        used = int(redis.info("memory")["used_memory"]) - used
        charged = int(redis.get(held) or 0) - charged
        kept = answers() - known
        memory = sum(redis.memory_usage(key) or 0 for key in kept)
        ciphertext = sum(redis.hstrlen(key, "a") for key in kept)
    if len(kept) != ENTRIES:
        raise RuntimeError(f"{len(kept)} answers kept of {ENTRIES}")
    return {
        "memory": memory / ENTRIES,
        "charged": charged / ENTRIES,
        "used": used / ENTRIES,
        "ciphertext": ciphertext / ENTRIES,
    }


def table(measured: Measured) -> str:
    fetches = measured.fetches
    lines = [
        "| target | connections | req/s | p50 ms | p99 ms | p50 added ms "
        "| proxy CPU µs a request |",
        "|---|---|---|---|---|---|---|",
    ]
    for (label, connections), result in fetches.items():
        direct = fetches[(DIRECT, connections)]
        over = f"{result['p50'] - direct['p50']:.2f}" if label in ALIASES else ""
        cpu = f"{result['cpu_us']:.0f}" if "cpu_us" in result else ""
        lines.append(
            f"| {label} | {connections} | {result['rps']:,.0f} | {result['p50']:.2f} "
            f"| {result['p99']:.2f} | {over} | {cpu} |"
        )
    plain, hits = fetches[(PLAIN, CONNECTIONS)], fetches[(HITS, CONNECTIONS)]
    ratio = hits["rps"] / plain["rps"]
    added = {
        connections: fetches[(HITS, connections)]["p50"] - fetches[(DIRECT, connections)]["p50"]
        for connections in (1, CONNECTIONS)
    }
    timed = sum(measured.outcomes.values()) or 1.0
    served = sum(measured.outcomes.get(outcome, 0.0) for outcome in ("hit", "collapsed"))
    store = measured.store
    lines += [
        "",
        f"Hits against the uncached connection at {CONNECTIONS} connections: {ratio:.2f}x the "
        f"requests per second (target at least {RPS_TARGET}x), p50 {hits['p50']:.2f} ms against "
        f"{plain['p50']:.2f} ms. p50 a hit adds to the direct call's (target at most "
        f"{ADDED_TARGET_MS} ms): {added[1]:.2f} ms at 1 connection, {added[CONNECTIONS]:.2f} ms "
        f"at {CONNECTIONS} (where a saturated worker's p50 is about {CONNECTIONS} over its "
        "req/s: the queue, not the cache). Of the timed requests to the cached connection, "
        f"{served / timed:.1%} were answered from the cache "
        f"({', '.join(f'{k} {v:,.0f}' for k, v in sorted(measured.outcomes.items()))}; "
        "collapsed: behind an identical request's read of the entry in the same worker).",
        "",
        f"| the store, {ENTRIES:,} cached answers of a {len(body()):,}-byte JSON body "
        "| bytes per entry |",
        "|---|---|",
        f"| the answer kept (its ciphertext: scrubbed headers and body, encrypted) "
        f"| {store['ciphertext']:,.0f} |",
        f"| the entry's key (MEMORY USAGE) | {store['memory']:,.0f} |",
        f"| charged to its namespace's cache share (with the ledger's entry) "
        f"| {store['charged']:,.0f} |",
        f"| the store's used_memory, grown | {store['used']:,.0f} |",
    ]
    for label, where in measured.profiles.items():
        lines += ["", f"Where the proxy's CPU goes, {label}, {CONNECTIONS} connections:", "", where]
    return "\n".join(lines)
