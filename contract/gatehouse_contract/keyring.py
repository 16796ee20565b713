"""Encrypting credentials with the table keys, a shared AES-256-GCM keyring, from which the
table channel's keys are derived too.

The operator and the proxy share one keyring (a Kubernetes Secret, mounted into the proxy). The
operator encrypts every credential before it leaves its process; the proxy decrypts one only for the
request that needs it. Each encrypted value is bound to its connection (uid, origin and where the
credential goes) as associated data, so a credential cannot be replayed onto another host. The table
channel's TLS certificate and its signatures use keys derived from the keyring (see
gatehouse_contract.channel), so only the operator can publish a table.

Keyring file (JSON)::

    {"active": "2026-11", "keys": {"2026-11": "<base64 of 32 random bytes>", "2026-05": "..."}}

Rotation without downtime: add a key, let the proxies load it, make it active (the operator
re-encrypts everything with it), later drop the old one.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, ConfigDict

_NONCE_BYTES = 12


class KeyringError(ValueError):
    """The keyring is malformed or lacks a key; messages never include key material."""


class Encrypted(BaseModel):
    """A value encrypted with a keyring key (not a value sealed in Git: that is
    ``gatehouse_operator.keys.sealed_values``, HPKE, with the sealing keys)."""

    model_config = ConfigDict(frozen=True)

    key_id: str
    nonce: str
    ciphertext: str

    @functools.cached_property
    def raw(self) -> tuple[bytes, bytes]:
        """The nonce and the ciphertext as bytes, decoded once: a route's credential is decrypted
        for each of its requests."""
        return base64.b64decode(self.nonce), base64.b64decode(self.ciphertext)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Keyring:
    def __init__(self, keys: Mapping[str, bytes], active: str) -> None:
        if active not in keys:
            raise KeyringError(f"the active key {active!r} is not among the keys")
        for key_id, key in keys.items():
            if len(key) != 32:
                raise KeyringError(f"key {key_id!r} must be 32 bytes (AES-256), not {len(key)}")
        self._keys = dict(keys)
        self.active = active
        self._ciphers = {key_id: AESGCM(key) for key_id, key in self._keys.items()}

    @classmethod
    def parse(cls, document: str | bytes) -> Keyring:
        try:
            data = json.loads(document)
            keys = {
                key_id: base64.b64decode(value, validate=True)
                for key_id, value in data["keys"].items()
            }
            return cls(keys, data["active"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            if isinstance(error, KeyringError):
                raise
            raise KeyringError(
                'the keyring must be JSON {"active": ID, "keys": {ID: base64 of 32 bytes}}'
            ) from None

    @classmethod
    def generate(cls, key_id: str = "k1") -> Keyring:
        return cls({key_id: AESGCM.generate_key(bit_length=256)}, key_id)

    def dump(self) -> str:
        return json.dumps(
            {"active": self.active, "keys": {kid: _b64(key) for kid, key in self._keys.items()}}
        )

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def with_new_key(self, key_id: str) -> Keyring:
        """Rotation, step 1: a new key every reader learns before anything is encrypted with it."""
        if key_id in self._keys:
            raise KeyringError(f"key {key_id!r} is already in the keyring")
        return Keyring({**self._keys, key_id: AESGCM.generate_key(bit_length=256)}, self.active)

    def activated(self, key_id: str) -> Keyring:
        """Rotation, step 2: encrypt and sign with ``key_id`` from now on."""
        return Keyring(self._keys, key_id)

    def without(self, key_id: str) -> Keyring:
        """Rotation, step 3: drop a retired key once nothing encrypted with it remains."""
        if key_id == self.active:
            raise KeyringError(f"key {key_id!r} is active and cannot be dropped")
        return Keyring({kid: key for kid, key in self._keys.items() if kid != key_id}, self.active)

    def encrypt(self, plaintext: bytes, context: str) -> Encrypted:
        nonce = os.urandom(_NONCE_BYTES)
        ciphertext = AESGCM(self._keys[self.active]).encrypt(nonce, plaintext, context.encode())
        return Encrypted(key_id=self.active, nonce=_b64(nonce), ciphertext=_b64(ciphertext))

    def decrypt(self, encrypted: Encrypted, context: str) -> bytes:
        cipher = self._ciphers.get(encrypted.key_id)
        if cipher is None:
            raise KeyringError(f"no key {encrypted.key_id!r} in the keyring")
        try:
            nonce, ciphertext = encrypted.raw
            return cipher.decrypt(nonce, ciphertext, context.encode())
        except (InvalidTag, ValueError):
            raise KeyringError(
                "an encrypted value does not decrypt with its key and context"
            ) from None

    def encrypt_compact(self, purpose: bytes, plaintext: bytes, context: bytes) -> bytes:
        """``plaintext`` encrypted with the active key's key for ``purpose`` (AES-256-GCM),
        bound to ``context``, in one string of bytes: the key id's length and the key id, the
        nonce, the ciphertext. For values kept or sent whole (a grant in the shared store, a
        connect link in a URL), where Encrypted's JSON would be longer."""
        key_id = self.active.encode()
        nonce = os.urandom(_NONCE_BYTES)
        cipher = AESGCM(self.derived(self.active, purpose))
        return bytes([len(key_id)]) + key_id + nonce + cipher.encrypt(nonce, plaintext, context)

    def decrypt_compact(self, purpose: bytes, data: bytes, context: bytes) -> bytes:
        """What :meth:`encrypt_compact` encrypted; raises KeyringError for a key this keyring
        lacks, or data that is not that key's for ``purpose`` and ``context``."""
        cipher = AESGCM(self.derived(compact_key_id(data), purpose))
        start = 1 + data[0]
        try:
            return cipher.decrypt(
                data[start : start + _NONCE_BYTES], data[start + _NONCE_BYTES :], context
            )
        except (InvalidTag, ValueError):
            raise KeyringError(
                "an encrypted value does not decrypt with its key and context"
            ) from None

    def derived(self, key_id: str, purpose: bytes) -> bytes:
        """A key for one ``purpose`` (signing, the channel), derived from the keyring key."""
        key = self._keys.get(key_id)
        if key is None:
            raise KeyringError(f"no key {key_id!r} in the keyring")
        return hmac.new(key, purpose, hashlib.sha256).digest()


