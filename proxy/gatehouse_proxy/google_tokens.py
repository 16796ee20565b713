"""Access tokens for Google service accounts: JWT-bearer exchange, cached and refreshed early.

The token endpoint is the installation's (Google's by default), never the key file's
``token_uri``: the signed assertion is posted there, so a key file must not choose where it goes.
One exchange runs at a time per (connection, credential, scopes); concurrent requests wait for it,
and a failed exchange is answered from memory, with backoff, instead of being tried again at once.

Parsing an RSA key with OpenSSL's consistency check holds the GIL for as long as it takes (35 ms
at 2,048 bits, seconds for large keys): a worker thread does not free the event loop. So keys are
loaded without it (the operator proved each key by signing with it before sealing it), at most
4,096 bits, and each parsed signer is kept per key file for as long as the key is routed.
Signing, unlike parsing, lets go of the GIL: it runs in a worker thread, and the loop serves
other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from cryptography.exceptions import UnsupportedAlgorithm
from google.auth import crypt, jwt

from gatehouse_contract.google_keys import MAX_RSA_BITS, load_rsa_key
from gatehouse_proxy.errors import ProxyError

GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_ASSERTION_LIFETIME = 3600


@dataclass(frozen=True)
class AccessToken:
    value: str
    expires_at: float  # time.monotonic() clock


# After a failed exchange, requests get its error without a new exchange for this long, doubling
# up to the maximum while it keeps failing.
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 60.0


def _signer(key_file: bytes) -> tuple[crypt.Signer, str]:
    info = json.loads(key_file)
    key = load_rsa_key(info["private_key"].encode())
    if key.key_size > MAX_RSA_BITS:
        raise ValueError("the RSA key is too large")
    signer = crypt.RSASigner(key, info.get("private_key_id"))  # type: ignore[no-untyped-call]
    return signer, str(info["client_email"])


def _sign_assertion(
    signer: crypt.Signer, email: str, scopes: tuple[str, ...], audience: str
) -> bytes:
    now = int(time.time())
    payload = {
        "iss": email,
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
        # Parsed signers by the key file's hash; failures by cache key: (until, delay, error).
        self._signers: dict[str, tuple[crypt.Signer, str]] = {}
        self._signer_of: dict[tuple[str, ...], str] = {}
        self._failures: dict[tuple[str, ...], tuple[float, float, ProxyError]] = {}

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
            failed = self._failures.get(cache_key)
            if failed is not None and failed[0] > time.monotonic():
                raise failed[2].again()
            try:
                token = await self._exchange(cache_key, key_file(), tuple(sorted(scopes)))
            except ProxyError as error:
                delay = min(failed[1] * 2, MAX_BACKOFF_SECONDS) if failed else BACKOFF_SECONDS
                self._failures[cache_key] = (time.monotonic() + delay, delay, error)
                raise
            self._failures.pop(cache_key, None)
            self._tokens[cache_key] = token
            return token.value

    def _fresh(self, cache_key: tuple[str, ...]) -> str | None:
        token = self._tokens.get(cache_key)
        if token is not None and token.expires_at - self.refresh_margin > time.monotonic():
            return token.value
        return None

    def forget(self, keep: set[tuple[str, ...]]) -> None:
        """Drops tokens of connections that left the routing table or changed credentials."""
        known = {*self._tokens, *self._failures, *self._signer_of}
        for key in [key for key in known if key not in keep]:
            self._tokens.pop(key, None)
            self._failures.pop(key, None)
            self._signer_of.pop(key, None)
            self._locks.pop(key, None)
        routed = set(self._signer_of.values())
        for fingerprint in [f for f in self._signers if f not in routed]:
            del self._signers[fingerprint]

    def discard(self, cache_key: tuple[str, ...]) -> None:
        """Drops one entry at once (a draft's, after its test): not kept for the next sweep."""
        self._tokens.pop(cache_key, None)
        self._failures.pop(cache_key, None)
        self._locks.pop(cache_key, None)
        fingerprint = self._signer_of.pop(cache_key, None)
        if fingerprint is not None and fingerprint not in self._signer_of.values():
            self._signers.pop(fingerprint, None)

    def _signer_for(self, cache_key: tuple[str, ...], key_file: bytes) -> tuple[crypt.Signer, str]:
        fingerprint = hashlib.sha256(key_file).hexdigest()
        signer = self._signers.get(fingerprint)
        if signer is None:
            signer = self._signers[fingerprint] = _signer(key_file)
        self._signer_of[cache_key] = fingerprint
        return signer

    async def _exchange(
        self, cache_key: tuple[str, ...], key_file: bytes, scopes: tuple[str, ...]
    ) -> AccessToken:
        try:
            signer, email = self._signer_for(cache_key, key_file)
            assertion = await asyncio.to_thread(
                _sign_assertion, signer, email, scopes, self.token_url
            )
        except (ValueError, KeyError, TypeError, UnsupportedAlgorithm):
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
