"""The viewers row of ``make bench`` (gatehouse_dev.bench_viewers), in small: its store figures
read from a real redis-server after a few grants kept by the proxy's own FleetGrants, and its
table. The fetches need the whole stack: ``BENCH_ONLY=viewers make bench`` runs them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_dev.bench_viewers import (
    CLIENT_CREDENTIALS,
    PER_VIEWER,
    Measured,
    grant_bytes,
    table,
)
from gatehouse_dev.redis_server import RedisServer


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "store")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_stores_bytes_per_grant_are_read_from_the_store(
    store: RedisServer, tmp_path: Path
) -> None:
    keyring = tmp_path / "keyring.json"
    keyring.write_text(Keyring.generate("k1").dump())
    figures = grant_bytes(store, KeyringFile(keyring), count=20)
    # A grant of Google's sizes is one hash of under a kibibyte (the bound
    # tests/proxy/credentials/test_fleet_grants.py holds at a hundred grants); its namespace is
    # charged a little more, the ledger's entry with it.
    assert 600 < figures["memory"] < 1000
    assert figures["memory"] < figures["charged"] < 1200
    assert figures["used"] > 0


def test_the_table_gives_the_ratio_to_client_credentials_and_the_bytes_per_grant() -> None:
    fetch = {"p50": 13.0, "p99": 30.0, "non_2xx": 0.0}
    measured = Measured(
        {
            CLIENT_CREDENTIALS: {"rps": 2000.0, "cpu_us": 400.0, **fetch},
            PER_VIEWER: {"rps": 1800.0, "cpu_us": 450.0, **fetch},
        },
        0,
        {"memory": 824.0, "charged": 1080.0, "used": 1103.0},
    )
    text = table(measured)
    assert f"| {PER_VIEWER} | 32 | 1,800 | 13.00 | 30.00 | 450 | 0.90 |" in text
    assert "Per viewer against client credentials: 0.90x" in text
    assert "refresh requests while they ran: 0" in text
    assert "| the grant's key (MEMORY USAGE) | 824 |" in text
