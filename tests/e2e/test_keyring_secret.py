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
from gatehouse_operator.sealed_values import SEALING_KEYS_FILE, SealingKeys
from tests.e2e.gatehouse_fixtures import run_cli

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


def sealing_keys(cluster: Cluster, namespace: str, name: str) -> SealingKeys | None:
    secret = json.loads(
        cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    )
    data = secret["data"].get(SEALING_KEYS_FILE)
    return SealingKeys.parse(base64.b64decode(data)) if data else None


def test_sealing_keys_are_made_beside_the_keyring_added_once_and_never_replaced(
    cluster: Cluster, namespace: str
) -> None:
    # A keyring Secret the operator made before sealing keys existed.
    cluster.kubectl(
        "create", "secret", "generic", "older", "-n", namespace,
        f"--from-literal={KEY}={Keyring.generate().dump()}",
    )  # fmt: skip
    cluster.kubectl(
        "create", "secret", "generic", "brought", "-n", namespace,
        f"--from-literal={KEY}={Keyring.generate().dump()}",
    )  # fmt: skip

    async def check(kube: Kube) -> None:
        made = KeyringSecret(namespace, "fresh", create=True)
        await made.load(kube)
        older = KeyringSecret(namespace, "older", create=True)
        await older.load(kube)
        again = KeyringSecret(namespace, "older", create=True)
        await again.load(kube)
        for source in (made, older, again):
            assert source.sealing_keys() is not None
        assert again.sealing_keys().dump() == older.sealing_keys().dump()  # type: ignore[union-attr]
        # Brought by the user: only read, and no sealing keys until the user adds them.
        brought = KeyringSecret(namespace, "brought", create=False)
        await brought.load(kube)
        assert brought.sealing_keys() is None

    with_kube(cluster, check)
    assert sealing_keys(cluster, namespace, "fresh") is not None
    assert sealing_keys(cluster, namespace, "brought") is None
    # Their owner adds the first one (the operator never writes a brought Secret).
    done = run_cli(
        cluster, "gatehouse_operator.cli", "sealing-key", "rotate", "--secret",
        f"{namespace}/brought",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sealing_keys(cluster, namespace, "brought") is not None


def test_gatehouse_sealing_key_rotate_keeps_the_older_keys(
    cluster: Cluster, namespace: str
) -> None:
    async def make(kube: Kube) -> None:
        await KeyringSecret(namespace, "keyring", create=True).load(kube)

    with_kube(cluster, make)
    before = sealing_keys(cluster, namespace, "keyring")
    assert before is not None
    done = run_cli(
        cluster, "gatehouse_operator.cli", "sealing-key", "rotate", "--secret",
        f"{namespace}/keyring",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = sealing_keys(cluster, namespace, "keyring")
    assert after is not None
    assert after.active != before.active
    assert f"sealing key {after.active} is active" in done.stdout
    assert set(after.public().keys) == {before.active, after.active}

    async def picked_up(kube: Kube) -> None:
        keyring = KeyringSecret(namespace, "keyring", create=False)
        await keyring.load(kube)
        assert keyring.sealing_keys().active == after.active  # type: ignore[union-attr]

    with_kube(cluster, picked_up)
