"""AWS STS on 127.0.0.1 as a Pod's web identity meets it, and an API only its keys open.

``POST /`` with ``Action=AssumeRoleWithWebIdentity`` (the form AWS documents) verifies the
``WebIdentityToken`` as STS verifies one from an OIDC provider it trusts: an RS256 JWT signed with
a key of the provider's JWKS (the API server's own ``/openid/v1/jwks``, ``--jwks``), of the
trusted issuer, for the STS audience, not expired. It answers the role's temporary keys in
STS's XML, living ``DurationSeconds`` (or less: ``POST /lifetime`` ``{"seconds": N}`` makes them
short, for renewal tests), and counts each role's requests (``/stats``). A refused token is
STS's XML error (``InvalidIdentityToken``, ``ExpiredTokenException``).

EKS Pod Identity as its agent and STS meet it: ``GET /v1/credentials`` is the agent, answering
the Pod's own role's keys (JSON, as the agent does) to the token ``POST /pod-identity`` made (the
kubelet's, in EKS); ``Action=AssumeRole`` is STS verifying the request's SigV4 signature with
those keys (:mod:`gatehouse_dev.sigv4_verifier`), and refusing more than an hour as AWS refuses
it for role chaining. ``/stats`` counts the agent's answers too.

``/api/...`` is a service that verifies AWS Signature Version 4 (:mod:`gatehouse_dev.
sigv4_verifier`, written apart from the proxy's signer) with the keys it issued, found by the
access key id in the request's credential scope; keys past their expiration are refused as AWS
refuses them (``ExpiredToken``).

``python -m gatehouse_dev.aws_sts --port P --jwks JWKS.json --issuer ISS``.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gatehouse_dev.sigv4_verifier import Account, Received, verify

AUDIENCE = "sts.amazonaws.com"
REGION = "us-east-1"
SERVICE = "execute-api"
_ROLE_ARN = re.compile(r"arn:aws:iam::\d{12}:role/[\w+=,.@/-]{1,64}")
_CREDENTIAL = re.compile(r"Credential=([A-Z0-9]+)/")
# STS's grammar for a RoleSessionName.
_SESSION_NAME = re.compile(r"[\w+=,.@-]{2,64}", re.ASCII)


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _error(status: int, code: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        content_type="text/xml",
        text=f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
        f"<Message>{message}</Message></Error><RequestId>{secrets.token_hex(8)}</RequestId>"
        "</ErrorResponse>",
    )


class Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Issued:
    keys: Account
    role_arn: str
    expires: float


def _public_keys(jwks: dict[str, Any]) -> dict[str, rsa.RSAPublicKey]:
    """The RSA keys of a JWKS, by their key id."""
    return {
        str(key.get("kid", "")): rsa.RSAPublicNumbers(
            int.from_bytes(_b64url(key["e"]), "big"), int.from_bytes(_b64url(key["n"]), "big")
        ).public_key()
        for key in jwks["keys"]
        if key.get("kty") == "RSA"
    }


# AWS's limit for role chaining (a role's keys asked with another role's).
CHAINED_MAX_SECONDS = 3600


class Sts:
    def __init__(self, keys: dict[str, rsa.RSAPublicKey], issuer: str) -> None:
        self.keys = keys
        self.issuer = issuer
        self.lifetime = 0.0  # 0: as asked
        self.requests: Counter[str] = Counter()  # per role ARN, refused ones too
        self.issued: dict[str, Issued] = {}
        self.answers: Counter[str] = Counter()  # the API's, by AWS's code ("OK" verified)
        self.pod_token = ""  # the agent's token: "" until made
        self.pod_keys: dict[str, Account] = {}  # the keys the agent answered, by their id
        self.agent: Counter[str] = Counter()  # the agent's answers ("OK" or the refusal)

    def verified(self, token: str) -> dict[str, Any]:
        """The web identity token's claims, as STS checks an OIDC provider's token."""
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(_b64url(header_b64))
            claims: dict[str, Any] = json.loads(_b64url(payload_b64))
            key = self.keys.get(str(header.get("kid", "")))
            if header.get("alg") != "RS256" or key is None:
                raise ValueError("alg or kid")
            key.verify(
                _b64url(signature_b64),
                f"{header_b64}.{payload_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature):
            raise Refused("InvalidIdentityToken", "The web identity token is not valid") from None
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if claims.get("iss") != self.issuer or AUDIENCE not in audiences:
            raise Refused("InvalidIdentityToken", "Incorrect token audience or issuer")
        if not time.time() < claims.get("exp", 0):
            raise Refused("ExpiredTokenException", "Token is expired")
        return claims

    def signed_by_the_pod(self, request: web.Request, body: bytes) -> None:
        """AssumeRole's SigV4 signature, verified with keys the agent answered."""
        found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
        pod = self.pod_keys.get(found.group(1)) if found else None
        if pod is None:
            raise Refused("InvalidClientTokenId", "The security token included is invalid")
        received = Received(request.method, request.raw_path, list(request.headers.items()), body)
        verdict = verify(received, pod, datetime.now(UTC))
        if not verdict.verified:
            raise Refused(verdict.code, verdict.message)

    async def assume(self, request: web.Request) -> web.Response:
        body = await request.read()
        form = {name: str(value) for name, value in (await request.post()).items()}
        role = form.get("RoleArn", "")
        self.requests[role] += 1
        action = form.get("Action")
        if action not in ("AssumeRoleWithWebIdentity", "AssumeRole") or form.get("Version") != (
            "2011-06-15"
        ):
            return _error(400, "InvalidAction", "Could not find operation")
        if not _ROLE_ARN.fullmatch(role) or not _SESSION_NAME.fullmatch(
            form.get("RoleSessionName", "")
        ):
            return _error(400, "ValidationError", "RoleArn or RoleSessionName is not valid")
        asked = int(form.get("DurationSeconds", "3600"))
        try:
            if action == "AssumeRole":
                self.signed_by_the_pod(request, body)
                if asked > CHAINED_MAX_SECONDS:
                    return _error(
                        400,
                        "ValidationError",
                        "The requested DurationSeconds exceeds the 1 hour session limit for "
                        "roles assumed by role chaining.",
                    )
                claims: dict[str, Any] = {}
            else:
                claims = self.verified(form.get("WebIdentityToken", ""))
        except Refused as refused:
            return _error(403 if action == "AssumeRole" else 400, refused.code, str(refused))
        lifetime = min(asked, self.lifetime) if self.lifetime else asked
        expires = time.time() + lifetime
        keys = Account(
            "ASIA" + secrets.token_hex(8).upper(),
            secrets.token_urlsafe(30),
            REGION,
            SERVICE,
            session_token="IQoJb3JpZ2luX2VjE" + secrets.token_urlsafe(200),
        )
        self.issued[keys.access_key_id] = Issued(keys, role, expires)
        expiration = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return web.Response(
            content_type="text/xml",
            text=f"""<{action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <{action}Result>
    <SubjectFromWebIdentityToken>{claims.get("sub", "")}</SubjectFromWebIdentityToken>
    <Credentials>
      <AccessKeyId>{keys.access_key_id}</AccessKeyId>
      <SecretAccessKey>{keys.secret_access_key}</SecretAccessKey>
      <SessionToken>{keys.session_token}</SessionToken>
      <Expiration>{expiration}</Expiration>
    </Credentials>
    <AssumedRoleUser><Arn>{role}/{form["RoleSessionName"]}</Arn></AssumedRoleUser>
  </{action}Result>
</{action}Response>""",
        )

    async def api(self, request: web.Request) -> web.Response:
        body = await request.read()
        found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
        issued = self.issued.get(found.group(1)) if found else None
        if issued is None:
            self.answers["InvalidClientTokenId"] += 1
            return web.json_response(
                {"__type": "InvalidClientTokenId", "message": "The security token is invalid"},
                status=403,
            )
        if time.time() >= issued.expires:
            self.answers["ExpiredToken"] += 1
            return web.json_response(
                {"__type": "ExpiredToken", "message": "The security token has expired"},
                status=403,
            )
        received = Received(request.method, request.raw_path, list(request.headers.items()), body)
        verdict = verify(received, issued.keys, datetime.now(UTC))
        self.answers[verdict.code or "OK"] += 1
        if not verdict.verified:
            return web.json_response(
                {"__type": verdict.code, "message": verdict.message}, status=verdict.status
            )
        return web.json_response({"verified": True, "role": issued.role_arn})

    async def make_pod_token(self, request: web.Request) -> web.Response:
        """A new token for the agent (the kubelet's, in EKS): the one before no longer opens."""
        self.pod_token = secrets.token_urlsafe(32)
        return web.json_response({"token": self.pod_token})

    async def pod_identity(self, request: web.Request) -> web.Response:
        """The agent: the Pod's role's keys, for an hour, to its token alone."""
        if not self.pod_token or request.headers.get("Authorization") != self.pod_token:
            self.agent["refused"] += 1
            return web.json_response({"message": "Service account token is not valid"}, status=400)
        self.agent["OK"] += 1
        keys = Account(
            "ASIA" + secrets.token_hex(8).upper(),
            secrets.token_urlsafe(30),
            REGION,
            "sts",
            session_token="IQoJb3JpZ2luX2VjEPOD" + secrets.token_urlsafe(200),
        )
        self.pod_keys[keys.access_key_id] = keys
        expires = datetime.fromtimestamp(time.time() + 3600, UTC)
        return web.json_response(
            {
                "AccessKeyId": keys.access_key_id,
                "SecretAccessKey": keys.secret_access_key,
                "Token": keys.session_token,
                "AccountId": "111122223333",
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )

    async def set_lifetime(self, request: web.Request) -> web.Response:
        self.lifetime = float((await request.json())["seconds"])
        return web.json_response({"lifetime": self.lifetime})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": dict(self.requests),
                "api": dict(self.answers),
                "agent": dict(self.agent),
            }
        )


def create_app(sts: Sts) -> web.Application:
    app = web.Application()
    app.router.add_post("/", sts.assume)
    app.router.add_post("/lifetime", sts.set_lifetime)
    app.router.add_get("/stats", sts.stats)
    app.router.add_post("/pod-identity", sts.make_pod_token)
    app.router.add_get("/v1/credentials", sts.pod_identity)
    app.router.add_route("*", "/api/{tail:.*}", sts.api)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jwks", type=Path, required=True)
    parser.add_argument("--issuer", required=True)
    args = parser.parse_args()
    keys = _public_keys(json.loads(args.jwks.read_text()))
    web.run_app(create_app(Sts(keys, args.issuer)), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
