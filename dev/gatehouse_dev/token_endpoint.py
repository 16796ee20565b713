"""A real OAuth 2.0 authorization server on 127.0.0.1, and an API that only its tokens open.

Three grants:

- JWT bearer, as Google's works: each assertion's RS256 signature is verified with the service
  account's public key and its claims (issuer, audience, scope, expiry) checked;
- client credentials (RFC 6749 4.4): clients are registered at run time (``POST /clients`` with
  id, secret, the one authentication method each accepts, ``basic`` or ``body``, the lifetime
  of its tokens, and ``revokeOnMint``: each new token revokes the client's others, as some
  providers do), and a request authenticated any other way is ``invalid_client``;
- authorization code with PKCE and rotating refresh tokens (:mod:`gatehouse_dev.
  authorization_code`: ``/authorize``, scripted or clicked consent, reuse detection): a client
  registered with ``redirectUris``, and optionally ``refreshReuseSeconds`` (the reuse interval)
  and ``refreshDelaySeconds`` (a slow refresh answer).

``/stats`` counts token requests (per client too), the API's answers, and the grants' refreshes,
reuses and revocations; ``POST /revoke`` revokes a client's tokens (JSON ``{"client": ID}``), as
providers that revoke on demand do, or a grant (a form, RFC 7009); ``/tokeninfo`` tells whether a
token is live. ``/api/...`` is the protected API: a live bearer token gets an echo (with the user
of a grant's token), anything else a 401; and
``/api/refused/...`` an endpoint no token opens (outside every scope): a 401 whatever is sent.
``/hostile/...`` are token endpoints that misbehave: a redirect, 10 MiB, an answer that trickles
past any deadline, a chosen ``expires_in``, a grant's scope of a chosen size (``scope=N``), an
error that echoes the client secret (in its description; with ``echo-in-error=FORM``, in its code
too), and tokens of a chosen size that live a day (``size=N``: what one tenant would fill the
fleet's store with).

``python -m gatehouse_dev.token_endpoint --port P [--public-key KEY.pem --client-email E]``; the
node tests run this module and ``authorization_code`` in a Pod, as a package of their own
(``--host 0.0.0.0``, tests/node/pods.py), with the proxy image's aiohttp: neither may import
another of gatehouse_dev's modules.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gatehouse_dev.authorization_code import AuthorizationCodes
from gatehouse_dev.authorization_code import oauth_error as _oauth_error

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass
class Client:
    secret: str
    method: str  # "basic" or "body": the one way this client may authenticate
    lifetime: float  # seconds; under one for the grants' expiry cycles
    requests: int = 0
    revoked_at: float = 0.0
    revoke_on_mint: bool = False
    redirect_uris: tuple[str, ...] = ()
    refresh_reuse_seconds: float = 0.0
    refresh_delay_seconds: float = 0.0


class TokenEndpoint:
    def __init__(
        self,
        public_key: rsa.RSAPublicKey | None,
        client_email: str,
        audience: str,
        lifetime: int,
    ) -> None:
        self.public_key = public_key
        self.client_email = client_email
        self.audience = audience
        self.lifetime = lifetime
        self.exchanges = 0
        self.token_requests = 0  # every request to /token, refused ones too
        self.clients: dict[str, Client] = {}
        self.issued: dict[str, dict[str, Any]] = {}
        self.api_calls = 0
        self.api_refusals = 0
        self.codes = AuthorizationCodes(self._issue_for_grant, self._revoke_grant_tokens)

    def verify(self, assertion: str) -> dict[str, Any]:
        if self.public_key is None:
            raise _oauth_error(400, "unsupported_grant_type", "no service account is configured")
        try:
            header_b64, payload_b64, signature_b64 = assertion.split(".")
            header = json.loads(_b64url(header_b64))
            claims: dict[str, Any] = json.loads(_b64url(payload_b64))
            if header.get("alg") != "RS256":
                raise ValueError("alg must be RS256")
            self.public_key.verify(
                _b64url(signature_b64),
                f"{header_b64}.{payload_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature) as error:
            raise _oauth_error(400, "invalid_grant", str(error)) from None
        now = time.time()
        problems = [
            claims.get("iss") != self.client_email and "iss",
            claims.get("aud") != self.audience and "aud",
            not claims.get("scope") and "scope",
            not (claims.get("iat", 0) - 60 <= now < claims.get("exp", 0)) and "exp",
        ]
        if any(problems):
            raise _oauth_error(400, "invalid_grant", str(problems))
        return claims

    def _issue(self, scope: str, lifetime: float, client: str) -> web.Response:
        value = self._issue_for_grant("", client, "", scope, lifetime)
        return web.json_response(
            {"access_token": value, "expires_in": lifetime, "token_type": "Bearer"}
        )

    def _issue_for_grant(
        self, grant: str, client: str, user: str, scope: str, lifetime: float
    ) -> str:
        value = "ya29.test-" + secrets.token_urlsafe(24)
        self.issued[value] = {
            "scope": scope,
            "client": client,
            "issued": time.time(),
            "exp": time.time() + lifetime,
        }
        if grant:
            self.issued[value] |= {"grant": grant, "user": user}
        return value

    def _revoke_grant_tokens(self, grant: str) -> int:
        revoked = [token for token, info in self.issued.items() if info.get("grant") == grant]
        for token in revoked:
            del self.issued[token]
        return len(revoked)

    def _client(self, request: web.Request, form: Mapping[str, Any]) -> tuple[str, Client]:
        """The authenticated client, by the one method it is registered for."""
        client_id, secret, method = _credentials(request, form)
        client = self.clients.get(client_id)
        if client is None or not hmac.compare_digest(client.secret, secret):
            raise _oauth_error(401, "invalid_client", "unknown client or wrong secret")
        if client.method != method:
            raise _oauth_error(
                401, "invalid_client", f"this client authenticates with {client.method}"
            )
        return client_id, client

    async def token(self, request: web.Request) -> web.Response:
        self.token_requests += 1
        form = await request.post()
        grant = form.get("grant_type")
        if grant == JWT_BEARER:
            claims = self.verify(str(form.get("assertion", "")))
            self.exchanges += 1
            return self._issue(claims["scope"], self.lifetime, self.client_email)
        if grant == "client_credentials":
            client_id, client = self._client(request, form)
            client.requests += 1
            self.exchanges += 1
            if client.revoke_on_mint:
                self._revoke(client_id)
            return self._issue(str(form.get("scope", "")), client.lifetime, client_id)
        if grant in ("authorization_code", "refresh_token"):
            client_id, client = self._client(request, form)
            client.requests += 1
            fields = {name: str(value) for name, value in form.items()}
            if grant == "authorization_code":
                return web.json_response(self.codes.exchange(fields, client_id, client))
            return web.json_response(await self.codes.refresh(fields, client_id, client))
        return web.json_response({"error": "unsupported_grant_type"}, status=400)

    async def authorize(self, request: web.Request) -> web.Response:
        return self.codes.authorize(request.query, self.clients)

    async def consent(self, request: web.Request) -> web.Response:
        form = await request.post()
        return self.codes.decide({name: str(value) for name, value in form.items()})

    async def register(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.clients[body["id"]] = Client(
            body["secret"],
            body.get("method", "basic"),
            _seconds(body.get("lifetime", self.lifetime)),
            revoke_on_mint=bool(body.get("revokeOnMint", False)),
            redirect_uris=tuple(body.get("redirectUris", ())),
            refresh_reuse_seconds=float(body.get("refreshReuseSeconds", 0)),
            refresh_delay_seconds=float(body.get("refreshDelaySeconds", 0)),
        )
        return web.json_response({"registered": body["id"]})

    async def revoke(self, request: web.Request) -> web.Response:
        """Revokes every live token of a client (``{"client": ID}``), as a provider that revokes
        on demand, or on each new mint, does; or, asked with a form (RFC 7009: ``token``, any
        ``token_type_hint``, the client authenticated), the grant that token belongs to."""
        if request.content_type != "application/x-www-form-urlencoded":
            return web.json_response({"revoked": self._revoke((await request.json())["client"])})
        form = await request.post()
        client_id, _ = self._client(request, form)
        token = str(form.get("token", ""))
        info = self.issued.get(token, {})
        grant = self.codes.grant_of(token) or info.get("grant", "")
        if grant and self.codes.grants[grant].client_id == client_id:
            self.codes.revoke_grant(grant)
        return web.Response(status=200)

    def _revoke(self, client: str) -> int:
        revoked = [token for token, info in self.issued.items() if info["client"] == client]
        for token in revoked:
            del self.issued[token]
        return len(revoked)

    def _live(self, token: str) -> dict[str, Any] | None:
        info = self.issued.get(token)
        return info if info is not None and info["exp"] >= time.time() else None

    async def tokeninfo(self, request: web.Request) -> web.Response:
        info = self._live(request.query.get("access_token", ""))
        if info is None:
            return web.json_response({"error": "invalid_token"}, status=400)
        return web.json_response(info)

    async def api(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        info = self._live(header.removeprefix("Bearer ")) if header.startswith("Bearer ") else None
        if info is None or request.path.startswith("/api/refused/"):
            self.api_refusals += 1
            return web.json_response(
                {"error": "invalid_token"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        self.api_calls += 1
        body = await request.read()
        return web.json_response(
            {
                "method": request.method,
                "path": request.path,
                "client": info["client"],
                "user": info.get("user", ""),
                "scope": info["scope"],
                "headers": {name.lower(): value for name, value in request.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
        )

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "exchanges": self.exchanges,
                "tokenRequests": self.token_requests,
                "clients": {name: client.requests for name, client in self.clients.items()},
                "apiCalls": self.api_calls,
                "apiRefusals": self.api_refusals,
                **self.codes.stats(),
            }
        )


def _seconds(value: Any) -> float:
    """A lifetime as registered: a whole number stays one (``expires_in: 3600``)."""
    seconds = float(value)
    return int(seconds) if seconds.is_integer() else seconds


def _credentials(request: web.Request, form: Mapping[str, Any]) -> tuple[str, str, str]:
    """The client id and secret a request carries, and how (RFC 6749 2.3.1: Basic with the id
    and secret form-encoded, or both in the body)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Basic "):
        return str(form.get("client_id", "")), str(form.get("client_secret", "")), "body"
    try:
        pair = base64.b64decode(header[6:], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        raise _oauth_error(401, "invalid_client", "malformed Basic credentials") from None
    if "client_secret" in form:
        raise _oauth_error(400, "invalid_request", "two ways of authenticating")
    client_id, _, secret = (unquote_plus(part) for part in pair.partition(":"))
    return client_id, secret, "basic"


async def hostile(request: web.Request) -> web.StreamResponse:
    """Token endpoints that misbehave, for the proxy's bounds: each mode is a path."""
    mode = request.match_info["mode"]
    form = await request.post()
    if mode == "redirect":
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")
    if mode == "huge":
        return web.json_response({"access_token": "x" * (10 * 1024 * 1024), "expires_in": 3600})
    if mode == "trickle":
        reply = web.StreamResponse(headers={"Content-Type": "application/json"})
        await reply.prepare(request)
        for char in '{"access_token": "slow", "expires_in": 3600}':
            await reply.write(char.encode())
            await asyncio.sleep(1)
        return reply
    if mode.startswith("expires="):
        lifetime: Any = json.loads(mode.partition("=")[2])
        return web.json_response(
            {"access_token": "t-" + secrets.token_hex(8), "expires_in": lifetime}
        )
    if mode.startswith("size="):
        size = int(mode.partition("=")[2])
        value = ("b-" + secrets.token_urlsafe(size))[:size]
        return web.json_response({"access_token": value, "expires_in": 86400})
    if mode.startswith("scope="):
        # A grant whose scope, as the endpoint says it was granted, is N characters.
        size = int(mode.partition("=")[2])
        scope = " ".join(["s" * 99] * (size // 100 + 1))[:size]
        return web.json_response(
            {"access_token": "a-1", "refresh_token": "r-1", "expires_in": 3600, "scope": scope}
        )
    if mode == "echo" or mode.startswith("echo-in-error="):
        # What the client sent, in the description: a careless provider's error (a grant's
        # refresh token or code too).
        sent = request.headers.get("Authorization", "") + " " + str(form.get("client_secret", ""))
        sent += "".join(f" {form.get(name, '')}" for name in ("refresh_token", "code"))
        if sent.strip().startswith("Basic "):
            sent += " " + base64.b64decode(sent.split()[1]).decode("utf-8", "replace")
        error = "invalid_client"
        if mode != "echo":
            # ...and the secret it read in the error code too, in a form the code's grammar
            # (letters, digits, _ . : -) lets through.
            error = _SECRET_FORMS[mode.partition("=")[2]](_credentials(request, form)[1])
        return web.json_response(
            {"error": error, "error_description": f"bad credentials: {sent}"}, status=401
        )
    raise web.HTTPNotFound()


# A client secret in the forms an error code can carry it.
_SECRET_FORMS: dict[str, Callable[[str], str]] = {
    "as-is": lambda secret: secret,
    "hex": lambda secret: secret.encode().hex(),
    "hex-upper": lambda secret: secret.encode().hex().upper(),
    "base64url": lambda secret: base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
}


def create_app(endpoint: TokenEndpoint) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)
    app.router.add_post("/token", endpoint.token)
    app.router.add_post("/clients", endpoint.register)
    app.router.add_post("/revoke", endpoint.revoke)
    app.router.add_get("/authorize", endpoint.authorize)
    app.router.add_post("/authorize", endpoint.consent)
    app.router.add_get("/tokeninfo", endpoint.tokeninfo)
    app.router.add_get("/stats", endpoint.stats)
    app.router.add_route("*", "/api/{tail:.*}", endpoint.api)
    app.router.add_post("/hostile/{mode}", hostile)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--public-key", type=Path)
    parser.add_argument("--client-email", default="")
    parser.add_argument("--lifetime", type=int, default=3600)
    args = parser.parse_args()
    public_key = None
    if args.public_key is not None:
        loaded = serialization.load_pem_public_key(args.public_key.read_bytes())
        if not isinstance(loaded, rsa.RSAPublicKey):
            parser.error("--public-key must be an RSA public key")
        public_key = loaded
    endpoint = TokenEndpoint(
        public_key, args.client_email, f"http://{args.host}:{args.port}/token", args.lifetime
    )
    web.run_app(create_app(endpoint), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
