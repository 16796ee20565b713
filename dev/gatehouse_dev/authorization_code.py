"""The dev authorization server's authorization code grant (RFC 6749 4.1, PKCE RFC 7636) with
rotating refresh tokens, served by :mod:`gatehouse_dev.token_endpoint`'s app.

- ``GET /authorize`` checks the client, the exact redirect URI (a wrong one is an error page,
  never a redirect), ``response_type=code``, the scopes the client may ask, and a ``code_challenge``
  with ``code_challenge_method=S256`` (plain or none is refused: ``invalid_request``). It shows a
  small consent page (Approve and Deny buttons, who consents in a ``user`` field), which posts to
  ``POST /authorize``. **Scripted consent** for tests without a browser: ``consent=approve`` (or
  ``deny``) in the query answers at once, as the person would, and ``user=`` names them (else
  ``viewer``): the connect flow passes both as extra authorization parameters.
- Codes are single-use (a second use revokes what the first got, RFC 6749 4.1.2), live
  ``CODE_SECONDS``, and are bound to the client, the redirect URI and the PKCE challenge, all
  checked at ``grant_type=authorization_code``.
- Each code starts a **grant**: an access token (the client's lifetime) and a refresh token.
  ``grant_type=refresh_token`` rotates: each use answers a new pair and retires the one used. A
  retired refresh token used again is **reuse**: the whole grant is revoked (every token of it),
  as providers do; except within the client's ``refreshReuseSeconds`` of its rotation (Auth0's
  reuse interval, Okta's grace period), when it answers the same pair the rotation did. The
  client's ``refreshDelaySeconds`` delays each refresh's answer after the rotation is made (a
  race's window, and a worker killed between the provider's rotation and its own write).
- ``POST /revoke`` with a form (RFC 7009: ``token``, ``token_type_hint``, the client
  authenticated) revokes the grant the token belongs to; always 200, as the RFC says.
- ``/stats``' ``grants``: per grant its client, user, refreshes and whether it is revoked; and
  ``reuseDetections``, ``reuseIntervalAnswers`` (a retired refresh token answered within the
  interval), ``revokedGrants``, ``refreshes``, ``authorizations``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import html
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol
from urllib.parse import urlencode

from aiohttp import web

CODE_SECONDS = 60.0
PENDING_SECONDS = 600.0
_CHALLENGE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class Registered(Protocol):
    """What the authorization code grant reads of a registered client."""

    lifetime: float
    redirect_uris: tuple[str, ...]
    refresh_reuse_seconds: float
    refresh_delay_seconds: float


@dataclass
class _Pending:
    """An authorization request waiting for the person's decision on the consent page."""

    client_id: str
    redirect_uri: str
    scope: str
    state: str
    challenge: str
    created: float


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    scope: str
    challenge: str
    user: str
    expires: float
    grant: str = ""  # the grant it started, once used


@dataclass
class Grant:
    client_id: str
    user: str
    scope: str
    refresh_token: str
    previous: str = ""  # the refresh token the last rotation retired
    rotated_at: float = 0.0
    last_answer: dict[str, Any] = field(default_factory=dict)
    refreshes: int = 0
    revoked: bool = False


