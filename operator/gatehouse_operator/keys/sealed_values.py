"""Credentials sealed to the operator: values that can live in Git and that no ``get`` can read.

A sealed value is HPKE (RFC 9180, base mode: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
AES-256-GCM) to one of the operator's sealing keys, in a compact form a YAML file carries::

    gh1.<base64url of the header>.<base64url of enc || ciphertext>

The header is JSON, readable by anyone and authenticated as HPKE's ``info``::

    {"v": 1, "key": "<fingerprint>", "namespace": "shop", "name": "stripe",
     "origin": "https://api.stripe.com"}

So a value opens only for the connection it was sealed for: copied to another name, namespace or
baseURL it does not open, and because the header is in the clear, the operator can say which of
these it was instead of only "does not open". Binding the origin matters as much as the name:
whoever may edit a connection could otherwise point it at their own host and receive the value.

Only the operator holds the private keys (in a Secret of their own, see sealing_secret); the
public keys are published for anyone to seal with. Messages here name fingerprints and scopes, never
the value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.errors import GatehouseError

log = logging.getLogger("gatehouse.operator")

_HEADER_FIELDS = {"v", "key", "namespace", "name", "origin"}
# A client secret's header binds these too.
_TOKEN_FIELDS = {"tokenURL", "clientId"}
# A value sealed for another use than the connection's auth secret (a TLS client certificate)
# names it: it opens for that use alone.
_USE_FIELD = "use"
# A header holds a fingerprint, a namespace and name (at most 253 each) and an origin (at most
# 2,048): more is not a header.
_MAX_HEADER_CHARS = 4 * 1024

PREFIX = "gh1"
VERSION = 1
FIELD = "auth.sealedSecret"
# The uses a value may be sealed for beside the auth secret ("" in a Scope).
TLS_CLIENT_CERTIFICATE = "tlsClientCertificate"
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_256_GCM)
# Long enough to name a key among any number an installation keeps; not a security bound (the
# AEAD is).
_FINGERPRINT_HEX = 16


class SealedValueProblem(GatehouseError):
    """Why a sealed value cannot be used, as a condition reason and a message naming the field."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class SealingKeysError(GatehouseError, ValueError):
    """The sealing keys' document is malformed; messages never include key material."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(public: X25519PublicKey) -> str:
    return hashlib.sha256(public.public_bytes_raw()).hexdigest()[:_FINGERPRINT_HEX]


@dataclass(frozen=True)
class Scope:
    """What a value is sealed for: one connection, at one origin; a client secret also for one
    token URL and one client id (whoever may edit the connection could otherwise send it to a
    token endpoint of theirs)."""

    namespace: str
    name: str
    origin: str
    token_url: str = ""
    client_id: str = ""
    # "": the auth secret; else what else of the connection it is (TLS_CLIENT_CERTIFICATE).
    use: str = ""

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name} at {self.origin}"
        if self.token_url:
            where += f" (token URL {self.token_url}, client {self.client_id})"
        if self.use:
            where += f" (as its {self.use})"
        return where

    def header_fields(self) -> dict[str, str]:
        fields = {"namespace": self.namespace, "name": self.name, "origin": self.origin}
        if self.token_url:
            fields |= {"tokenURL": self.token_url, "clientId": self.client_id}
        if self.use:
            fields[_USE_FIELD] = self.use
        return fields


@dataclass(frozen=True)
class SealedValue:
    key: str
    scope: Scope
    header: bytes
    payload: bytes

    @classmethod
    def parse(cls, text: str, field: str = FIELD) -> SealedValue:
        corrupt = SealedValueProblem(
            Reason.SEALED_VALUE_CORRUPT,
            f"{field} is not a sealed value (gh1.<header>.<payload>, as gatehouse seal writes "
            "it): it was cut or altered",
        )
        parts = text.strip().split(".")
        if len(parts) != 3 or parts[0] != PREFIX or len(parts[1]) > _MAX_HEADER_CHARS:
            raise corrupt
        try:
            header = _unb64url(parts[1])
            payload = _unb64url(parts[2])
            fields = json.loads(header)
        # RecursionError: JSON nested thousands deep (a short header can be).
        except (ValueError, binascii.Error, RecursionError):
            raise corrupt from None
        if not isinstance(fields, dict) or set(fields) - {_USE_FIELD} not in (
            _HEADER_FIELDS,
            _HEADER_FIELDS | _TOKEN_FIELDS,
        ):
            raise corrupt
        names = (
            "namespace",
            "name",
            "origin",
            "key",
            *((_TOKEN_FIELDS | {_USE_FIELD}) & set(fields)),
        )
        if not all(isinstance(fields[name], str) for name in names):
            raise corrupt
        # Named in conditions and messages: a header must not make them large.
        if type(fields["v"]) is not int or any(len(fields[name]) > 2048 for name in names):
            raise corrupt
        if fields["v"] != VERSION:
            raise SealedValueProblem(
                Reason.SEALED_VALUE_CORRUPT,
                f"{field} is sealed in format version {fields['v']}; this operator reads {VERSION}",
            )
        scope = Scope(
            fields["namespace"],
            fields["name"],
            fields["origin"],
            fields.get("tokenURL", ""),
            fields.get("clientId", ""),
            fields.get(_USE_FIELD, ""),
        )
        key = fields["key"]
        return cls(key, scope, header, payload)


Key = TypeVar("Key", X25519PublicKey, X25519PrivateKey)


def _keys_document(
    document: str | bytes,
    load: Callable[[bytes], Key],
    public: Callable[[Key], X25519PublicKey],
    half: str,
) -> tuple[dict[str, Key], str]:
    """The keys of a document ``{"active": FP, "keys": {FP: base64}}``, each checked against
    its fingerprint, and the active one's fingerprint."""
    try:
        data = json.loads(document)
        keys = {fp: load(base64.b64decode(raw, validate=True)) for fp, raw in data["keys"].items()}
        active = str(data["active"])
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        raise SealingKeysError(
            f'{half} sealing keys must be JSON {{"active": FINGERPRINT, "keys": {{FINGERPRINT: '
            f"base64 of a 32-byte X25519 {half} key}}}}"
        ) from None
    for fp, key in keys.items():
        if fingerprint(public(key)) != fp:
            raise SealingKeysError(f"{half} sealing key {fp!r} does not match its fingerprint")
    return keys, active


