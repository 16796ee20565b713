"""AWS Signature Version 4 with a role's keys by web identity, end to end: a kubectl-applied
connection naming a role, two proxy replicas of two workers each sharing a store, their web
identity a real service account token the API server issued (``kubectl create token``, audience
sts.amazonaws.com), and an STS on 127.0.0.1 (gatehouse_dev.aws_sts) that verifies it against the
API server's own JWKS, as AWS verifies a cluster's OIDC provider. Its API verifies each request's
SigV4 signature with the keys it issued, independently of the proxy's signer, and refuses keys
past their expiration.

The same with EKS Pod Identity in place of a web identity: the dev STS is also the Pod Identity
agent, and verifies the ``AssumeRole`` signed with the keys it answered.

Every count is what STS saw.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.echoes import leaks
from gatehouse_dev.services import Endpoint
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    Fleet,
    app_token,
    apply,
    burst,
    condition,
    connection,
    data_app,
    fetch,
    started_fleet,
    wait_condition,
)

pytestmark = pytest.mark.e2e

ACCOUNT = "111122223333"
ROLE_PREFIX = f"arn:aws:iam::{ACCOUNT}:role/gatehouse-dev-"


@pytest.fixture(scope="module")
def sts(cluster: Cluster, stack: Stack) -> Iterator[Endpoint]:
    """STS trusting the API server as an OIDC provider: its issuer and its JWKS, as read from
    it (the discovery document and the key set every cluster serves)."""
    discovery = json.loads(
        cluster.kubectl("get", "--raw", "/.well-known/openid-configuration").stdout
    )
    jwks = cluster.kubectl("get", "--raw", "/openid/v1/jwks").stdout
    endpoint = stack.local.start_aws_sts(jwks, discovery["issuer"])
    try:
        yield endpoint
    finally:
        endpoint.server.stop()
        stack.local.servers.remove(endpoint.server)


@pytest.fixture(scope="module")
def identity(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The proxies' web identity: a token of their service account for STS alone, as the
    chart's projected volume holds it."""
    namespace = f"gh-sts-{secrets.token_hex(4)}"
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("create", "serviceaccount", "gatehouse-proxy", "-n", namespace)
    token = cluster.kubectl(
        "create",
        "token",
        "gatehouse-proxy",
        "-n",
        namespace,
        "--audience=sts.amazonaws.com",
        "--duration=1h",
    ).stdout.strip()
    path = tmp_path_factory.mktemp("web-identity") / "token"
    path.write_text(token)
    return path