class AuthorizationCodes:
    """Codes, grants and refresh tokens; ``issue`` makes an access token on the server's books
    (``issue(grant_id, client_id, user, scope, lifetime) -> token``), ``revoke_tokens`` drops
    every access token of a grant."""

    def __init__(
        self,
        issue: Callable[[str, str, str, str, float], str],
        revoke_tokens: Callable[[str], int],
    ) -> None:
        self._issue = issue
        self._revoke_tokens = revoke_tokens
        self.pending: dict[str, _Pending] = {}
        self.codes: dict[str, _Code] = {}
        self.grants: dict[str, Grant] = {}
        self.refresh_tokens: dict[str, str] = {}  # every refresh token ever issued: its grant
        self.authorizations = 0
        self.reuse_detections = 0
        self.reuse_interval_answers = 0

    # The authorization endpoint.

    def authorize(
        self, query: Mapping[str, str], clients: Mapping[str, Registered]
    ) -> web.Response:
        client_id, redirect_uri = query.get("client_id", ""), query.get("redirect_uri", "")
        client = clients.get(client_id)
        if client is None or redirect_uri not in client.redirect_uris:
            # RFC 6749 4.1.2.1: never redirect to a URI not registered for the client.
            return _page(
                "Authorization refused", "unknown client or unregistered redirect_uri", 400
            )
        state = query.get("state", "")

        def refuse(error: str, description: str) -> NoReturn:
            raise _redirect(redirect_uri, error=error, error_description=description, state=state)

        if query.get("response_type") != "code":
            refuse("unsupported_response_type", "response_type must be code")
        challenge = query.get("code_challenge", "")
        if query.get("code_challenge_method") != "S256":
            refuse("invalid_request", "code_challenge_method must be S256")
        if not (43 <= len(challenge) <= 128 and set(challenge) <= _CHALLENGE_CHARS):
            refuse("invalid_request", "code_challenge must be 43 to 128 base64url chars")
        self._expire()
        pending = _Pending(
            client_id, redirect_uri, query.get("scope", ""), state, challenge, time.time()
        )
        consent = query.get("consent", "")
        if consent:
            return self._decide(pending, consent, query.get("user", "viewer"))
        request_id = secrets.token_urlsafe(16)
        self.pending[request_id] = pending
        return _consent_page(request_id, pending)

    def decide(self, form: Mapping[str, str]) -> web.Response:
        """The consent page's answer."""
        pending = self.pending.pop(form.get("request", ""), None)
        if pending is None:
            return _page("Authorization refused", "this request is unknown or was answered", 400)
        return self._decide(pending, form.get("decision", ""), form.get("user", "") or "viewer")

    def _decide(self, pending: _Pending, decision: str, user: str) -> web.Response:
        if decision != "approve":
            raise _redirect(
                pending.redirect_uri,
                error="access_denied",
                error_description="the person denied the request",
                state=pending.state,
            )
        code = secrets.token_urlsafe(24)
        self.codes[code] = _Code(
            pending.client_id,
            pending.redirect_uri,
            pending.scope,
            pending.challenge,
            user,
            time.time() + CODE_SECONDS,
        )
        self.authorizations += 1
        raise _redirect(pending.redirect_uri, code=code, state=pending.state)

    # The token endpoint's two grants.

    def exchange(
        self, form: Mapping[str, str], client_id: str, client: Registered
    ) -> dict[str, Any]:
        code = self.codes.get(form.get("code", ""))
        if code is None or code.client_id != client_id:
            raise oauth_error(400, "invalid_grant", "unknown code")
        if code.grant:
            # Used before: whatever the first use got is revoked (RFC 6749 4.1.2).
            self.revoke_grant(code.grant)
            raise oauth_error(400, "invalid_grant", "the code was used already")
        if code.expires < time.time():
            raise oauth_error(400, "invalid_grant", "the code expired")
        if form.get("redirect_uri", "") != code.redirect_uri:
            raise oauth_error(400, "invalid_grant", "redirect_uri is not the authorization's")
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        expected = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        if not verifier or not hmac.compare_digest(expected, code.challenge):
            raise oauth_error(400, "invalid_grant", "code_verifier does not match the challenge")
        grant_id = "g-" + secrets.token_hex(6)
        code.grant = grant_id
        refresh = self._refresh_token(grant_id)
        grant = Grant(client_id, code.user, code.scope, refresh)
        self.grants[grant_id] = grant
        grant.last_answer = self._answer(grant_id, grant, client)
        return grant.last_answer

    async def refresh(
        self, form: Mapping[str, str], client_id: str, client: Registered
    ) -> dict[str, Any]:
        used = form.get("refresh_token", "")
        grant_id = self.refresh_tokens.get(used, "")
        grant = self.grants.get(grant_id)
        if grant is None or grant.client_id != client_id:
            raise oauth_error(400, "invalid_grant", "unknown refresh token")
        if grant.revoked:
            raise oauth_error(400, "invalid_grant", "the grant was revoked")
        if used == grant.refresh_token:
            grant.previous, grant.rotated_at = used, time.time()
            grant.refresh_token = self._refresh_token(grant_id)
            grant.refreshes += 1
            grant.last_answer = self._answer(grant_id, grant, client)
            answer = grant.last_answer
        elif (
            used == grant.previous
            and time.time() - grant.rotated_at <= client.refresh_reuse_seconds
        ):
            answer = grant.last_answer  # the reuse interval: the same pair again
            self.reuse_interval_answers += 1
        else:
            self.reuse_detections += 1
            self.revoke_grant(grant_id)
            raise oauth_error(400, "invalid_grant", "refresh token reused: the grant is revoked")
        await asyncio.sleep(client.refresh_delay_seconds)
        return answer

    def _answer(self, grant_id: str, grant: Grant, client: Registered) -> dict[str, Any]:
        token = self._issue(grant_id, grant.client_id, grant.user, grant.scope, client.lifetime)
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": client.lifetime,
            "refresh_token": grant.refresh_token,
            "scope": grant.scope,
        }

    def _refresh_token(self, grant_id: str) -> str:
        token = "rt-" + secrets.token_urlsafe(24)
        self.refresh_tokens[token] = grant_id
        return token

    def revoke_grant(self, grant_id: str) -> None:
        grant = self.grants.get(grant_id)
        if grant is not None and not grant.revoked:
            grant.revoked = True
            self._revoke_tokens(grant_id)

    def grant_of(self, token: str) -> str:
        """The grant a refresh token belongs to ('' if none)."""
        return self.refresh_tokens.get(token, "")

    def stats(self) -> dict[str, Any]:
        return {
            "authorizations": self.authorizations,
            "refreshes": sum(grant.refreshes for grant in self.grants.values()),
            "reuseDetections": self.reuse_detections,
            "reuseIntervalAnswers": self.reuse_interval_answers,
            "revokedGrants": sum(grant.revoked for grant in self.grants.values()),
            "grants": {
                grant_id: {
                    "client": grant.client_id,
                    "user": grant.user,
                    "refreshes": grant.refreshes,
                    "revoked": grant.revoked,
                }
                for grant_id, grant in self.grants.items()
            },
        }

    def _expire(self) -> None:
        now = time.time()
        self.pending = {
            key: pending
            for key, pending in self.pending.items()
            if now - pending.created < PENDING_SECONDS
        }
        self.codes = {key: code for key, code in self.codes.items() if code.expires > now}


