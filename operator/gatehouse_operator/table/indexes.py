"""Which connections use a Secret, and which apps link a connection.

Kept as the routes change, so that a Secret's rotation or a connection's change finds what it
affects at the same cost with 10 resources as with 10,000.
"""

from __future__ import annotations

from typing import Any, TypeVar

Entry = TypeVar("Entry")


class Indexes:
    def __init__(self) -> None:
        self._secret_users: dict[tuple[str, str], set[str]] = {}
        self._linkers: dict[str, set[str]] = {}

    def connections_using_secret(self, namespace: str, name: str) -> list[str]:
        return sorted(self._secret_users.get((namespace, name), ()))

    def apps_linking(self, connection_key: str) -> list[str]:
        return sorted(self._linkers.get(connection_key, ()))

    def add_connection(self, key: str, body: dict[str, Any]) -> None:
        self._secret_users.setdefault(_secret_of(body), set()).add(key)

    def remove_connection(self, key: str, body: dict[str, Any]) -> None:
        _discard(self._secret_users, _secret_of(body), key)

    def add_app(self, key: str, links: dict[str, str]) -> None:
        for connection in links.values():
            self._linkers.setdefault(connection, set()).add(key)

    def remove_app(self, key: str, links: dict[str, str]) -> None:
        for connection in links.values():
            _discard(self._linkers, connection, key)


def _discard(index: dict[Entry, set[str]], entry: Entry, key: str) -> None:
    users = index.get(entry, set())
    users.discard(key)
    if not users:
        index.pop(entry, None)


def _secret_of(body: dict[str, Any]) -> tuple[str, str]:
    """(namespace, Secret name) a connection takes its credential from; name "" for none."""
    ref = body.get("spec", {}).get("auth", {}).get("secretRef") or {}
    return body["metadata"]["namespace"], str(ref.get("name") or "")
