"""The cache row of ``make bench`` (gatehouse_dev.bench_cache), in small: the table its proxy is
given (the proxy's own reader takes it), the answer it caches, and its table. The fetches need a
proxy, an upstream and a store as processes: ``BENCH_ONLY=cache make bench`` runs them."""

from __future__ import annotations

import json

from gatehouse_contract.keyring import Keyring
from gatehouse_dev.bench_cache import (
    BODY_BYTES,
    DIRECT,
    HITS,
    PLAIN,
    Measured,
    body,
    snapshot,
    table,
)
from gatehouse_proxy.table.routing_table import RoutingTable


def test_the_proxy_is_given_one_connection_with_a_cache_and_its_twin_without() -> None:
    keyring = Keyring.generate("k1")
    routes = RoutingTable.from_snapshot(
        snapshot(keyring, "http://127.0.0.1:9"), keyring.active
    ).connections
    plain, cached = routes["bench-cache/plain"], routes["bench-cache/cached"]
    assert plain.cache is None
    assert cached.cache is not None
    assert cached.model_copy(update={"key": plain.key, "uid": plain.uid, "cache": None}) == (
        plain.model_copy(update={"credential": cached.credential})
    )


def test_the_answer_is_a_kibibyte_of_json_nginx_can_return() -> None:
    answer = body()
    assert BODY_BYTES <= len(answer) < BODY_BYTES + 100
    assert json.loads(answer)["items"]
    assert "'" not in answer
    assert "$" not in answer


def test_the_table_gives_the_ratio_the_p50_added_and_the_bytes_per_entry() -> None:
    def fetch(rps: float, p50: float, cpu: float = 0.0) -> dict[str, float]:
        return {"rps": rps, "p50": p50, "p99": 2 * p50, "non_2xx": 0.0, "cpu_us": cpu}

    measured = Measured(
        {
            (DIRECT, 1): {"rps": 9000.0, "p50": 0.1, "p99": 0.2, "non_2xx": 0.0},
            (PLAIN, 1): fetch(1000.0, 0.9, 600.0),
            (HITS, 1): fetch(3000.0, 0.4, 200.0),
            (DIRECT, 32): {"rps": 90000.0, "p50": 0.2, "p99": 1.0, "non_2xx": 0.0},
            (PLAIN, 32): fetch(2000.0, 16.0, 500.0),
            (HITS, 32): fetch(6000.0, 5.2, 170.0),
        },
        {"hit": 30.0, "collapsed": 69.0, "miss": 1.0},
        {"memory": 1584.0, "charged": 1808.0, "used": 1817.0, "ciphertext": 1194.0},
    )
    text = table(measured)
    assert f"| {HITS} | 32 | 6,000 | 5.20 | 10.40 | 5.00 | 170 |" in text
    assert f"| {DIRECT} | 1 | 9,000 | 0.10 | 0.20 |  |  |" in text
    assert "32 connections: 3.00x the requests per second" in text
    assert "0.30 ms at 1 connection" in text
    assert "99.0% were answered from the cache (collapsed 69, hit 30, miss 1;" in text
    assert "| charged to its namespace's cache share (with the ledger's entry) | 1,808 |" in text
