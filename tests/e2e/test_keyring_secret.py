"""The operator's keyring Secret on the real API server: made once when absent, never rewritten,
read only when the user brings their own, and a rotation picked up without losing keys."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable

import pytest
from kubernetes.aio import config

from gatehouse_contract.keyring import Keyring, KeyringError
from gatehouse_dev.cluster import Cluster
from gatehouse_operator.keys.keyring_secret import KEY, KeyringSecret
from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE, SealingKeys
from gatehouse_operator.keys.sealing_secret import SealingKeysSecret
from gatehouse_operator.kube import Kube
from tests.e2e.gatehouse_fixtures import run_cli

pytestmark = pytest.mark.e2e


def with_kube(cluster: Cluster, check: Callable[[Kube], Awaitable[None]]) -> None:
    async def run() -> None:
        api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            await check(Kube.of(api))
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


def sealing_keys(cluster: Cluster, namespace: str, name: str) -> SealingKeys | None:
    done = cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json", check=False)
    if done.returncode != 0:
        return None
    data = json.loads(done.stdout).get("data", {}).get(SEALING_KEYS_FILE)
    return SealingKeys.parse(base64.b64decode(data)) if data else None


def test_sealing_keys_are_made_once_written_back_and_never_replaced_while_published(
    cluster: Cluster, namespace: str
) -> None:
    published = (namespace, "public")

    def source(name: str = "sealing", create: bool = True) -> SealingKeysSecret:
        return SealingKeysSecret(namespace, name, create=create, published=published)

    async def check(kube: Kube) -> None:
        made = source()
        await made.refresh(kube)
        first = made.sealing_keys()
        assert first is not None
        again = source()  # a restarted operator, or a second replica
        await again.refresh(kube)
        assert again.sealing_keys().dump() == first.dump()  # type: ignore[union-attr]
        # Deleted while the operator runs: written back from memory.
        cluster.kubectl("delete", "secret", "sealing", "-n", namespace)
        await made.refresh(kube)
        assert sealing_keys(cluster, namespace, "sealing").dump() == first.dump()  # type: ignore[union-attr]
        # Missing at a start while the published public keys list it: to be restored from a
        # backup, never replaced by a new key that would open none of the values in Git.
        cluster.kubectl(
            "create", "configmap", "public", "-n", namespace,
            f"--from-literal={SEALING_KEYS_FILE}={first.public().dump()}",
        )  # fmt: skip
        cluster.kubectl("delete", "secret", "sealing", "-n", namespace)
        restarted = source()
        await restarted.refresh(kube)
        assert restarted.sealing_keys() is None
        assert sealing_keys(cluster, namespace, "sealing") is None
        # Brought by the user: only read.
        brought = source("brought", create=False)
        await brought.refresh(kube)
        assert brought.sealing_keys() is None

    with_kube(cluster, check)
    assert cluster.kubectl("get", "secret", "brought", "-n", namespace, check=False).returncode


def test_gatehouse_sealing_key_rotate_keeps_the_older_keys_and_retire_drops_one(
    cluster: Cluster, namespace: str
) -> None:
    async def make(kube: Kube) -> None:
        await SealingKeysSecret(namespace, "sealing", create=True, published=None).refresh(kube)

    with_kube(cluster, make)
    before = sealing_keys(cluster, namespace, "sealing")
    assert before is not None

    def sealing_key(*args: str) -> str:
        done = run_cli(cluster, "gatehouse_operator.cli.gatehouse", "sealing-key", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    said = sealing_key("rotate", "--secret", f"{namespace}/sealing")
    after = sealing_keys(cluster, namespace, "sealing")
    assert after is not None
    assert after.active != before.active
    assert f"sealing key {after.active} is active" in said
    assert set(after.public().keys) == {before.active, after.active}

    async def picked_up(kube: Kube) -> None:
        keys = SealingKeysSecret(namespace, "sealing", create=False, published=None)
        await keys.refresh(kube)
        assert keys.sealing_keys().active == after.active  # type: ignore[union-attr]

    with_kube(cluster, picked_up)
    # Retiring: the old key goes (values sealed with it stop opening); the active one cannot.
    sealing_key("retire", before.active, "--secret", f"{namespace}/sealing")
    retired = sealing_keys(cluster, namespace, "sealing")
    assert retired is not None
    assert set(retired.public().keys) == {after.active}
    refused = run_cli(
        cluster, "gatehouse_operator.cli.gatehouse", "sealing-key", "retire", after.active,
        "--secret", f"{namespace}/sealing",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "is active" in refused.stderr
    # A Secret brought without sealing keys gets its first.
    cluster.kubectl("create", "secret", "generic", "brought", "-n", namespace, "--from-literal=x=y")
    sealing_key("rotate", "--secret", f"{namespace}/brought")
    assert sealing_keys(cluster, namespace, "brought") is not None
