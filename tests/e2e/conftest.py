"""The whole stack for end-to-end tests: operator, two proxies sharing a store (redis-server),
upstream, token endpoint."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.service_accounts import service_account_key
from gatehouse_dev.services import Endpoint, LocalGatehouse

SERVICE_ACCOUNT = "reporter@gatehouse-test.iam.gserviceaccount.com"
# Short, so the tests of slow clients finish quickly.
READ_TIMEOUT_SECONDS = 2.0


@dataclass
class Stack:
    local: LocalGatehouse
    operator: Endpoint
    proxies: list[Endpoint]
    upstream: str
    token_endpoint: str
    service_account_key: bytes

    @property
    def proxy(self) -> str:
        return self.proxies[0].url


@pytest.fixture(autouse=True)
def _collected_after() -> Iterator[None]:
    """Collects garbage after each test. These tests run event loops and sockets in threads, and
    an unclosed socket warns (an error here) when it is collected: this way the test that left
    it fails, not whichever test the collector happens to run in."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def stack(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    local = LocalGatehouse(cluster, tmp_path_factory.mktemp("gatehouse"))
    try:
        local.install_crds()
        local.write_keyring()
        local.write_sealing_keys()
        key_file, public_key = service_account_key(SERVICE_ACCOUNT)
        local.start_store()
        tokens = local.start_token_endpoint(public_key, SERVICE_ACCOUNT)
        upstream = local.start_upstream()
        operator = local.start_operator()
        proxies = [
            local.start_proxy(
                token_url=f"{tokens.url}/token",
                read_timeout_seconds=READ_TIMEOUT_SECONDS,
                # Every request's audit line, so that every log scan for secrets covers them.
                settings={"GATEHOUSE_AUDIT_LOG": "on"},
            )
            for _ in range(2)
        ]
        yield Stack(local, operator, proxies, upstream.url, tokens.url, key_file)
    finally:
        local.stop()
