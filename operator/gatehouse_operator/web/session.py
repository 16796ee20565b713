"""Who is signed in to the page, and proof that a form was posted by the page itself.

Behind an authenticating proxy the ``Authorization: Bearer`` it passes is the Kubernetes token.
Otherwise the session cookie keeps either the sign-in form's token, or the identity a one-time
code from ``gatehouse open`` signed in (a SignInRequest's requester, which the page impersonates),
with a random session id: encrypted with the operator's keyring (AES-GCM, its own context),
``HttpOnly``, ``Secure``, ``SameSite=Strict``, ``__Host-``. Nothing is kept on the server, so any
operator replica serves any session.

Every state-changing form carries a CSRF token: an HMAC, under a key derived from the keyring, of
the digest of the caller's Kubernetes token (or session id). It proves the form came from a page
rendered for that session; a cross-site post carries no session cookie (SameSite) and could not
know the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from gatehouse_contract.keyring import Encrypted, KeyringError, KeyringSource
from gatehouse_operator.access.reviews import User, UserInfo

COOKIE = "__Host-gatehouse-session"
SESSION_SECONDS = 8 * 3600
# A cookie holds at most 4096 bytes; the encrypted token takes about 4/3 of its length plus 70.
MAX_TOKEN_CHARS = 2800
_SESSION_CONTEXT = "gatehouse/web-session"
_CSRF_PURPOSE = b"gatehouse/web-csrf"
_NOTICE_PURPOSE = b"gatehouse/web-notice"
# Browsers keep cookies of up to 4096 bytes, name and attributes included.
MAX_COOKIE_VALUE = 3900
# A wizard left open longer asks for its secret again.
DRAFT_SECRET_SECONDS = 3600
# An OpenID Connect sign-in under way: its state, nonce and PKCE verifier, until the identity
# provider sends the visitor back.
FLOW_COOKIE = "__Host-gatehouse-oidc"
FLOW_SECONDS = 600
_FLOW_CONTEXT = "gatehouse/web-oidc-flow"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Credentials:
    token: str  # "" for a session of an impersonated user
    from_proxy: bool  # an authenticating proxy's header, not the session cookie
    # Signed in with a one-time code: the user the page impersonates, and the session's id.
    impersonated: User | None = None
    session_id: str = ""

    @property
    def proof(self) -> str:
        """What the session's CSRF token and draft secrets are bound to."""
        return self.token or f"session:{self.session_id}"


def _draft_context(credentials: Credentials) -> str:
    return f"gatehouse/web-draft-secret|{hashlib.sha256(credentials.proof.encode()).hexdigest()}"


