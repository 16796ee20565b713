"""An OpenID Connect ID token, verified as the API server verifies one, and the user it names.

The signature (RS256 or ES256, by a key of the issuer's JWKS named by ``kid``; ``none`` and
shared-secret algorithms are refused), the issuer, the audience (the page's client id; ``azp``
when there are several), the expiry (with a minute's leeway for clocks), and the nonce the page
sent. The user is mapped as kube-apiserver's ``--oidc-username-claim``, ``--oidc-username-prefix``,
``--oidc-groups-claim`` and ``--oidc-groups-prefix`` map it, so the page impersonates the user
the API server would see with that token.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from gatehouse_operator.access.reviews import User
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.settings import OidcSettings

LEEWAY_SECONDS = 60
MAX_TOKEN_CHARS = 16 * 1024


class IdTokenRefused(GatehouseError):
    """Why an ID token is not accepted; the message names the claim, never the token."""


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int(text: str) -> int:
    return int.from_bytes(_unb64url(text), "big")


def _verify_signature(alg: str, key: dict[str, str], signed: bytes, signature: bytes) -> None:
    if alg == "RS256" and key.get("kty") == "RSA":
        public_rsa = rsa.RSAPublicNumbers(_int(key["e"]), _int(key["n"])).public_key()
        public_rsa.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    elif alg == "ES256" and key.get("kty") == "EC" and key.get("crv") == "P-256":
        if len(signature) != 64:
            raise InvalidSignature
        public_ec = ec.EllipticCurvePublicNumbers(
            _int(key["x"]), _int(key["y"]), ec.SECP256R1()
        ).public_key()
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        public_ec.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        raise IdTokenRefused(f"the ID token's algorithm {alg!r} is not RS256 or ES256")


def verified_claims(
    token: str, jwks: object, mapping: OidcSettings, nonce: str, now: float | None = None
) -> dict[str, object]:
    """The token's claims, once signature, issuer, audience, expiry and nonce hold."""
    parts = token.split(".")
    if len(token) > MAX_TOKEN_CHARS or len(parts) != 3:
        raise IdTokenRefused("the identity provider's answer holds no ID token")
    try:
        header = json.loads(_unb64url(parts[0]))
        claims = json.loads(_unb64url(parts[1]))
        signature = _unb64url(parts[2])
    except (ValueError, binascii.Error, RecursionError):
        raise IdTokenRefused("the ID token cannot be read") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise IdTokenRefused("the ID token cannot be read")
    published = jwks.get("keys") if isinstance(jwks, dict) else None
    keys = [
        {str(name): str(value) for name, value in key.items()}
        for key in (published if isinstance(published, list) else [])
        if isinstance(key, dict) and key.get("kid") == header.get("kid")
    ]
    if not keys:
        raise IdTokenRefused("the ID token is signed by a key the issuer does not publish")
    try:
        _verify_signature(
            str(header.get("alg")), keys[0], f"{parts[0]}.{parts[1]}".encode(), signature
        )
    except (InvalidSignature, KeyError, ValueError, binascii.Error):
        raise IdTokenRefused("the ID token's signature does not verify") from None
    _check_claims(claims, mapping, nonce, time.time() if now is None else now)
    return claims


def _check_claims(claims: dict[str, object], mapping: OidcSettings, nonce: str, now: float) -> None:
    if claims.get("iss") != mapping.issuer:
        raise IdTokenRefused("iss: the ID token is not the configured issuer's")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if mapping.client_id not in audiences:
        raise IdTokenRefused("aud: the ID token is not for this page's client id")
    if len(audiences) > 1 and claims.get("azp") != mapping.client_id:
        raise IdTokenRefused("azp: the ID token was issued to another client")
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or now > expires + LEEWAY_SECONDS:
        raise IdTokenRefused("exp: the ID token has expired")
    given = claims.get("nonce")
    if not isinstance(given, str) or not hmac.compare_digest(given, nonce):
        raise IdTokenRefused("nonce: the ID token is not the answer to this sign-in")


def user_of(claims: dict[str, object], mapping: OidcSettings) -> User:
    """The user the API server would see for these claims."""
    name = claims.get(mapping.username_claim)
    if not isinstance(name, str) or not name:
        raise IdTokenRefused(f"{mapping.username_claim}: the ID token names no user")
    # As the API server reads it: when present it must be true, a boolean (not "false").
    if mapping.username_claim == "email" and claims.get("email_verified", True) is not True:
        raise IdTokenRefused("email_verified: the ID token's email is not verified")
    prefix = mapping.username_prefix
    if prefix is None:
        prefix = "" if mapping.username_claim == "email" else f"{mapping.issuer}#"
    elif prefix == "-":
        prefix = ""
    groups: list[str] = []
    if mapping.groups_claim:
        found = claims.get(mapping.groups_claim, [])
        values = [found] if isinstance(found, str) else found
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise IdTokenRefused(f"{mapping.groups_claim}: not a string or a list of strings")
        groups = [f"{mapping.groups_prefix}{group}" for group in values]
    return User(name=f"{prefix}{name}", groups=(*groups, "system:authenticated"))
