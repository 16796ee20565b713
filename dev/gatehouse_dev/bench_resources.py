"""The resources the benchmarks create, as API documents: one way to write each kind."""

from __future__ import annotations

from typing import Any

NO_AUTH: dict[str, Any] = {"type": "none"}


def secret(name: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {key: value},
    }


def api_key_auth(secret_name: str, key: str = "key") -> dict[str, Any]:
    return {
        "type": "apiKey",
        "apiKey": {"name": "X-API-Key", "in": "header"},
        "secretRef": {"name": secret_name, "key": key},
    }


def connection(name: str, upstream: str, auth: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Builders connection with a rate limit out of the benchmark's way; ``spec`` adds to it
    (``limits`` merge)."""
    limits = {"requestsPerMinute": 100_000, **spec.pop("limits", {})}
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ExternalConnection",
        "metadata": {"name": name},
        "spec": {
            "displayName": name,
            "baseURL": upstream,
            "linkPolicy": "Builders",
            "auth": auth,
            "limits": limits,
            **spec,
        },
    }


def data_app(name: str, links: dict[str, str]) -> dict[str, Any]:
    """A DataApp linking each alias to its connection."""
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "DataApp",
        "metadata": {"name": name},
        "spec": {
            "connections": [
                {"alias": alias, "connection": target} for alias, target in links.items()
            ]
        },
    }