class Sessions:
    def __init__(self, keyring: KeyringSource) -> None:
        self.keyring = keyring

    def credentials(self, request: Request) -> Credentials | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return Credentials(token.strip(), from_proxy=True)
        content = self._decrypt(request.cookies.get(COOKIE, ""), _SESSION_CONTEXT)
        kept, user, session_id = content.get("token"), content.get("user"), content.get("sid")
        if isinstance(kept, str) and kept:
            return Credentials(kept, from_proxy=False)
        if isinstance(user, str) and isinstance(session_id, str) and session_id:
            try:
                info = UserInfo.model_validate_json(user)
            except ValueError:
                return None
            impersonated = User.from_user_info(info.model_dump())
            return Credentials("", False, impersonated, session_id) if impersonated.name else None
        return None

    def start(self, response: Response, token: str) -> bool:
        """Sets the session cookie; False when the encrypted token would not fit in one."""
        return self._set(response, {"token": token})

    def start_as(self, response: Response, user: UserInfo) -> bool:
        """A session that acts as ``user`` (impersonated); False when it would not fit in a
        cookie (a user of very many groups)."""
        content = {"user": user.model_dump_json(), "sid": secrets.token_urlsafe(24)}
        return self._set(response, content)

    def _set(self, response: Response, content: dict[str, str]) -> bool:
        value = self._encrypt(content, SESSION_SECONDS, _SESSION_CONTEXT)
        if len(value) > MAX_COOKIE_VALUE:
            return False
        response.set_cookie(
            COOKIE,
            value,
            max_age=SESSION_SECONDS,
            path="/",
            secure=True,
            httponly=True,
            samesite="strict",
        )
        return True

    def start_flow(
        self, response: Response, content: dict[str, str], cookie: str = FLOW_COOKIE
    ) -> None:
        """Keeps a sign-in's state, nonce and verifier (or a connect's state, in a cookie of its
        own), encrypted, for the provider's redirect back: SameSite=Lax, since that redirect is
        a cross-site top-level GET."""
        response.set_cookie(
            cookie,
            self._encrypt(content, FLOW_SECONDS, f"{_FLOW_CONTEXT}|{cookie}"),
            max_age=FLOW_SECONDS,
            path="/",
            secure=True,
            httponly=True,
            samesite="lax",
        )

    def flow(self, request: Request, cookie: str = FLOW_COOKIE) -> dict[str, object]:
        """The sign-in (or connect) under way ({} for none, a tampered or an expired one)."""
        return self._decrypt(request.cookies.get(cookie, ""), f"{_FLOW_CONTEXT}|{cookie}")

    def end_flow(self, response: Response, cookie: str = FLOW_COOKIE) -> None:
        response.delete_cookie(cookie, path="/", secure=True, httponly=True, samesite="lax")

    def end(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")

    def encrypt_draft_secret(self, credentials: Credentials, secret: str) -> str:
        """A wizard's secret as the page carries it between steps: encrypted for this visitor's
        token, so the page's HTML holds only ciphertext that no other session can decrypt."""
        return self._encrypt({"secret": secret}, DRAFT_SECRET_SECONDS, _draft_context(credentials))

    def decrypt_draft_secret(self, credentials: Credentials, encrypted: str) -> str | None:
        secret = self._decrypt(encrypted, _draft_context(credentials)).get("secret")
        return secret if isinstance(secret, str) else None

    def _encrypt(self, content: dict[str, str], lifetime: int, context: str) -> str:
        keyring = self.keyring.current()
        plaintext = json.dumps({**content, "expires": int(time.time()) + lifetime})
        encrypted = keyring.encrypt(plaintext.encode(), context)
        return ".".join(
            [
                encrypted.key_id,
                _b64(base64.b64decode(encrypted.nonce)),
                _b64(base64.b64decode(encrypted.ciphertext)),
            ]
        )

    def _decrypt(self, value: str, context: str) -> dict[str, object]:
        """What ``_encrypt`` encrypted, or {} for a tampered, foreign or expired value."""
        # Nonce and ciphertext are base64url (no dots); a key id may hold one.
        parts = value.rsplit(".", 2)
        if len(parts) != 3 or not all(parts):
            return {}
        key_id, nonce, ciphertext = parts
        try:
            encrypted = Encrypted(
                key_id=key_id,
                nonce=base64.b64encode(_unb64(nonce)).decode(),
                ciphertext=base64.b64encode(_unb64(ciphertext)).decode(),
            )
            content = json.loads(self.keyring.current().decrypt(encrypted, context))
        except (KeyringError, ValueError, OSError):
            return {}
        if not isinstance(content, dict) or int(content.get("expires", 0)) < time.time():
            return {}
        return content

    def _mac(self, credentials: Credentials, purpose: bytes, text: str) -> str:
        keyring = self.keyring.current()
        key = keyring.derived(keyring.active, purpose)
        digest = hashlib.sha256(credentials.proof.encode()).digest()
        return hmac.new(key, digest + text.encode(), hashlib.sha256).hexdigest()

    def csrf_token(self, credentials: Credentials) -> str:
        return self._mac(credentials, _CSRF_PURPOSE, "")

    def csrf_valid(self, credentials: Credentials, given: str) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf_token(credentials), given)

    def sign(self, credentials: Credentials, notice: str) -> str:
        """A notice's signature, so that only this page can put it on the visitor's page."""
        return self._mac(credentials, _NOTICE_PURPOSE, notice)

    def signed(self, credentials: Credentials, notice: str, signature: str) -> bool:
        return bool(notice) and hmac.compare_digest(self.sign(credentials, notice), signature)


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
