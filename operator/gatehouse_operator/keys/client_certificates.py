"""A connection's client certificate and CA bundle (``spec.tls``), checked as the proxies will use
them, or a clear reason why not.

The certificate chain and key come from a ``kubernetes.io/tls`` Secret (``tls.crt``, ``tls.key``)
or a sealed value (the PEM chain followed by the key). What passes is re-encoded (the chain's
certificates, then the key in PKCS #8) so the proxies load exactly what was checked. Messages name
the Secret, the key or the field and the rule, never key material: they end up in conditions,
Events and logs.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes

from gatehouse_contract.google_keys import MAX_RSA_BITS
from gatehouse_contract.routes import MAX_CA_BUNDLE_CHARS
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.keys.credentials import CredentialProblem
from gatehouse_operator.status import Verdict

# The Secret type and keys a client certificate is read from (what cert-manager writes).
TLS_SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 (a Secret's type)
CERTIFICATE_KEY = "tls.crt"
PRIVATE_KEY_KEY = "tls.key"
# A leaf, its intermediates and perhaps a root: real chains have two to four.
MAX_CHAIN_CERTIFICATES = 8
# A chain of RSA-4096 certificates is about 2 KiB each; a key at most about 3.3 KiB.
MAX_CHAIN_BYTES = 32 * 1024
MAX_KEY_BYTES = 8 * 1024
MIN_RSA_BITS = 2048
CURVES = (ec.SECP256R1, ec.SECP384R1)
# As cert-manager renews by default: with a third of its lifetime left.
RENEW_FRACTION = 3
# A subject or issuer as messages and the status name it (ClientCertificateSummary's bound):
# whoever writes the certificate chooses its names, up to the chain's 32 KiB, which RFC 4514's
# escapes may double, and a condition's message takes at most 32 KiB.
MAX_NAME_CHARS = 1024

_KEY_BLOCK = re.compile(
    rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----\s*", re.S
)
_PROBE = b"gatehouse client certificate check"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True)
class CheckedCertificate:
    """A client certificate that passed: what the proxies get (``pem``: the chain, then the key),
    and what the page and the conditions may say of it (never the key)."""

    pem: bytes
    subject: str
    issuer: str
    not_before: datetime.datetime
    not_after: datetime.datetime

    def current(self, where: str, now: datetime.datetime) -> None:
        """Raises CredentialProblem unless the certificate is valid at ``now``: judged again at
        every reconcile, since it moves with the clock and not with the Secret."""
        if self.not_after <= now:
            raise CredentialProblem(
                Reason.CLIENT_CERTIFICATE_EXPIRED,
                f"the client certificate of {where} ({self.subject}) expired at "
                f"{self.not_after:%Y-%m-%dT%H:%M:%SZ}: renew it",
            )
        if self.not_before > now:
            raise CredentialProblem(
                Reason.INVALID_CLIENT_CERTIFICATE,
                f"the client certificate of {where} ({self.subject}) is not valid before "
                f"{self.not_before:%Y-%m-%dT%H:%M:%SZ}",
            )

    def expiry_verdict(self, now: datetime.datetime) -> Verdict:
        """The advisory ClientCertificateCurrent: False once a third of its lifetime is left
        (when cert-manager would renew it), with an Event saying so."""
        left = self.not_after - now
        lifetime = self.not_after - self.not_before
        expires = f"{self.not_after:%Y-%m-%dT%H:%M:%SZ}"
        if left * RENEW_FRACTION < lifetime:
            return Verdict(
                ConditionType.CLIENT_CERTIFICATE_CURRENT,
                "False",
                Reason.CLIENT_CERTIFICATE_EXPIRING,
                f"the client certificate ({self.subject}) expires at {expires}, in "
                f"{_duration(left)}: renew it (update its Secret, or seal the new one); the "
                "proxies present the new one at once",
            )
        return Verdict(
            ConditionType.CLIENT_CERTIFICATE_CURRENT,
            "True",
            Reason.CLIENT_CERTIFICATE_CURRENT,
            f"the client certificate ({self.subject}) expires at {expires}",
        )


def _duration(left: datetime.timedelta) -> str:
    if left.days >= 1:
        return f"{left.days} day{'s' if left.days != 1 else ''}"
    hours = max(1, int(left.total_seconds() // 3600))
    return f"{hours} hour{'s' if hours != 1 else ''}"


def split_sealed(plain: bytes, where: str) -> tuple[bytes, bytes]:
    """A sealed value's chain and key: every PEM block but the one private key, and that key."""
    keys = list(_KEY_BLOCK.finditer(plain))
    if len(keys) != 1:
        raise CredentialProblem(
            Reason.INVALID_CLIENT_KEY,
            f"{where} must hold the certificate chain and one PEM private key; it holds "
            f"{len(keys)} private keys",
        )
    found = keys[0]
    return plain[: found.start()] + plain[found.end() :], found.group(0)


