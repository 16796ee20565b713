"""Helpers for end-to-end tests of the whole stack: apply YAML, wait for status, fetch."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from gatehouse_dev.cluster import Cluster, Persona
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.resources import connection as connection
from gatehouse_dev.resources import data_app as data_app
from gatehouse_dev.resources import secret as secret
from gatehouse_dev.services import Endpoint, LocalGatehouse
from gatehouse_dev.waiting import wait_for

API_KEY_AUTH: dict[str, Any] = {
    "type": "apiKey",
    "apiKey": {"name": "X-API-Key", "in": "header"},
    "secretRef": {"name": "vendor", "key": "api-key"},
}


def apply(cluster: Cluster, namespace: str, *documents: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(documents))


def get(cluster: Cluster, namespace: str, resource: str) -> dict[str, Any] | None:
    done = cluster.kubectl("get", resource, "-n", namespace, "-o", "json", check=False)
    if done.returncode != 0:
        return None
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def condition(
    cluster: Cluster, namespace: str, resource: str, kind: str = "Ready"
) -> dict[str, Any]:
    body = get(cluster, namespace, resource) or {}
    for entry in body.get("status", {}).get("conditions", []):
        if entry["type"] == kind:
            return dict(entry)
    return {}


def wait_condition(
    cluster: Cluster, namespace: str, resource: str, status: str, reason: str | None = None
) -> dict[str, Any]:
    def met() -> dict[str, Any] | None:
        found = condition(cluster, namespace, resource)
        if found.get("status") == status and (reason is None or found.get("reason") == reason):
            return found
        return None

    return wait_for(met, timeout=20, interval=0.2, what=f"{resource} Ready={status} {reason or ''}")


def wait_settled(cluster: Cluster, namespace: str, resource: str) -> dict[str, Any]:
    """Ready=True for the spec as it is now (the condition's observedGeneration is the object's
    generation): after a change, Ready may still be True from the one before while the status of
    this one is yet to be written, and a page that reads the object before that write saves
    with a resourceVersion the write makes stale (409)."""

    def met() -> dict[str, Any] | None:
        body = get(cluster, namespace, resource) or {}
        found = condition(cluster, namespace, resource)
        generation = body.get("metadata", {}).get("generation")
        settled = found.get("observedGeneration") == generation
        return found if found.get("status") == "True" and settled else None

    return wait_for(met, timeout=20, interval=0.2, what=f"{resource} Ready=True, settled")


def connection_test(name: str, target: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ConnectionTest",
        "metadata": {"name": name},
        "spec": {"connection": target, **spec},
    }


def finished(cluster: Cluster, namespace: str, name: str, timeout: float = 30) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = get(cluster, namespace, f"connectiontest/{name}") or {}
        return body if body.get("status", {}).get("finishedAt") else None

    return wait_for(done, timeout=timeout, interval=0.2, what=f"ConnectionTest {name} to finish")


def run_cli(cluster: Cluster, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of the shipped command-line tools (``python -m module``) against the cluster."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )


def app_token(cluster: Cluster, namespace: str, secret: str) -> str:
    return cluster.app_token(namespace, secret, timeout=20)


def fetch(
    proxy: str, token: str, alias: str, path: str, *, method: str = "GET", **kwargs: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    return httpx.request(
        method, f"{proxy}/v1/fetch/{alias}{path}", headers=headers, timeout=30, **kwargs
    )


def received(upstream: str, response: httpx.Response) -> dict[str, Any]:
    """What the upstream received for an echoed request, asked of the upstream directly: the
    echo that came back through the proxy has the injected credential scrubbed."""
    assert response.status_code == 200, response.text
    record = httpx.get(f"{upstream}/_received/{response.json()['id']}", timeout=5)
    return dict(record.json())


# The project's members for access tests: a ServiceAccount each, bound to a Gatehouse role in the
# namespace, so the same identity works with kubectl (impersonated) and the service API (token).
ROLES = {
    "admin": "gatehouse-admin",
    "builder": "gatehouse-builder",
    # Deploys the project file and changes its defaults (a CI account, say).
    "developer": "gatehouse-developer",
    "viewer": "gatehouse-interactive-viewer",
    # The reference's plain Viewer: sees apps, not the connections list.
    "plain-viewer": "gatehouse-viewer",
    "nobody": None,
}


@dataclass(frozen=True)
class Member:
    persona: Persona
    token: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def project_members(cluster: Cluster, namespace: str) -> dict[str, Member]:
    members = {}
    for name, role in ROLES.items():
        cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
        if role:
            cluster.kubectl(
                "create",
                "rolebinding",
                name,
                f"--clusterrole={role}",
                f"--serviceaccount={namespace}:{name}",
                "-n",
                namespace,
            )
        token = cluster.kubectl("create", "token", name, "-n", namespace).stdout.strip()
        persona = Persona(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )
        members[name] = Member(persona, token)

    def bound() -> bool:  # RBAC reaches the API server's authorizer through a watch
        done = cluster.kubectl(
            "auth",
            "can-i",
            "link",
            "externalconnections",
            "-n",
            namespace,
            as_user=members["viewer"].persona,
            check=False,
        )
        return done.stdout.strip() == "yes"

    wait_for(bound, timeout=10, interval=0.1, what="the role bindings")
    return members


def grant(
    cluster: Cluster, namespace: str, member: str, verbs: str, resource: str, name: str = ""
) -> None:
    """A Role of its own for one member (``verbs``: "get,create" on ``resource``, or on one
    object of it), waited for until the API server's authorizer sees it."""
    role = f"{member}-{verbs.replace(',', '-')}-{resource.split('.')[0]}-{name}".rstrip("-")
    rule = [f"--verb={verbs}", f"--resource={resource}"]
    cluster.kubectl(
        "create", "role", role, *rule, *([f"--resource-name={name}"] if name else []),
        "-n", namespace,
    )  # fmt: skip
    cluster.kubectl(
        "create",
        "rolebinding",
        role,
        f"--role={role}",
        f"--serviceaccount={namespace}:{member}",
        "-n",
        namespace,
    )

    def bound() -> bool:  # RBAC reaches the API server's authorizer through a watch
        done = cluster.kubectl(
            "auth",
            "can-i",
            verbs.split(",")[0],
            f"{resource}/{name}" if name else resource,
            "-n",
            namespace,
            f"--as=system:serviceaccount:{namespace}:{member}",
            check=False,
        )
        return done.stdout.strip() == "yes"

    wait_for(bound, timeout=10, interval=0.1, what=f"{member}'s role {role}")


