"""Who is signed in to the page, and proof that a form was posted by the page itself.

Behind an authenticating proxy the ``Authorization: Bearer`` it passes is the Kubernetes token.
Otherwise the sign-in form's token is kept only in the session cookie: sealed with the operator's
keyring (AES-GCM, its own context), ``HttpOnly``, ``Secure``, ``SameSite=Strict``, ``__Host-``.
Nothing is kept on the server, so any operator replica serves any session.

Every state-changing form carries a CSRF token: an HMAC, under a key derived from the keyring, of
the digest of the caller's Kubernetes token. It proves the form came from a page rendered for that
token; a cross-site post carries no session cookie (SameSite) and could not know the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from gatehouse_proxy.sealing import KeyringError, KeyringSource, Sealed

COOKIE = "__Host-gatehouse-session"
SESSION_SECONDS = 8 * 3600
# A cookie holds at most 4096 bytes; the sealed token takes about 4/3 of its length plus 70.
MAX_TOKEN_CHARS = 2800
_SESSION_CONTEXT = "gatehouse/web-session"
_CSRF_PURPOSE = b"gatehouse/web-csrf"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Credentials:
    token: str
    from_proxy: bool  # an authenticating proxy's header, not the session cookie


class Sessions:
    def __init__(self, keyring: KeyringSource) -> None:
        self.keyring = keyring

    def credentials(self, request: Request) -> Credentials | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return Credentials(token.strip(), from_proxy=True)
        token = self._open(request.cookies.get(COOKIE, ""))
        return Credentials(token, from_proxy=False) if token else None

    def start(self, response: Response, token: str) -> None:
        keyring = self.keyring.current()
        plaintext = json.dumps({"token": token, "expires": int(time.time()) + SESSION_SECONDS})
        sealed = keyring.seal(plaintext.encode(), _SESSION_CONTEXT)
        value = ".".join(
            [
                sealed.key_id,
                _b64(base64.b64decode(sealed.nonce)),
                _b64(base64.b64decode(sealed.ciphertext)),
            ]
        )
        response.set_cookie(
            COOKIE,
            value,
            max_age=SESSION_SECONDS,
            path="/",
            secure=True,
            httponly=True,
            samesite="strict",
        )

    def end(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")

    def _open(self, value: str) -> str:
        """The cookie's token, or '' for no, a tampered, a foreign or an expired cookie."""
        key_id, _, rest = value.partition(".")
        nonce, _, ciphertext = rest.partition(".")
        if not (key_id and nonce and ciphertext):
            return ""
        try:
            sealed = Sealed(
                key_id=key_id,
                nonce=base64.b64encode(_unb64(nonce)).decode(),
                ciphertext=base64.b64encode(_unb64(ciphertext)).decode(),
            )
            session = json.loads(self.keyring.current().open(sealed, _SESSION_CONTEXT))
        except (KeyringError, ValueError):
            return ""
        if not isinstance(session, dict) or int(session.get("expires", 0)) < time.time():
            return ""
        token = session.get("token")
        return token if isinstance(token, str) else ""

    def csrf_token(self, credentials: Credentials) -> str:
        keyring = self.keyring.current()
        key = keyring.derived(keyring.active, _CSRF_PURPOSE)
        digest = hashlib.sha256(credentials.token.encode()).digest()
        return hmac.new(key, digest, hashlib.sha256).hexdigest()

    def csrf_valid(self, credentials: Credentials, given: str) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf_token(credentials), given)


def same_origin(request: Request) -> bool:
    """Whether a post comes from a page of this origin, as the browser tells it.

    ``Sec-Fetch-Site`` when the browser sends it; else ``Origin`` against ``Host`` (behind a TLS
    proxy the schemes differ, the host the browser used does not).
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-site form: those send Origin
    _, _, netloc = origin.partition("://")
    return netloc == request.headers.get("host", "")
