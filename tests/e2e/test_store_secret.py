"""The bundled store's password Secret on the real API server: made once when absent (a random
password a Redis config line carries as it is), never rewritten, and a broken one left as found."""

from __future__ import annotations

import base64
import json
import logging
import re

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_operator.keys.store_secret import KEY, StoreSecret
from gatehouse_operator.kube import Kube
from tests.e2e.test_keyring_secret import with_kube

pytestmark = pytest.mark.e2e


def stored(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    secret = json.loads(
        cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    )
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_an_absent_password_is_made_once_and_never_rewritten(
    cluster: Cluster, namespace: str
) -> None:
    async def check(kube: Kube) -> None:
        await StoreSecret(namespace, "store").ensure(kube)

    with_kube(cluster, check)
    first = stored(cluster, namespace, "store")[KEY]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", first), "32 random bytes, URL-safe"
    # A restarted operator, or a second one during a rollout, keeps it.
    with_kube(cluster, check)
    assert stored(cluster, namespace, "store")[KEY] == first


def test_a_secret_without_the_key_is_said_and_left_alone(
    cluster: Cluster, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.kubectl(
        "create", "secret", "generic", "store", "-n", namespace, "--from-literal=other=x"
    )

    async def check(kube: Kube) -> None:
        store = StoreSecret(namespace, "store")
        await store.ensure(kube)
        await store.ensure(kube)  # said once

    with caplog.at_level(logging.ERROR, logger="gatehouse.operator"):
        with_kube(cluster, check)
    assert stored(cluster, namespace, "store") == {"other": "x"}
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        f"the shared store's password Secret {namespace}/store has no key 'password': the "
        "store and the proxies cannot start until it does (delete the Secret and the operator "
        "makes a new one)"
    ]
