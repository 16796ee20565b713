"""Gatehouse's resources as API documents, one way to write each kind: for the e2e tests and the
benchmarks alike."""

from __future__ import annotations

from typing import Any

NO_AUTH: dict[str, Any] = {"type": "none"}
# Out of a benchmark's way: it measures the proxy, not the connection's rate limit.
UNLIMITED_RATE: dict[str, Any] = {"requestsPerMinute": 100_000}


# The label the operator's Secret watch selects on (gatehouse_operator.kube.WATCHED_SELECTOR).
WATCHED_LABELS = {"gatehouse.dev/credential": "true"}


def secret(name: str, **data: str) -> dict[str, Any]:
    """A credential Secret, labelled for the operator's watch."""
    document = unwatched_secret(name, **data)
    document["metadata"]["labels"] = dict(WATCHED_LABELS)
    return document


def unwatched_secret(name: str, **data: str) -> dict[str, Any]:
    """A credential Secret as earlier versions had them, without the watch's label."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def api_key_auth(secret_name: str, key: str = "key") -> dict[str, Any]:
    """An API key in the ``X-API-Key`` header, from ``secret_name``'s ``key``."""
    return {
        "type": "apiKey",
        "apiKey": {"name": "X-API-Key", "in": "header"},
        "secretRef": {"name": secret_name, "key": key},
    }


def connection(name: str, base_url: str, auth: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Builders connection; ``spec`` adds to or replaces its fields."""
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
    """A DataApp linking each alias to its connection."""
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "DataApp",
        "metadata": {"name": name},
        "spec": {"connections": [{"alias": a, "connection": c} for a, c in links.items()]},
    }
