"""Finished ConnectionTests are deleted once their ttlSecondsAfterFinished has passed, read from
the stored object (the default where unset); unfinished ones are kept."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, cast

from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.controllers.connection_tests import expire_finished
from gatehouse_operator.runtime import Runtime
from tests.operator.kube_fakes import kube_of


class StoredTests:
    """The Kubernetes client's part expire_finished uses, over a list of stored tests."""

    def __init__(self, bodies: list[dict[str, Any]]) -> None:
        self.bodies = bodies
        self.deleted: list[tuple[str, str]] = []

    async def existing(self, kind: Kind) -> list[dict[str, Any]]:
        assert kind == CONNECTION_TEST
        return self.bodies

    async def delete_custom(self, kind: Kind, namespace: str, name: str) -> None:
        self.deleted.append((namespace, name))


class FakeRuntime:
    def __init__(self, kube: StoredTests) -> None:
        self.kube = kube_of(kube)


def _test(name: str, finished_ago: float | None, ttl: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"connection": "crm", "method": "GET", "path": "/"},
        "status": {},
    }
    if ttl is not None:
        body["spec"]["ttlSecondsAfterFinished"] = ttl
    if finished_ago is not None:
        at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=finished_ago)
        body["status"]["finishedAt"] = at.isoformat()
    return body


def test_finished_tests_past_their_ttl_are_deleted() -> None:
    kube = StoredTests(
        [
            _test("expired", finished_ago=120, ttl=60),
            _test("kept", finished_ago=30, ttl=60),
            _test("running", finished_ago=None, ttl=0),
            _test("default-kept", finished_ago=1_800, ttl=None),
            _test("default-expired", finished_ago=7_200, ttl=None),
        ]
    )

    asyncio.run(expire_finished(cast(Runtime, FakeRuntime(kube))))

    assert kube.deleted == [("team", "expired"), ("team", "default-expired")]
