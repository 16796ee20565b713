"""Purging a connection's cached answers (issue 51): the service API and ``gatehouse cache purge``
set the annotation gatehouse.dev/cache-purged-at for those who may update the connection, as a
real API server's RBAC decides; the running operator takes it as the cache's epoch."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    Member,
    apply,
    condition,
    connection,
    get,
    project_members,
    wait_condition,
)

pytestmark = pytest.mark.e2e

PURGED_AT = "gatehouse.dev/cache-purged-at"


def _as(member: Member) -> dict[str, Any]:
    return {"headers": member.headers(), "timeout": 40}


def _annotation(cluster: Cluster, namespace: str) -> str | None:
    body = get(cluster, namespace, "externalconnection/vendor") or {}
    annotations: dict[str, str] = body["metadata"].get("annotations") or {}
    return annotations.get(PURGED_AT)


def _epoch_taken(cluster: Cluster, namespace: str, purged_at: str) -> dict[str, Any]:
    """The CachePurged condition once the operator took ``purged_at`` as the cache's epoch."""

    def taken() -> dict[str, Any] | None:
        found = condition(cluster, namespace, "externalconnection/vendor", "CachePurged")
        return found if purged_at in found.get("message", "") else None

    return wait_for(taken, timeout=20, interval=0.2, what=f"the epoch {purged_at}")


def _cli(
    cluster: Cluster, stack: Stack, namespace: str, member: Member
) -> subprocess.CompletedProcess[str]:
    """``gatehouse cache purge`` as ``member`` (its token), the cluster's kubeconfig beside it."""
    return subprocess.run(
        [
            sys.executable, "-m", "gatehouse_operator.cli.gatehouse", "cache", "purge", "vendor",
            "-n", namespace, "--server", stack.local.api_url, "--token", member.token,
        ],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )  # fmt: skip


def test_a_purge_is_for_who_may_update_the_connection_and_becomes_its_epoch(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project_members(cluster, namespace)
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, {"type": "none"}, cache={"ttlSeconds": 30}),
    )
    apply(cluster, namespace, connection("uncached", stack.upstream, {"type": "none"}))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    base = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections"

    # Builders and viewers see the connection (Builders) but may not update it.
    for who in ("builder", "viewer"):
        refused = httpx.post(f"{base}/vendor/cache/purge", **_as(members[who]))
        assert refused.status_code == 403, refused.text
        assert "may not update externalconnections/vendor" in refused.json()["error"]["message"]
    assert httpx.post(f"{base}/vendor/cache/purge", **_as(members["nobody"])).status_code == 403
    assert _annotation(cluster, namespace) is None

    purged = httpx.post(f"{base}/vendor/cache/purge", **_as(members["admin"]))
    assert purged.status_code == 200, purged.text
    assert purged.headers["cache-control"] == "no-store"
    purged_at = purged.json()["purgedAt"]
    assert _annotation(cluster, namespace) == purged_at
    taken = _epoch_taken(cluster, namespace, purged_at)
    assert (taken["status"], taken["reason"]) == ("True", "Purged")
    assert condition(cluster, namespace, "externalconnection/vendor")["status"] == "True"
    detail = httpx.get(f"{base}/vendor", **_as(members["admin"])).json()
    assert detail["cachePurgedAt"] == purged_at
    assert detail["cache"]["ttlSeconds"] == 30

    nothing = httpx.post(f"{base}/uncached/cache/purge", **_as(members["admin"]))
    assert nothing.status_code == 409
    assert nothing.json()["error"]["message"] == (
        "connection uncached caches nothing (no spec.cache)"
    )
    assert httpx.post(f"{base}/absent/cache/purge", **_as(members["admin"])).status_code == 404

    # The CLI: the same refusal for a viewer (exit 2), a new epoch for an admin.
    done = _cli(cluster, stack, namespace, members["viewer"])
    assert done.returncode == 2
    assert "cache purge: 403: " in done.stderr
    assert "may not update externalconnections/vendor" in done.stderr
    assert _annotation(cluster, namespace) == purged_at
    done = _cli(cluster, stack, namespace, members["admin"])
    assert done.returncode == 0, done.stderr
    again = _annotation(cluster, namespace)
    assert again is not None
    assert again > purged_at
    assert done.stdout == f"purged: answers vendor cached before {again} are never served again\n"
    _epoch_taken(cluster, namespace, again)