def compact_key_id(data: bytes) -> str:
    """The id of the key an :meth:`Keyring.encrypt_compact` value was encrypted with."""
    if not data:
        raise KeyringError("an encrypted value is empty")
    try:
        return data[1 : 1 + data[0]].decode()
    except UnicodeDecodeError:
        raise KeyringError("an encrypted value names no key") from None


class KeyringSource(Protocol):
    def current(self) -> Keyring:
        """The keyring as it is now. Raises KeyringError (or OSError) when it cannot be read."""


class KeyringFile:
    """A keyring read from a file (a mounted Secret), re-read when the file changes.

    With ``recheck_seconds``, whether it changed is asked at most that often (a file's status is
    a system call, too many for every request), unless ``current(fresh=True)`` insists.
    """

    def __init__(self, path: Path, recheck_seconds: float = 0.0) -> None:
        self.path = path
        self.recheck_seconds = recheck_seconds
        self._stamp: tuple[int, int] | None = None
        self._keyring: Keyring | None = None
        self._checked = 0.0

    def check(self) -> None:
        """Raises :class:`KeyringError` saying in one line why the keyring cannot be used."""
        try:
            self.current()
        except OSError as error:
            raise KeyringError(
                f"cannot read the keyring file {self.path}: {error.strerror or error}"
            ) from None

    def decrypt_compact(self, purpose: bytes, data: bytes, context: bytes) -> bytes:
        """As :meth:`Keyring.decrypt_compact`, the file read again for a key added since it was
        last looked at."""
        keyring = self.current()
        if compact_key_id(data) not in keyring.key_ids:
            keyring = self.current(fresh=True)
        return keyring.decrypt_compact(purpose, data, context)

    def current(self, *, fresh: bool = False) -> Keyring:
        now = time.monotonic()
        if self._keyring is not None and not fresh and now - self._checked < self.recheck_seconds:
            return self._keyring
        stat = self.path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._keyring is None or stamp != self._stamp:
            self._keyring = Keyring.parse(self.path.read_bytes())
            self._stamp = stamp
        self._checked = now
        return self._keyring
