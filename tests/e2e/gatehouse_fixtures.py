"""Helpers for end-to-end tests of the whole stack: apply YAML, wait for status, fetch."""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml

from gatehouse_dev.cluster import Cluster
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


def app_token(cluster: Cluster, namespace: str, secret: str) -> str:
    return cluster.app_token(namespace, secret, timeout=20)


def connection(
    name: str,
    base_url: str,
    auth: dict[str, Any],
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ExternalConnection",
        "metadata": {"name": name},
        "spec": {
            "displayName": name.title(),
            "baseURL": base_url,
            "linkPolicy": "Builders",
            "auth": auth,
            **spec,
        },
    }


def data_app(name: str, links: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "DataApp",
        "metadata": {"name": name},
        "spec": {"connections": [{"alias": a, "connection": c} for a, c in links.items()]},
    }


def secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def fetch(
    proxy: str, token: str, alias: str, path: str, *, method: str = "GET", **kwargs: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    return httpx.request(
        method, f"{proxy}/v1/fetch/{alias}{path}", headers=headers, timeout=30, **kwargs
    )
