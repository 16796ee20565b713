"""Which connections use a Secret (their credential's, or spec.tls's), and which apps link a
connection.

Kept as the routes change, so that a Secret's rotation or a connection's change finds what it
affects at the same cost with 10 resources as with 10,000.
"""

from __future__ import annotations

from typing import TypeVar

from gatehouse_contract.routes import namespace_of
from gatehouse_operator.api.connection import ExternalConnectionSpec

Entry = TypeVar("Entry")


class Indexes:
    def __init__(self) -> None:
        self._secret_users: dict[tuple[str, str], set[str]] = {}
        # Each indexed connection's Secrets, so that dropping it needs nothing but its key.
        self._secrets: dict[str, frozenset[tuple[str, str]]] = {}
        self._linkers: dict[str, set[str]] = {}

    def connections_using_secret(self, namespace: str, name: str) -> list[str]:
        return sorted(self._secret_users.get((namespace, name), ()))

    def apps_linking(self, connection_key: str) -> list[str]:
        return sorted(self._linkers.get(connection_key, ()))

    def add_connection(self, key: str, spec: ExternalConnectionSpec) -> None:
        self.remove_connection(key)
        secrets = _secrets_of(key, spec)
        self._secrets[key] = secrets
        for secret in secrets:
            self._secret_users.setdefault(secret, set()).add(key)

    def remove_connection(self, key: str) -> None:
        for secret in self._secrets.pop(key, frozenset()):
            _discard(self._secret_users, secret, key)

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


def _secrets_of(key: str, spec: ExternalConnectionSpec) -> frozenset[tuple[str, str]]:
    """(namespace, Secret name) of each Secret connection ``key`` reads: its credential's (name
    "" for none), and its client certificate's and CA bundle's (spec.tls)."""
    names = {spec.auth.secret_ref.name if spec.auth.secret_ref is not None else ""}
    tls = spec.tls
    if tls is not None and tls.client_certificate and tls.client_certificate.secret_ref:
        names.add(tls.client_certificate.secret_ref.name)
    if tls is not None and tls.ca_bundle_ref is not None:
        names.add(tls.ca_bundle_ref.name)
    return frozenset((namespace_of(key), name) for name in names)
