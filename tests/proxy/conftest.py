"""Fixtures of the proxy's unit tests: a real redis-server (Debian's), started once per module
that asks for it, and emptied for each test that wants nothing stored; a keyring file of one
key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_dev.redis_server import RedisServer


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def empty_store(redis_server: RedisServer) -> RedisServer:
    with redis_server.client() as client:
        client.flushall()
    return redis_server


@pytest.fixture
def keyring_file(tmp_path: Path) -> KeyringFile:
    path = tmp_path / "keyring.json"
    path.write_text(Keyring.generate("k1").dump())
    return KeyringFile(path)