def oauth_error(status: int, error: str, description: str) -> web.HTTPException:
    kind = web.HTTPUnauthorized if status == 401 else web.HTTPBadRequest
    return kind(
        text=json.dumps({"error": error, "error_description": description}),
        content_type="application/json",
    )


def _redirect(uri: str, **query: str) -> web.HTTPFound:
    separator = "&" if "?" in uri else "?"
    return web.HTTPFound(uri + separator + urlencode({k: v for k, v in query.items() if v}))


def _page(title: str, text: str, status: int = 200) -> web.Response:
    body = (
        f"<!doctype html><html><head><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{text}</body></html>"
    )
    return web.Response(text=body, content_type="text/html", status=status)


def _consent_page(request_id: str, pending: _Pending) -> web.Response:
    scope = html.escape(pending.scope or "(none)")
    return _page(
        "Authorize access",
        f"<p><b>{html.escape(pending.client_id)}</b> asks for: {scope}</p>"
        '<form method="post" action="/authorize">'
        f'<input type="hidden" name="request" value="{request_id}">'
        '<label>Signed in as <input name="user" value="viewer"></label> '
        '<button type="submit" name="decision" value="approve">Approve</button> '
        '<button type="submit" name="decision" value="deny">Deny</button>'
        "</form>",
    )