def grant_secrets(cluster: Cluster, namespace: str, member: str, verbs: str) -> None:
    """Rights on the namespace's Secrets, for a member who, in a real cluster, would have them
    through Kubernetes' built-in admin or edit role (aggregation needs the controller-manager,
    absent here). A connection that sends a Secret's value needs ``get`` on it
    (docs/security/who-may-do-what.md, "Who may do what")."""
    grant(cluster, namespace, member, verbs, "secrets")


def register_client(
    token_endpoint: str,
    client_id: str,
    secret: str,
    method: str,
    lifetime: int | None = None,
    *,
    revoke_on_mint: bool = False,
) -> None:
    """An OAuth 2.0 client of the dev token endpoint (dev/gatehouse_dev/token_endpoint.py),
    authenticating by ``method`` (basic or body); tokens live ``lifetime`` seconds (its default
    when None); ``revoke_on_mint``: each new token revokes the client's others."""
    client: dict[str, Any] = {
        "id": client_id,
        "secret": secret,
        "method": method,
        "revokeOnMint": revoke_on_mint,
    }
    if lifetime is not None:
        client["lifetime"] = lifetime
    httpx.post(f"{token_endpoint}/clients", json=client, timeout=5).raise_for_status()


def token_requests(token_endpoint: str, client_id: str) -> int:
    """How many tokens the dev token endpoint minted for ``client_id``."""
    clients = httpx.get(f"{token_endpoint}/stats", timeout=5).json()["clients"]
    return int(clients.get(client_id, 0))


@dataclass
class Fleet:
    """Two proxy replicas of two workers each sharing a store of their own, beside the stack's:
    what belongs to a credential must hold across replicas and workers."""

    store: RedisServer
    replicas: list[Endpoint]

    @property
    def urls(self) -> list[str]:
        return [replica.url for replica in self.replicas]


@contextmanager
def started_fleet(
    local: LocalGatehouse, folder: Path, settings: Mapping[str, str] | None = None
) -> Iterator[Fleet]:
    """A :class:`Fleet` with the proxies' ``settings`` (environment), stopped on leaving."""
    store = RedisServer(folder)
    store.start()
    replicas = [
        local.start_proxy(workers=2, store=store, settings=dict(settings or {})) for _ in range(2)
    ]
    try:
        yield Fleet(store, replicas)
    finally:
        for replica in replicas:
            replica.server.stop()
            local.servers.remove(replica.server)
        store.stop()


async def burst(
    urls: list[str], token: str, path: Callable[[int], str], count: int, concurrency: int
) -> list[int]:
    """The statuses of ``count`` GETs of ``path(index)`` (``/v1/fetch/...``), ``concurrency``
    at a time over fresh connections, spread over the replicas ``urls`` (and, by the kernel,
    over their workers)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int) -> int:
            async with gate:
                reply = await client.get(
                    f"{urls[index % len(urls)]}{path(index)}",
                    headers={"Authorization": f"Bearer {token}"},
                )
                return reply.status_code

        return list(await asyncio.gather(*(one(index) for index in range(count))))
