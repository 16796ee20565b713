"""An issuer's public keys, read from a JSON Web Key Set (RFC 7517) within bounds.

Only signing keys of the kinds the assertions' algorithms use are kept: RSA of 2,048 to 8,192 bits
(a larger one would make each verification slow enough to stall the event loop) and EC on P-256
or P-384 (a point off its curve is refused by ``cryptography``). Keys of any other kind, or for
encryption, are skipped as a JWKS may list them; a set holding none that is usable, or more than
:data:`MAX_KEYS`, or that is not JSON, is refused with a message saying which.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gatehouse_proxy.errors import ProxyException

MAX_KEYS = 32
MAX_JWKS_BYTES = 64 * 1024
_RSA_BITS = (2048, 8192)
_CURVES: dict[str, ec.EllipticCurve] = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1()}
MAX_KID_CHARS = 256

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


class KeysUnreadable(ProxyException):
    """A key set that cannot be used; the message says why (never a key's bytes). It ends in
    ``issuer_keys``, which answers viewer_keys_unavailable while no keys are held."""


@dataclass(frozen=True, slots=True)
class Key:
    kid: str  # "" when the set names none
    alg: str  # the algorithm the set restricts it to; "" for any of its kind
    key: PublicKey


def b64url(text: object) -> bytes:
    """Base64url without padding (RFC 7515 2), refusing any other character."""
    if not isinstance(text, str) or not text.isascii():
        raise ValueError("not base64url")
    try:
        return base64.b64decode(
            text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4), validate=True
        )
    except binascii.Error:
        raise ValueError("not base64url") from None


def _number(jwk: Mapping[str, object], member: str) -> int:
    return int.from_bytes(b64url(jwk[member]), "big")


def _public_key(jwk: Mapping[str, object]) -> PublicKey | None:
    """The key a JWK holds, or None for a kind assertions are not signed with."""
    if jwk.get("kty") == "RSA":
        key = rsa.RSAPublicNumbers(_number(jwk, "e"), _number(jwk, "n")).public_key()
        if not _RSA_BITS[0] <= key.key_size <= _RSA_BITS[1]:
            raise ValueError(f"an RSA key of {key.key_size} bits (2048 to 8192 are used)")
        return key
    if jwk.get("kty") == "EC":
        crv = jwk.get("crv")
        curve = _CURVES.get(crv) if isinstance(crv, str) else None
        if curve is None:
            return None
        numbers = ec.EllipticCurvePublicNumbers(_number(jwk, "x"), _number(jwk, "y"), curve)
        return numbers.public_key()  # ValueError for a point off the curve
    return None


def parse_jwks(body: bytes) -> tuple[Key, ...]:
    """The usable signing keys of a JWKS document."""
    if len(body) > MAX_JWKS_BYTES:
        raise KeysUnreadable(f"the key set is over {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise KeysUnreadable("the key set is not JSON") from None
    listed = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        raise KeysUnreadable('the key set has no "keys" list')
    if len(listed) > MAX_KEYS:
        raise KeysUnreadable(f"the key set lists more than {MAX_KEYS} keys")
    keys = []
    for index, jwk in enumerate(listed):
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        kid, alg = jwk.get("kid", ""), jwk.get("alg", "")
        if not isinstance(kid, str) or len(kid) > MAX_KID_CHARS or not isinstance(alg, str):
            raise KeysUnreadable(f"key {index} has a kid or alg that is not a short string")
        try:
            key = _public_key(jwk)
        except (KeyError, ValueError, TypeError) as error:
            problem = f"key {index} ({kid or 'no kid'}) is not usable: {error}"
            raise KeysUnreadable(problem) from None
        if key is not None:
            keys.append(Key(kid, alg, key))
    if not keys:
        raise KeysUnreadable("the key set holds no RSA or EC (P-256, P-384) signing key")
    return tuple(keys)
