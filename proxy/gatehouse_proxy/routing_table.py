"""The routing table: everything the proxy knows, as the operator publishes it.

This module is the contract between the two: the operator compiles routes and sends them as a
snapshot and then deltas (see :mod:`gatehouse_proxy.channel`); each replica keeps a
:class:`RoutingTable` of them and routes by it. It holds no secret in the clear: credentials
are sealed (see :mod:`gatehouse_proxy.sealing`) and apps appear only as hashes of their tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gatehouse_proxy.sealing import Sealed

AuthType = Literal["none", "apiKey", "bearer", "googleServiceAccount"]
EntryKind = Literal["connection", "app"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Limits(_Frozen):
    timeout_seconds: float
    max_request_bytes: int
    max_response_bytes: int
    requests_per_minute: int


class Credential(_Frozen):
    type: AuthType
    parameter: str = ""  # the API key's header or query parameter name
    location: Literal["header", "query", ""] = ""
    scopes: tuple[str, ...] = ()
    sealed: Sealed | None = None

    @property
    def fingerprint(self) -> str:
        """Identifies the sealed value without revealing anything about the secret."""
        if self.sealed is None:
            return ""
        return hashlib.sha256(self.sealed.ciphertext.encode()).hexdigest()[:16]

    def context(self, connection_uid: str, origin: str) -> str:
        """What a sealed value is bound to: opening it for another host or placement fails."""
        return f"{connection_uid}|{origin}|{self.type}|{self.location}|{self.parameter}"


class ConnectionRoute(_Frozen):
    key: str  # "namespace/name"
    uid: str
    origin: str  # scheme://host[:port], normalised
    allowed_methods: frozenset[str]
    allowed_paths: tuple[str, ...]
    credential: Credential
    limits: Limits
    # Set when the operator cannot provide a working credential (missing Secret, bad key file):
    # the proxy answers 503 instead of calling upstream with stale or no credentials.
    unavailable: str = ""


class AppRoute(_Frozen):
    key: str  # "namespace/Kind/name"
    token_sha256: str
    links: dict[str, str] = Field(default_factory=dict)  # alias -> ConnectionRoute.key


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def entry_digest(kind: EntryKind, key: str, revision: int) -> int:
    """One entry's share of a table's digest: the XOR of all entries' shares.

    The digest moves with every upsert and deletion at the cost of that change alone, and it
    tells a replica whose table went wrong (a lost or doubled delta) that it must resync.
    """
    return int.from_bytes(hashlib.sha256(f"{kind}|{key}|{revision}".encode()).digest()[:16])


class TableRejected(ValueError):
    """A snapshot or delta the replica will not install; its table stays as it was."""


class TableGap(ValueError):
    """A delta that does not continue the replica's table: it needs a snapshot."""


@dataclass(frozen=True)
class RoutingTable:
    """A replica's table: routes by key, each with the version it last changed in.

    Immutable: a delta makes a new table (dictionary copies, no re-validation of what did not
    change), so a request always sees one consistent table.
    """

    version: int
    connections: Mapping[str, ConnectionRoute]
    apps: Mapping[str, AppRoute]
    revisions: Mapping[tuple[EntryKind, str], int]
    digest: int
    key_id: str = ""
    apps_by_token_hash: Mapping[str, AppRoute] = field(default_factory=dict)

    @classmethod
    def from_snapshot(cls, message: Mapping[str, Any], key_id: str) -> RoutingTable:
        """Builds a table from a snapshot message; TableRejected says why one cannot be."""
        try:
            version = int(message["version"])
            connections: dict[str, ConnectionRoute] = {}
            apps: dict[str, AppRoute] = {}
            revisions: dict[tuple[EntryKind, str], int] = {}
            for entry in message["connections"]:
                route = ConnectionRoute.model_validate(entry["route"])
                connections[route.key] = route
                revisions["connection", route.key] = int(entry["rev"])
            for entry in message["apps"]:
                app = AppRoute.model_validate(entry["route"])
                apps[app.key] = app
                revisions["app", app.key] = int(entry["rev"])
            expected = int(message["digest"], 16)
        except (KeyError, TypeError, ValueError) as error:
            raise TableRejected(f"malformed snapshot: {_why(error)}") from None
        digest = 0
        for (kind, key), revision in revisions.items():
            digest ^= entry_digest(kind, key, revision)
        if digest != expected:
            raise TableRejected(f"snapshot {version} does not match its digest")
        return cls._made(version, connections, apps, revisions, digest, key_id)

    def with_delta(self, message: Mapping[str, Any], key_id: str) -> RoutingTable:
        """This table with a delta applied; TableGap when the delta does not follow it."""
        try:
            base, version = int(message["base"]), int(message["version"])
            upserted = [ConnectionRoute.model_validate(r) for r in message["connections"]]
            upserted_apps = [AppRoute.model_validate(r) for r in message["apps"]]
            removed = [str(key) for key in message["removedConnections"]]
            removed_apps = [str(key) for key in message["removedApps"]]
            expected = int(message["digest"], 16)
        except (KeyError, TypeError, ValueError) as error:
            raise TableRejected(f"malformed delta: {_why(error)}") from None
        if version <= self.version:
            raise TableRejected(f"delta to {version} is not newer than {self.version} (a replay?)")
        if base != self.version:
            raise TableGap(f"a delta from {base} arrived, the table is at {self.version}")
        connections = dict(self.connections)
        apps = dict(self.apps)
        revisions = dict(self.revisions)
        digest = self.digest
        changes: list[tuple[EntryKind, str, ConnectionRoute | AppRoute | None]] = [
            *(("connection", key, None) for key in removed),
            *(("app", key, None) for key in removed_apps),
            *(("connection", route.key, route) for route in upserted),
            *(("app", app.key, app) for app in upserted_apps),
        ]
        for kind, key, route in changes:
            previous = revisions.pop((kind, key), None)
            if previous is not None:
                digest ^= entry_digest(kind, key, previous)
            routes: dict[str, Any] = connections if kind == "connection" else apps
            if route is None:
                routes.pop(key, None)
                continue
            routes[key] = route
            revisions[kind, key] = version
            digest ^= entry_digest(kind, key, version)
        if digest != expected:
            raise TableGap(f"the table after the delta to {version} does not match its digest")
        return self._made(version, connections, apps, revisions, digest, key_id)

    @classmethod
    def _made(
        cls,
        version: int,
        connections: dict[str, ConnectionRoute],
        apps: dict[str, AppRoute],
        revisions: dict[tuple[EntryKind, str], int],
        digest: int,
        key_id: str,
    ) -> RoutingTable:
        by_token = {app.token_sha256: app for app in apps.values()}
        return cls(version, connections, apps, revisions, digest, key_id, by_token)

    def app_for_token(self, token: str) -> AppRoute | None:
        return self.apps_by_token_hash.get(token_sha256(token))

    @property
    def sealing_keys(self) -> frozenset[str]:
        """The keyring keys this table's credentials are sealed with; a key may be retired
        once no replica's table uses it."""
        return frozenset(
            route.credential.sealed.key_id
            for route in self.connections.values()
            if route.credential.sealed is not None
        )


def _why(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error}"
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
