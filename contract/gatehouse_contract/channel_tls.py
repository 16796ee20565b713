"""TLS for the table channel, with certificates derived from the keyring.

Each keyring key determines an Ed25519 key pair and a self-signed certificate (fixed serial,
names and validity; Ed25519 signatures are deterministic), so the operator and every replica
compute the very same certificate from the Secret they already share. The operator serves the
active key's certificate; a replica trusts the certificates of all keys it holds, which makes
rotation seamless (add a key, activate it, drop the old one) and needs no CA, no issuer and
nothing else to install or renew. Nobody without the keyring can impersonate the operator.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import ssl
import tempfile
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from gatehouse_contract.keyring import Keyring

_NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gatehouse table channel")])
_NOT_BEFORE = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
_NOT_AFTER = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)


def _serial(public: ed25519.Ed25519PublicKey) -> int:
    """A positive serial of at most 127 bits (RFC 5280 allows 20 bytes), the same at both ends.
    From the public key, which the certificate shows anyway: anyone who completes a handshake
    sees the serial, so it must tell nothing of the private seed."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return int.from_bytes(hashlib.sha256(raw).digest()[:16]) >> 1 or 1


@lru_cache(maxsize=16)
def _certificate(seed: bytes) -> tuple[bytes, bytes]:
    key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_NAME)
        .issuer_name(_NAME)
        .public_key(public)
        .serial_number(_serial(public))
        .not_valid_before(_NOT_BEFORE)
        .not_valid_after(_NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, None)
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def certificate_pem(keyring: Keyring, key_id: str) -> bytes:
    return _certificate(keyring.derived(key_id, b"gatehouse/channel-tls"))[0]


def client_context(keyring: Keyring) -> ssl.SSLContext:
    """What a replica connects with: only the keyring's certificates are trusted."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    # The certificate is pinned (it is one of the keyring's), so the name the replica dials
    # (a Service, an address) needs no checking.
    context.check_hostname = False
    context.load_verify_locations(
        cadata="".join(certificate_pem(keyring, key_id).decode() for key_id in keyring.key_ids)
    )
    return context


class ServerContext:
    """The operator's TLS context, switched to the new active key's certificate on rotation."""

    def __init__(self, keyring: Keyring) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_3
        self.key_id = ""
        self.use(keyring)

    def use(self, keyring: Keyring) -> None:
        """Serves the active key's certificate to every handshake from now on."""
        if keyring.active == self.key_id:
            return
        seed = keyring.derived(keyring.active, b"gatehouse/channel-tls")
        certificate, key = _certificate(seed)
        # The ssl module loads certificates only from files: one readable by this process alone,
        # removed at once.
        handle, path = tempfile.mkstemp(prefix="gatehouse-channel-", suffix=".pem")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(certificate + key)
            self.context.load_cert_chain(path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.key_id = keyring.active