def certificates_in(pem: bytes, where: str, limit: int, reason: Reason) -> list[x509.Certificate]:
    """The PEM certificates of ``pem`` (at least one, at most ``limit``)."""
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise CredentialProblem(
            reason, f"{where} is not PEM certificates (-----BEGIN CERTIFICATE-----)"
        ) from None
    if len(certificates) > limit:
        raise CredentialProblem(
            reason, f"{where} holds {len(certificates)} certificates; at most {limit} are allowed"
        )
    return certificates


def _private_key(pem: bytes, where: str) -> PrivateKey:
    if len(pem) > MAX_KEY_BYTES:
        raise CredentialProblem(
            Reason.INVALID_CLIENT_KEY,
            f"{where} is {len(pem):,} bytes; a private key may have at most {MAX_KEY_BYTES:,}",
        )
    try:
        # The consistency check OpenSSL would make costs seconds for large RSA keys: the size
        # is bounded first, and the signature below proves the key.
        key = serialization.load_pem_private_key(pem, None, unsafe_skip_rsa_key_validation=True)
    except TypeError:
        raise CredentialProblem(
            Reason.INVALID_CLIENT_KEY,
            f"{where} is encrypted with a passphrase: give it unencrypted (the Secret or the "
            "sealed value is its protection)",
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise CredentialProblem(
            Reason.INVALID_CLIENT_KEY, f"{where} is not a PEM private key (-----BEGIN ...-----)"
        ) from None
    if isinstance(key, rsa.RSAPrivateKey):
        if not MIN_RSA_BITS <= key.key_size <= MAX_RSA_BITS:
            raise CredentialProblem(
                Reason.INVALID_CLIENT_KEY,
                f"{where} is a {key.key_size:,}-bit RSA key; {MIN_RSA_BITS:,} to "
                f"{MAX_RSA_BITS:,} bits are allowed",
            )
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if not isinstance(key.curve, CURVES):
            raise CredentialProblem(
                Reason.INVALID_CLIENT_KEY,
                f"{where} is an EC key on {key.curve.name}; P-256 and P-384 are allowed",
            )
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    raise CredentialProblem(
        Reason.INVALID_CLIENT_KEY,
        f"{where} is a {type(key).__name__.removeprefix('_')}; RSA, EC (P-256, P-384) and "
        "Ed25519 keys are allowed",
    )


def _matches(key: PrivateKey, public: CertificatePublicKeyTypes) -> bool:
    """Whether ``key`` signs what the leaf's public key verifies (which also proves an RSA key
    loaded without OpenSSL's check is consistent)."""
    try:
        if isinstance(key, rsa.RSAPrivateKey) and isinstance(public, rsa.RSAPublicKey):
            signature = key.sign(_PROBE, padding.PKCS1v15(), hashes.SHA256())
            public.verify(signature, _PROBE, padding.PKCS1v15(), hashes.SHA256())
        elif isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(
            public, ec.EllipticCurvePublicKey
        ):
            signature = key.sign(_PROBE, ec.ECDSA(hashes.SHA256()))
            public.verify(signature, _PROBE, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, ed25519.Ed25519PrivateKey) and isinstance(
            public, ed25519.Ed25519PublicKey
        ):
            public.verify(key.sign(_PROBE), _PROBE)
        else:
            return False
    except (InvalidSignature, ValueError):
        return False
    return True


def check_client_certificate(
    chain_pem: bytes, key_pem: bytes, where: str, key_where: str, now: datetime.datetime
) -> CheckedCertificate:
    """The chain and key, checked as a TLS client will present them, current at ``now``; raises
    CredentialProblem naming ``where`` (the chain's source) or ``key_where`` (the key's) and the
    rule."""
    checked = checked_pair(chain_pem, key_pem, where, key_where)
    checked.current(where, now)
    return checked


def checked_pair(
    chain_pem: bytes, key_pem: bytes, where: str, key_where: str
) -> CheckedCertificate:
    """The chain and key checked as check_client_certificate does, but not against the clock:
    what an unchanged pair need not go through again (a signature, for RSA up to milliseconds)."""
    if len(chain_pem) > MAX_CHAIN_BYTES:
        raise CredentialProblem(
            Reason.INVALID_CLIENT_CERTIFICATE,
            f"{where} is {len(chain_pem):,} bytes; a certificate chain may have at most "
            f"{MAX_CHAIN_BYTES:,}",
        )
    chain = certificates_in(
        chain_pem, where, MAX_CHAIN_CERTIFICATES, Reason.INVALID_CLIENT_CERTIFICATE
    )
    leaf = chain[0]
    key = _private_key(key_pem, key_where)
    try:
        # Read only when asked for, so checked here: a key of an unknown algorithm, or a name
        # that is not well-formed, is refused, not raised.
        public = leaf.public_key()
        subject, issuer = _named(leaf.subject) or "no subject", _named(leaf.issuer)
    except (ValueError, UnsupportedAlgorithm):
        raise CredentialProblem(
            Reason.INVALID_CLIENT_CERTIFICATE,
            f"the first certificate of {where} cannot be read: its public key is of an unknown "
            "algorithm, or its subject or issuer is not well-formed",
        ) from None
    if not _matches(key, public):
        raise CredentialProblem(
            Reason.CLIENT_KEY_MISMATCH,
            f"{key_where} is not the private key of the first certificate of {where} (the "
            "certificate presented): the first certificate must be the client's own, its "
            "chain after it",
        )
    pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    pem += key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return CheckedCertificate(
        pem,
        subject,
        issuer,
        leaf.not_valid_before_utc,
        leaf.not_valid_after_utc,
    )


def _named(name: x509.Name) -> str:
    """``name`` in RFC 4514, cut to MAX_NAME_CHARS (an ellipsis saying so)."""
    text = name.rfc4514_string()
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def check_ca_bundle(pem: bytes, where: str) -> tuple[str, int]:
    """The CA bundle re-encoded (its certificates alone, no text between them) and how many it
    holds; raises CredentialProblem naming ``where``."""
    if len(pem) > MAX_CA_BUNDLE_CHARS:
        raise CredentialProblem(
            Reason.INVALID_CA_BUNDLE,
            f"{where} is {len(pem):,} bytes; a CA bundle may have at most {MAX_CA_BUNDLE_CHARS:,}",
        )
    certificates = certificates_in(pem, where, MAX_CA_BUNDLE_CHARS, Reason.INVALID_CA_BUNDLE)
    bundle = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates).decode()
    if len(bundle) > MAX_CA_BUNDLE_CHARS:  # base64 lines re-wrapped may grow a little
        raise CredentialProblem(
            Reason.INVALID_CA_BUNDLE,
            f"{where} re-encoded is over {MAX_CA_BUNDLE_CHARS:,} characters: fewer CAs",
        )
    return bundle, len(certificates)
