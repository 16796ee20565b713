"""The routing table: everything the proxy knows, as the operator publishes it.

This module is the contract between the two: the operator builds a :class:`RoutingTable`, signs
and pushes it; the proxy verifies it and routes by it. It holds no secret in the clear: credentials
are sealed (see :mod:`gatehouse_proxy.sealing`) and apps appear only as hashes of their tokens.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gatehouse_proxy.sealing import Keyring, Sealed

AuthType = Literal["none", "apiKey", "bearer", "googleServiceAccount"]


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


class RoutingTable(_Frozen):
    version: int
    connections: dict[str, ConnectionRoute] = Field(default_factory=dict)
    apps: tuple[AppRoute, ...] = ()

    @property
    def sealing_keys(self) -> frozenset[str]:
        """The keyring keys this table's credentials are sealed with; a key may be retired
        once no replica's table uses it."""
        return frozenset(
            route.credential.sealed.key_id
            for route in self.connections.values()
            if route.credential.sealed is not None
        )


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SignedTable(_Frozen):
    """What travels: the table's JSON and the operator's signature over it."""

    key_id: str
    signature: str
    table: str

    @classmethod
    def sign(cls, table: RoutingTable, keyring: Keyring) -> SignedTable:
        payload = table.model_dump_json()
        key_id, signature = keyring.sign(payload.encode())
        return cls(key_id=key_id, signature=signature, table=payload)

    def verified(self, keyring: Keyring) -> RoutingTable:
        if not keyring.verify(self.table.encode(), self.key_id, self.signature):
            raise ValueError("routing table signature does not verify")
        return RoutingTable.model_validate(json.loads(self.table))