@pytest.fixture(scope="module")
def fleet(
    stack: Stack, sts: Endpoint, identity: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    settings = {
        "GATEHOUSE_AWS_STS_URL": f"{sts.url}/",
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(identity),
    }
    with started_fleet(stack.local, tmp_path_factory.mktemp("fleet"), settings) as started:
        yield started


@pytest.fixture(scope="module")
def pod_fleet(
    stack: Stack, sts: Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    """Proxies whose AWS identity is EKS Pod Identity alone: the agent's URL and the token
    file EKS mounts for it."""
    folder = tmp_path_factory.mktemp("pod-fleet")
    token = folder / "eks-pod-identity-token"
    made = httpx.post(f"{sts.url}/pod-identity", timeout=5)
    token.write_text(made.raise_for_status().json()["token"])
    settings = {
        "GATEHOUSE_AWS_STS_URL": f"{sts.url}/",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{sts.url}/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token),
    }
    with started_fleet(stack.local, folder, settings) as started:
        yield started


def _role() -> str:
    return f"{ROLE_PREFIX}{secrets.token_hex(4)}"


def _signed(
    cluster: Cluster,
    namespace: str,
    sts: Endpoint,
    role: str,
    name: str = "reports",
    seconds: int = 900,
) -> str:
    """A connection to STS's API signing with ``role`` by web identity, and an app linking it
    as 'aws'; returns the app's token."""
    auth = {
        "type": "awsSigV4",
        "awsSigV4": {
            "region": "us-east-1",
            "service": "execute-api",
            "webIdentity": {"roleArn": role, "durationSeconds": seconds},
        },
    }
    apply(
        cluster,
        namespace,
        connection(name, sts.url, auth, limits={"requestsPerMinute": 100_000}),
        data_app("sales", {"aws": name}),
    )
    wait_condition(cluster, namespace, f"externalconnection/{name}", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _stats(sts: Endpoint) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{sts.url}/stats", timeout=5).json()
    return stats


def _lifetime(sts: Endpoint, seconds: float) -> None:
    httpx.post(f"{sts.url}/lifetime", json={"seconds": seconds}, timeout=5).raise_for_status()


async def _burst(urls: list[str], token: str, count: int, concurrency: int) -> list[int]:
    """``count`` fetches of a report each (see burst)."""
    return await burst(
        urls, token, lambda index: f"/v1/fetch/aws/api/reports/{index}", count, concurrency
    )


def test_500_concurrent_fetches_on_a_cold_connection_ask_sts_once(
    cluster: Cluster, namespace: str, sts: Endpoint, fleet: Fleet
) -> None:
    _lifetime(sts, 0)
    role = _role()
    token = _signed(cluster, namespace, sts, role)
    statuses = asyncio.run(_burst(fleet.urls, token, 500, 128))
    assert statuses == [200] * 500
    assert _stats(sts)["requests"][role] == 1
    # What the API verified: the role's keys, signed for the request as it was sent.
    assert fetch(fleet.urls[0], token, "aws", "/api/reports").json() == {
        "verified": True,
        "role": role,
    }
    status = condition(cluster, namespace, "externalconnection/reports", "CredentialReady")
    assert status["reason"] == "RoleByWebIdentity"


def test_keys_are_renewed_once_for_the_fleet_before_they_expire_and_no_fetch_fails(
    cluster: Cluster, namespace: str, sts: Endpoint, fleet: Fleet
) -> None:
    """Keys that live 12 s, steady traffic over about three of their lifetimes: each renewed
    once for the fleet, a quarter of its life before it expires, and no request is signed with
    keys STS's API calls expired."""
    _lifetime(sts, 12)
    role = _role()
    token = _signed(cluster, namespace, sts, role)
    expired_before = _stats(sts)["api"].get("ExpiredToken", 0)
    statuses: list[int] = []
    ends = time.monotonic() + 33
    while time.monotonic() < ends:
        statuses += asyncio.run(_burst(fleet.urls, token, 16, 8))
        time.sleep(0.25)
    _lifetime(sts, 0)
    assert set(statuses) == {200}, statuses
    assert _stats(sts)["api"].get("ExpiredToken", 0) == expired_before
    # 33 s of 12-second keys renewed at 9 s: the first and three renewals, once each, for
    # 4 workers on 2 replicas (a fifth at most, for a renewal that came due at the very end).
    assert 3 <= _stats(sts)["requests"][role] <= 5


def test_with_eks_pod_identity_500_concurrent_fetches_ask_the_agent_and_sts_once(
    cluster: Cluster, namespace: str, sts: Endpoint, pod_fleet: Fleet
) -> None:
    """The proxies' own role's keys from the agent sign one AssumeRole for the fleet; the
    connection's two hours are asked as one (STS refuses more for role chaining)."""
    _lifetime(sts, 0)
    role = _role()
    agent_before = _stats(sts)["agent"].get("OK", 0)
    token = _signed(cluster, namespace, sts, role, seconds=7200)
    statuses = asyncio.run(_burst(pod_fleet.urls, token, 500, 128))
    assert statuses == [200] * 500
    stats = _stats(sts)
    assert stats["requests"][role] == 1
    assert stats["agent"]["OK"] == agent_before + 1  # the one worker that minted asked it
    assert "refused" not in stats["agent"]
    assert fetch(pod_fleet.urls[1], token, "aws", "/api/reports").json() == {
        "verified": True,
        "role": role,
    }


def test_a_role_the_installation_does_not_list_for_the_namespace_is_refused(
    cluster: Cluster, namespace: str, sts: Endpoint
) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/admin"
    auth = {
        "type": "awsSigV4",
        "awsSigV4": {
            "region": "us-east-1",
            "service": "execute-api",
            "webIdentity": {"roleArn": role},
        },
    }
    apply(cluster, namespace, connection("admin", sts.url, auth))
    found = wait_condition(
        cluster, namespace, "externalconnection/admin", "False", "RoleNotAllowed"
    )
    assert "installation.aws.webIdentity.roles" in found["message"]
    assert role not in _stats(sts)["requests"]


def test_sts_refusing_the_proxies_token_fails_the_fetch_with_stss_code_and_no_token(
    cluster: Cluster,
    namespace: str,
    sts: Endpoint,
    stack: Stack,
    tmp_path: Path,
    identity: Path,
) -> None:
    """A proxy whose token STS does not trust (one it made up): the app is told STS's code, and
    neither token nor keys appear in what it is told or in the proxy's log."""
    forged = identity.read_text().rsplit(".", 1)[0] + ".c2lnbmF0dXJl"
    path = tmp_path / "token"
    path.write_text(forged)
    settings = {"GATEHOUSE_AWS_STS_URL": f"{sts.url}/", "AWS_WEB_IDENTITY_TOKEN_FILE": str(path)}
    proxy = stack.local.start_proxy(store=False, settings=settings)
    try:
        token = _signed(cluster, namespace, sts, _role())
        reply = fetch(proxy.url, token, "aws", "/api/reports")
        log = proxy.server.log_path.read_bytes()
    finally:
        proxy.server.stop()
        stack.local.servers.remove(proxy.server)
    assert reply.status_code == 502
    error = reply.json()["error"]
    assert error["code"] == "credential_failed"
    assert "InvalidIdentityToken" in error["message"]
    assert not leaks(reply.content, forged)
    assert not leaks(log, forged)
