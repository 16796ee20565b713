"""Access tokens for Google service accounts: JWT-bearer exchange, cached and refreshed early.

The token endpoint is the installation's (Google's by default), never the key file's
``token_uri``: the signed assertion is posted there, so a key file must not choose where it goes.
One exchange runs at a time per (connection, credential, scopes); concurrent requests wait for it.
Signing runs in a worker thread, so the event loop never blocks on RSA.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from google.auth import crypt, jwt

from gatehouse_proxy.errors import ProxyError

GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_ASSERTION_LIFETIME = 3600


@dataclass(frozen=True)
class AccessToken:
    value: str
    expires_at: float  # time.monotonic() clock


def _sign_assertion(key_file: bytes, scopes: tuple[str, ...], audience: str) -> bytes:
    info = json.loads(key_file)
    signer = crypt.RSASigner.from_service_account_info(info)  # type: ignore[no-untyped-call]
    now = int(time.time())
    payload = {
        "iss": info["client_email"],
        "scope": " ".join(scopes),
        "aud": audience,
        "iat": now,
        "exp": now + _ASSERTION_LIFETIME,
    }
    assertion: bytes = jwt.encode(signer, payload)  # type: ignore[no-untyped-call]
    return assertion


class GoogleTokenSource:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        token_url: str = GOOGLE_TOKEN_URL,
        refresh_margin: float = 60.0,
        timeout: float = 10.0,
    ) -> None:
        self.session = session
        self.token_url = token_url
        self.refresh_margin = refresh_margin
        self.timeout = timeout
        self.exchanges = 0
        self._tokens: dict[tuple[str, ...], AccessToken] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def token(
        self, cache_key: tuple[str, ...], scopes: tuple[str, ...], key_file: Callable[[], bytes]
    ) -> str:
        """A valid access token; ``key_file`` is called (to decrypt) only for an exchange."""
        cached = self._fresh(cache_key)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(cache_key, asyncio.Lock())
        async with lock:
            cached = self._fresh(cache_key)
            if cached is not None:
                return cached
            token = await self._exchange(key_file(), tuple(sorted(scopes)))
            self._tokens[cache_key] = token
            return token.value

    def _fresh(self, cache_key: tuple[str, ...]) -> str | None:
        token = self._tokens.get(cache_key)
        if token is not None and token.expires_at - self.refresh_margin > time.monotonic():
            return token.value
        return None

    def forget(self, keep: set[tuple[str, ...]]) -> None:
        """Drops tokens of connections that left the routing table or changed credentials."""
        for key in [key for key in self._tokens if key not in keep]:
            del self._tokens[key]
            self._locks.pop(key, None)

    async def _exchange(self, key_file: bytes, scopes: tuple[str, ...]) -> AccessToken:
        try:
            assertion = await asyncio.to_thread(_sign_assertion, key_file, scopes, self.token_url)
        except (ValueError, KeyError, TypeError):
            raise ProxyError(
                "credential_failed", "the service account key could not sign a token request"
            ) from None
        self.exchanges += 1
        started = time.monotonic()
        try:
            async with self.session.post(
                self.token_url,
                data={"grant_type": JWT_BEARER, "assertion": assertion.decode()},
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as reply:
                body = await reply.read()
        except (aiohttp.ClientError, OSError, TimeoutError):
            raise ProxyError(
                "credential_failed", "the token endpoint could not be reached"
            ) from None
        if reply.status != 200:
            raise ProxyError(
                "credential_failed",
                f"the token endpoint refused the service account (HTTP {reply.status}"
                f"{_oauth_error(body)})",
            )
        try:
            grant = json.loads(body)
            return AccessToken(grant["access_token"], started + float(grant["expires_in"]))
        except (ValueError, KeyError, TypeError):
            raise ProxyError(
                "credential_failed", "the token endpoint answered without an access token"
            ) from None


def _oauth_error(body: bytes) -> str:
    """The OAuth error code only (e.g. invalid_grant): descriptions may echo request data."""
    try:
        code = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f": {code}" if isinstance(code, str) and code.isidentifier() else ""
