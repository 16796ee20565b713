"""A viewer-assertion issuer on 127.0.0.1: what a BI service that signs people in would be to
Gatehouse, for the tests and the dev stack.

It holds an RSA key (kid ``rsa-1``) and an EC P-256 key (kid ``ec-1``) and serves:

- ``GET /jwks``: their public halves as a JSON Web Key Set (counted in ``/stats``), or, after
  ``POST /jwks/oversized``, a set larger than any proxy reads;
- ``POST /assertions`` with ``{"app", "sub", "email"?, "audience"?, "lifetime"?, "issuedAgo"?,
  "alg"?}``: ``{"assertion": JWT}``, signed RS256 (or ES256), issued now (less ``issuedAgo``
  seconds), living ``lifetime`` seconds (default 120), for the app's key in the
  ``gatehouse.dev/app`` claim;
- ``GET /stats``: ``{"jwksReads": N}``.

Its issuer (``iss``) is its own URL and its audience ``gatehouse`` unless ``--audience`` says.
:func:`sign` is the signing itself, for the unit tests' forged assertions too (``none``, HS256
with a chosen secret, a key of their own).

``python -m gatehouse_dev.viewer_issuer --port P``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

APP_CLAIM = "gatehouse.dev/app"
AUDIENCE = "gatehouse"
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _number(value: int, size: int = 0) -> str:
    return _b64(value.to_bytes(size or (value.bit_length() + 7) // 8, "big"))


def sign(
    claims: dict[str, Any],
    key: PrivateKey | bytes | None,
    kid: str = "",
    alg: str = "RS256",
    header: dict[str, Any] | None = None,
) -> str:
    """A compact JWS of ``claims``: RS256 or ES256 with a private key, HS256 with ``key`` as the
    shared secret (bytes), ``none`` without."""
    head = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {}), **(header or {})}
    signed = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(claims).encode())}".encode()
    if alg == "none":
        signature = b""
    elif isinstance(key, bytes):
        signature = hmac.new(key, signed, hashlib.sha256).digest()
    elif isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signed, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        raise ValueError(f"no key to sign {alg} with")
    return f"{signed.decode()}.{_b64(signature)}"


def jwk(key: PrivateKey, kid: str) -> dict[str, str]:
    """The public half of ``key`` as a JWK."""
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        return {
            "kty": "RSA",
            "kid": kid,
            "use": "sig",
            "n": _number(numbers.n),
            "e": _number(numbers.e),
        }
    point = public.public_numbers()
    return {
        "kty": "EC",
        "kid": kid,
        "use": "sig",
        "crv": "P-256",
        "x": _number(point.x, 32),
        "y": _number(point.y, 32),
    }


@dataclass
class ViewerIssuer:
    issuer: str
    audience: str = AUDIENCE
    rsa_key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    ec_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    jwks_reads: int = 0
    oversized: bool = False

    def jwks(self) -> dict[str, Any]:
        return {"keys": [jwk(self.rsa_key, "rsa-1"), jwk(self.ec_key, "ec-1")]}

    def claims(
        self,
        app: str,
        sub: str,
        email: str = "",
        *,
        audience: str = "",
        lifetime: float = 120,
        issued_ago: float = 0,
    ) -> dict[str, Any]:
        issued = int(time.time() - issued_ago)
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience or self.audience,
            "sub": sub,
            "iat": issued,
            "exp": int(issued + lifetime),
            APP_CLAIM: app,
        }
        if email:
            claims["email"] = email
        return claims

    def assertion(self, claims: dict[str, Any], alg: str = "RS256") -> str:
        if alg == "ES256":
            return sign(claims, self.ec_key, "ec-1", "ES256")
        return sign(claims, self.rsa_key, "rsa-1", "RS256")

    async def serve_jwks(self, request: web.Request) -> web.Response:
        self.jwks_reads += 1
        if self.oversized:
            padded = {**self.jwks(), "padding": "x" * (256 * 1024)}
            return web.json_response(padded)
        return web.json_response(self.jwks())

    async def make_oversized(self, request: web.Request) -> web.Response:
        self.oversized = True
        return web.json_response({"oversized": True})

    async def mint(self, request: web.Request) -> web.Response:
        asked = await request.json()
        claims = self.claims(
            asked["app"],
            asked["sub"],
            asked.get("email", ""),
            audience=asked.get("audience", ""),
            lifetime=float(asked.get("lifetime", 120)),
            issued_ago=float(asked.get("issuedAgo", 0)),
        )
        return web.json_response({"assertion": self.assertion(claims, asked.get("alg", "RS256"))})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"jwksReads": self.jwks_reads})


def create_app(issuer: ViewerIssuer) -> web.Application:
    app = web.Application(client_max_size=16 * 1024)
    app.router.add_get("/jwks", issuer.serve_jwks)
    app.router.add_post("/jwks/oversized", issuer.make_oversized)
    app.router.add_post("/assertions", issuer.mint)
    app.router.add_get("/stats", issuer.stats)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--audience", default=AUDIENCE)
    args = parser.parse_args()
    issuer = ViewerIssuer(f"http://127.0.0.1:{args.port}", args.audience)
    web.run_app(create_app(issuer), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
