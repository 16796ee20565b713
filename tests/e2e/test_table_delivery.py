"""Routing tables reach every proxy replica, survive the operator's absence, and rotate keys."""

from __future__ import annotations

import httpx
import pytest

from gatehouse_contract.channel_tls import client_context
from gatehouse_contract.keyring import Keyring
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e


def _link(cluster: Cluster, stack: Stack, namespace: str, key: str) -> str:
    apply(cluster, namespace, secret("vendor", **{"api-key": key}))
    apply(cluster, namespace, connection("vendor", stack.upstream, API_KEY_AUTH))
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _key_at(stack: Stack, proxy: str, token: str) -> str | None:
    """The key the upstream received through ``proxy`` (asked of the upstream directly)."""
    reply = fetch(proxy, token, "vendor", "/echo/")
    if reply.status_code != 200:
        return None
    seen = httpx.get(f"{stack.upstream}/_received/{reply.json()['id']}", timeout=5).json()
    return str(seen["headers"]["x-api-key"])


def test_a_replica_started_later_receives_the_current_table(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _link(cluster, stack, namespace, "k-late")
    late = stack.local.start_proxy(token_url=f"{stack.token_endpoint}/token")
    try:
        wait_for(lambda: httpx.get(f"{late.admin_url}/readyz").status_code == 200, timeout=10)
        assert _key_at(stack, late.url, token) == "k-late"
        assert all(_key_at(stack, proxy.url, token) == "k-late" for proxy in stack.proxies)
    finally:
        late.server.stop()


def test_a_proxy_without_a_table_is_not_ready(stack: Stack) -> None:
    unfed = stack.local.start_proxy(operator_url="https://127.0.0.1:9")
    try:
        assert httpx.get(f"{unfed.admin_url}/readyz").status_code == 503
        reply = httpx.get(f"{unfed.url}/v1/fetch/vendor/x", headers={"Authorization": "Bearer x"})
        assert (reply.status_code, reply.json()["error"]["code"]) == (503, "not_ready")
    finally:
        unfed.server.stop()


def test_the_table_channel_refuses_what_does_not_authenticate(stack: Stack) -> None:
    """A static bearer token opens nothing; the channel is TLS with the keyring's certificate."""
    url = f"{stack.local.operator_url}/v1/channel"
    keyring = Keyring.parse(stack.local.keyring_file.read_text())
    trusted = client_context(keyring)
    for headers in ({"Authorization": "Bearer guess"}, {}):
        reply = httpx.get(url, headers=headers, verify=trusted)
        assert reply.status_code == 401
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(url, verify=client_context(Keyring.generate("not-ours")))


def test_proxies_keep_serving_while_the_operator_is_away(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _link(cluster, stack, namespace, "k-before")
    stack.operator.server.stop()
    try:
        assert all(_key_at(stack, proxy.url, token) == "k-before" for proxy in stack.proxies)
        apply(cluster, namespace, secret("vendor", **{"api-key": "k-while-away"}))
        assert _key_at(stack, stack.proxy, token) == "k-before"
    finally:
        stack.operator = stack.local.start_operator()
    for proxy in stack.proxies:

        def caught_up(url: str = proxy.url) -> bool:
            return _key_at(stack, url, token) == "k-while-away"

        wait_for(caught_up, timeout=30, what="the restarted operator's table at the proxy")


def test_keyring_rotation_without_downtime(cluster: Cluster, stack: Stack, namespace: str) -> None:
    token = _link(cluster, stack, namespace, "k-rotate")
    old = Keyring.parse(stack.local.keyring_file.read_text())
    added = old.with_new_key("k-next")
    activated = added.activated("k-next")
    for keyring in (added, activated):
        stack.local.write_keyring(keyring)
        assert all(_key_at(stack, proxy.url, token) == "k-rotate" for proxy in stack.proxies)

    def every_replica_on_the_new_key() -> bool:
        for proxy in stack.proxies:
            ready = httpx.get(f"{proxy.admin_url}/readyz").json()
            if ready.get("signedWith") != "k-next" or ready.get("encryptedWith") != ["k-next"]:
                return False
        return True

    wait_for(every_replica_on_the_new_key, timeout=30, what="tables using only the new key")
    stack.local.write_keyring(activated.without(old.active))
    assert all(_key_at(stack, proxy.url, token) == "k-rotate" for proxy in stack.proxies)

    # With the old key gone, requests still work only if everything was re-encrypted and re-signed.
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-after-rotation"}))
    for proxy in stack.proxies:

        def fresh(url: str = proxy.url) -> bool:
            return _key_at(stack, url, token) == "k-after-rotation"

        wait_for(fresh, timeout=20, what="a table encrypted and signed with the new key")