class PublicSealingKeys:
    """What anyone may seal with: every public key the operator holds, and the active one."""

    def __init__(self, keys: dict[str, X25519PublicKey], active: str) -> None:
        if active not in keys:
            raise SealingKeysError(f"the active sealing key {active!r} is not among the keys")
        self.keys = keys
        self.active = active

    @classmethod
    def parse(cls, document: str | bytes) -> PublicSealingKeys:
        keys, active = _keys_document(
            document, X25519PublicKey.from_public_bytes, lambda key: key, "public"
        )
        return cls(keys, active)

    def dump(self) -> str:
        keys = {
            fp: base64.b64encode(key.public_bytes_raw()).decode() for fp, key in self.keys.items()
        }
        return json.dumps(
            {"algorithm": "HPKE DHKEM(X25519, HKDF-SHA256) HKDF-SHA256 AES-256-GCM",
             "active": self.active, "keys": keys},
            indent=2,
            sort_keys=True,
        ) + "\n"  # fmt: skip

    def seal(self, plaintext: bytes, scope: Scope) -> str:
        header = json.dumps(
            {"v": VERSION, "key": self.active, **scope.header_fields()},
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        payload = SUITE.encrypt(plaintext, self.keys[self.active], info=header)
        return f"{PREFIX}.{_b64url(header)}.{_b64url(payload)}"


class SealingKeys:
    """The operator's private sealing keys: the active one seals, every one kept opens."""

    def __init__(self, keys: dict[str, X25519PrivateKey], active: str) -> None:
        if active not in keys:
            raise SealingKeysError(f"the active sealing key {active!r} is not among the keys")
        self._keys = keys
        self.active = active

    @classmethod
    def generate(cls) -> SealingKeys:
        key = X25519PrivateKey.generate()
        fp = fingerprint(key.public_key())
        return cls({fp: key}, fp)

    @classmethod
    def parse(cls, document: str | bytes) -> SealingKeys:
        keys, active = _keys_document(
            document, X25519PrivateKey.from_private_bytes, lambda key: key.public_key(), "private"
        )
        return cls(keys, active)

    def dump(self) -> str:
        keys = {
            fp: base64.b64encode(key.private_bytes_raw()).decode() for fp, key in self._keys.items()
        }
        return json.dumps({"active": self.active, "keys": keys}, sort_keys=True)

    def rotated(self) -> SealingKeys:
        """A new active key; the old ones stay, to open what was sealed with them."""
        key = X25519PrivateKey.generate()
        fp = fingerprint(key.public_key())
        return SealingKeys({**self._keys, fp: key}, fp)

    def without(self, retired: str) -> SealingKeys:
        """Without key ``retired``: what was sealed with it opens no more."""
        if retired == self.active:
            raise SealingKeysError(f"sealing key {retired} is active: rotate first")
        if retired not in self._keys:
            raise SealingKeysError(f"there is no sealing key {retired}")
        return SealingKeys({fp: k for fp, k in self._keys.items() if fp != retired}, self.active)

    def public(self) -> PublicSealingKeys:
        return PublicSealingKeys(
            {fp: key.public_key() for fp, key in self._keys.items()}, self.active
        )

    @property
    def fingerprints(self) -> frozenset[str]:
        return frozenset(self._keys)

    def open(self, text: str, scope: Scope, field: str = FIELD) -> bytes:
        """The plaintext of ``text`` for the connection ``scope``; raises SealedValueProblem
        naming ``field``."""
        return self._open(SealedValue.parse(text, field), scope, field)

    def _open(self, sealed: SealedValue, scope: Scope, field: str = FIELD) -> bytes:
        key = self._keys.get(sealed.key)
        if key is None:
            raise SealedValueProblem(
                Reason.SEALED_KEY_UNKNOWN,
                f"{field} is sealed with key {sealed.key}, which this installation does not "
                f"hold (it holds {', '.join(sorted(self._keys))}): sealed for another cluster, "
                "or with a key that was lost; seal the value again with gatehouse seal",
            )
        if sealed.scope != scope:
            raise SealedValueProblem(
                Reason.SEALED_FOR_ANOTHER_CONNECTION,
                f"{field} is sealed for {sealed.scope}, and this connection is {scope}: a sealed "
                "value opens only for the connection, namespace and baseURL it was sealed for",
            )
        try:
            return SUITE.decrypt(sealed.payload, key, info=sealed.header)
        except (InvalidTag, ValueError):  # ValueError: an encapsulated key off the curve
            raise SealedValueProblem(
                Reason.SEALED_VALUE_CORRUPT,
                f"{field} does not open with key {sealed.key}: it was altered or cut",
            ) from None

    def reseal(self, text: str, scope: Scope, field: str = FIELD) -> str | None:
        """``text`` sealed again with the active key, or None when it already is."""
        sealed = SealedValue.parse(text, field)
        if sealed.key == self.active:
            return None
        return self.public().seal(self._open(sealed, scope, field), scope)


class Resealer:
    """Offers connections' values sealed in Git resealed with the active sealing key (their
    status's ``resealedSecret`` and ``resealedClientCertificate``), again only when the value or
    the active key changed: resealing makes a new ciphertext each time, so it is made once, not
    per reconcile."""

    def __init__(self) -> None:
        # Per connection uid, per use (Scope.use): its sealed value and the active key, and the
        # value resealed.
        self._resealed: dict[str, dict[str, tuple[tuple[str, str], str]]] = {}

    def resealed(
        self, connection_uid: str, keys: SealingKeys, text: str, scope: Scope, field: str = FIELD
    ) -> str:
        """``text`` sealed with the active sealing key; empty when it already is. Raises
        SealedValueProblem as SealingKeys.open does, naming ``field``."""
        inputs = (text, keys.active)
        uses = self._resealed.setdefault(connection_uid, {})
        cached = uses.get(scope.use)
        if cached is not None and cached[0] == inputs:
            return cached[1]
        value = keys.reseal(text, scope, field) or ""
        uses[scope.use] = (inputs, value)
        return value

    def forget(self, connection_uid: str) -> None:
        self._resealed.pop(connection_uid, None)


# The private keys' document: its key in the sealing keys' Secret, and its file beside a keyring
# file on a developer's machine (the dev stack).
SEALING_KEYS_FILE = "sealing-keys.json"


class SealingKeysSource(Protocol):
    def sealing_keys(self) -> SealingKeys | None:
        """The keys as they are now; None when the installation has none."""


class SealingKeysFile:
    """Sealing keys read from a file, read again when it changes. A file that goes bad keeps the
    keys in memory, as the keyring does; with no file at all there are none."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._keys: SealingKeys | None = None

    def sealing_keys(self) -> SealingKeys | None:
        if self.path is None:
            return None
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self._keys
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._keys = SealingKeys.parse(self.path.read_bytes())
            except SealingKeysError as error:
                log.error("%s: %s; keeping the sealing keys in memory", self.path, error)
        return self._keys
