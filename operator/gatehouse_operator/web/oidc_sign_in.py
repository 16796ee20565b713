"""The page's "Sign in with ...": OpenID Connect's authorization code flow with PKCE.

Where the installation names an issuer (the one the API server trusts, ``operator.page.oidc``),
``/ui/sign-in/oidc`` sends the visitor to it with a fresh state, nonce and PKCE challenge (S256),
kept encrypted in a short-lived cookie; ``/ui/sign-in/oidc/callback`` checks the state, redeems
the code (with the verifier and the client secret), verifies the ID token (access.id_tokens:
signature, issuer, audience, expiry, nonce) and starts a session that impersonates the user the
API server would map the token to. The provider's documents are read with bounds (10 s, 256 KiB)
and kept five minutes; a key id the JWKS lacks reads it again, at most once a minute.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import urlencode

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gatehouse_operator.access.id_tokens import IdTokenRefused, user_of, verified_claims
from gatehouse_operator.access.reviews import UserInfo
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.web.guards import Guards, page_refusal

log = logging.getLogger("gatehouse.operator.page")
CALLBACK = "/ui/sign-in/oidc/callback"
MAX_DOCUMENT_BYTES = 256 * 1024
DOCUMENT_SECONDS = 300.0
JWKS_REREAD_SECONDS = 60.0
TIMEOUT = aiohttp.ClientTimeout(total=10)
MAX_ERROR_CHARS = 200


Endpoint = Annotated[str, Field(pattern=r"^https?://", max_length=2048)]


class Provider(BaseModel):
    """What the page reads of the issuer's discovery document."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    issuer: str
    authorization_endpoint: Endpoint
    token_endpoint: Endpoint
    jwks_uri: Endpoint


class ProviderUnreadable(GatehouseError):
    """The identity provider could not be asked, or answered what is not its document."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def _json(response: aiohttp.ClientResponse) -> object:
    body = await response.content.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ProviderUnreadable("an answer over 256 KiB")
    try:
        return json.loads(body)
    except ValueError:
        raise ProviderUnreadable(f"an answer that is not JSON (HTTP {response.status})") from None


class OidcSignIn:
    def __init__(self, guards: Guards, settings: OperatorSettings) -> None:
        self.guards = guards
        self.oidc = settings.oidc
        self.redirect_uri = f"{settings.page_url}{CALLBACK}"
        self._documents: dict[str, tuple[float, dict[str, object]]] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.oidc.issuer)

    async def _document(self, url: str, fresh_for: float = DOCUMENT_SECONDS) -> dict[str, object]:
        kept = self._documents.get(url)
        if kept is not None and time.monotonic() - kept[0] < fresh_for:
            return kept[1]
        try:
            async with (
                aiohttp.ClientSession(timeout=TIMEOUT) as session,
                session.get(url, allow_redirects=False) as response,
            ):
                found = await _json(response)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ProviderUnreadable(type(error).__name__) from None
        if response.status != 200 or not isinstance(found, dict):
            raise ProviderUnreadable(f"HTTP {response.status}")
        self._documents[url] = (time.monotonic(), found)
        return found

    async def _provider(self) -> Provider:
        found = await self._document(f"{self.oidc.issuer}/.well-known/openid-configuration")
        try:
            provider = Provider.model_validate(found)
        except ValidationError as error:
            where = ".".join(str(part) for part in error.errors()[0]["loc"])
            raise ProviderUnreadable(f"its discovery document's {where} is wrong") from None
        if provider.issuer != self.oidc.issuer:
            raise ProviderUnreadable("its discovery document names another issuer")
        return provider

    async def start(self, request: Request) -> Response:
        async def begin(request: Request) -> Response:
            if not self.enabled:
                raise page_refusal(404, "this installation names no identity provider")
            provider = await self._provider()
            state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
            query = {
                "response_type": "code",
                "client_id": self.oidc.client_id,
                "redirect_uri": self.redirect_uri,
                "scope": "openid email profile",
                "state": state,
                "nonce": nonce,
                "code_challenge": _b64url(hashlib.sha256(verifier.encode()).digest()),
                "code_challenge_method": "S256",
            }
            response = RedirectResponse(
                f"{provider.authorization_endpoint}?{urlencode(query)}", status_code=303
            )
            self.guards.sessions.start_flow(
                response, {"state": state, "nonce": nonce, "verifier": verifier}
            )
            return response

        return await self._answered(request, begin)

    async def callback(self, request: Request) -> Response:
        return await self._answered(request, self._callback)

    async def _answered(
        self, request: Request, handler: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except ProviderUnreadable as error:
                log.warning("the identity provider could not be asked: %s", error)
                raise page_refusal(
                    502, f"the identity provider could not be asked ({error}): try again"
                ) from None
            except IdTokenRefused as error:
                log.warning("an ID token was refused: %s", error)
                raise page_refusal(401, f"not signed in: {error}") from None

        return await self.guards.answer(request, guarded)

    async def _callback(self, request: Request) -> Response:
        if not self.enabled:
            raise page_refusal(404, "this installation names no identity provider")
        query = request.query_params
        if "error" in query:
            said = query["error"][:MAX_ERROR_CHARS]
            raise page_refusal(401, f"the identity provider did not sign you in: {said}")
        flow = self.guards.sessions.flow(request)
        state, nonce, verifier = (str(flow.get(key, "")) for key in ("state", "nonce", "verifier"))
        if not state or not hmac.compare_digest(state, query.get("state", "")):
            raise page_refusal(
                400, "this sign-in was not started here, or took over ten minutes: start again"
            )
        provider = await self._provider()
        id_token = await self._redeem(provider, query.get("code", ""), verifier)
        jwks_url = provider.jwks_uri
        try:
            claims = verified_claims(id_token, await self._document(jwks_url), self.oidc, nonce)
        except IdTokenRefused:
            # A key rotated since: the JWKS again, at most once a minute.
            fresh = await self._document(jwks_url, fresh_for=JWKS_REREAD_SECONDS)
            claims = verified_claims(id_token, fresh, self.oidc, nonce)
        user = user_of(claims, self.oidc)
        # The provider's redirect was cross-site: a Strict cookie set now is sent on the next
        # navigation this page starts itself, not on a redirect of that one.
        response = self.guards.renderer.render("signed_in.html", visitor=None)
        self.guards.sessions.end_flow(response)
        info = UserInfo(username=user.name, groups=list(user.groups))
        if not self.guards.sessions.start_as(response, info):
            raise page_refusal(422, "too many groups to keep in a session cookie")
        log.info("%s signed in through %s", user.name, self.oidc.issuer)
        return response

    async def _redeem(self, provider: Provider, code: str, verifier: str) -> str:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.oidc.client_id,
            "code_verifier": verifier,
        }
        if self.oidc.client_secret:  # else a public client: PKCE alone
            form["client_secret"] = self.oidc.client_secret
        try:
            async with (
                aiohttp.ClientSession(timeout=TIMEOUT) as session,
                session.post(provider.token_endpoint, data=form, allow_redirects=False) as response,
            ):
                answer = await _json(response)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ProviderUnreadable(type(error).__name__) from None
        if response.status != 200 or not isinstance(answer, dict):
            said = answer.get("error", "") if isinstance(answer, dict) else ""
            raise IdTokenRefused(
                f"the token endpoint answered {response.status} {str(said)[:MAX_ERROR_CHARS]}"
            )
        return str(answer.get("id_token", ""))
