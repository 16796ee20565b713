"""The operator's keyring Secret on the real API server: made once when absent, never rewritten,
read only when the user brings their own, and a rotation picked up without losing keys."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable

import pytest
from kubernetes.aio import config

from gatehouse_contract.sealing import Keyring, KeyringError
from gatehouse_dev.cluster import Cluster
from gatehouse_operator.keyring_secret import KEY, KeyringSecret
from gatehouse_operator.kube import Kube

pytestmark = pytest.mark.e2e


def with_kube(cluster: Cluster, check: Callable[[Kube], Awaitable[None]]) -> None:
    async def run() -> None:
        api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            await check(Kube(api))
        finally:
            await api.close()

    asyncio.run(run())


def stored(cluster: Cluster, namespace: str, name: str) -> str:
    secret = json.loads(
        cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    )
    return base64.b64decode(secret["data"][KEY]).decode()


def test_an_absent_keyring_is_made_once_and_then_only_read(
    cluster: Cluster, namespace: str
) -> None:
    async def check(kube: Kube) -> None:
        first = KeyringSecret(namespace, "keyring", create=True)
        await first.load(kube)
        # A restarted operator (or a second one during a rollout) finds and keeps it.
        second = KeyringSecret(namespace, "keyring", create=True)
        await second.load(kube)
        assert second.current().dump() == first.current().dump()

    with_kube(cluster, check)
    made = Keyring.parse(stored(cluster, namespace, "keyring"))
    assert made.key_ids == frozenset({"k1"})


def test_an_existing_secret_is_never_made_and_its_absence_is_said(
    cluster: Cluster, namespace: str
) -> None:
    async def check(kube: Kube) -> None:
        keyring = KeyringSecret(namespace, "brought", create=False)
        with pytest.raises(KeyringError, match=f"the keyring Secret {namespace}/brought does"):
            await keyring.load(kube)

    with_kube(cluster, check)
    assert cluster.kubectl("get", "secret", "brought", "-n", namespace, check=False).returncode


def test_a_rotation_is_picked_up_and_a_broken_edit_keeps_the_keys(
    cluster: Cluster, namespace: str
) -> None:
    original = Keyring.generate("2026-11")
    rotated = original.with_new_key("2026-12").activated("2026-12")
    cluster.kubectl(
        "create", "secret", "generic", "brought", "-n", namespace,
        f"--from-literal={KEY}={original.dump()}",
    )  # fmt: skip

    def put(document: str) -> None:
        patch = {"stringData": {KEY: document}}
        cluster.kubectl("patch", "secret", "brought", "-n", namespace, "-p", json.dumps(patch))

    async def check(kube: Kube) -> None:
        keyring = KeyringSecret(namespace, "brought", create=False)
        await keyring.load(kube)
        assert keyring.current().active == "2026-11"
        put(rotated.dump())
        await keyring.refresh(kube)
        assert keyring.current().active == "2026-12"
        put("{not json")
        await keyring.refresh(kube)
        assert keyring.current().dump() == rotated.dump()
        cluster.kubectl("delete", "secret", "brought", "-n", namespace)
        await keyring.refresh(kube)
        assert keyring.current().dump() == rotated.dump()

    with_kube(cluster, check)
