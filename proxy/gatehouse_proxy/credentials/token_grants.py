"""Asking an OAuth 2.0 token endpoint for an access token, within bounds, and reading its answer.

Every grant the proxy makes (client credentials, RFC 6749 4.4; Google's JWT bearer, RFC 7523; a
viewer's refresh token, 6) posts a form and reads ``{"access_token", "expires_in"}``, and a refresh
its ``refresh_token`` and ``scope`` too (:meth:`TokenClient.post_for_grant`). The endpoint is
reached through the same guarded session as upstreams (addresses checked after DNS, redirects
refused, never followed: a redirect would carry the client's credentials elsewhere), and its answer
is bounded in size, time and lifetime: an endpoint that answers megabytes, trickles past its
deadline or says a token lives ten years costs the fleet no more than one that behaves.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp
from yarl import URL

from gatehouse_contract import sent_forms
from gatehouse_contract.errors import RefusalCode
from gatehouse_contract.redaction import Redactor
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.http.bounded_reads import read_within
from gatehouse_proxy.upstream.forwarder import is_redirect
from gatehouse_proxy.upstream.network_guard import BlockedAddressError, NetworkPolicy

MAX_ANSWER_BYTES = 64 * 1024
# The longest access token accepted, by default (GATEHOUSE_MAX_TOKEN_CHARS, at most
# MOST_TOKEN_CHARS). Real ones are far shorter (Google's about 200 characters, a JWT with a
# few dozen claims 1 to 4 KiB), and a longer one could not be sent anyway: "Authorization:
# Bearer " and 8 KiB is past the 8 KiB a header line may have in nginx's, Apache's and
# aiohttp's defaults. The fleet keeps each token in the shared store, counted to its
# namespace (docs/operating/shared-store.md, "The shared store").
MAX_TOKEN_CHARS = 8 * 1024
MOST_TOKEN_CHARS = 16 * 1024
# An answer without expires_in: RFC 6749 leaves the lifetime to the provider's documentation;
# an hour is what the common ones issue. A token that dies earlier is renewed on its first 401.
DEFAULT_LIFETIME_SECONDS = 3600.0
# Kept at most a day whatever the endpoint says: a revoked token is renewed on its first 401,
# and a changed client secret is a changed cache key.
MAX_LIFETIME_SECONDS = 24 * 3600.0
MAX_DESCRIPTION_CHARS = 300
# A grant's scope as the endpoint says it was granted: as many as a connection may ask for (32
# of at most 512 characters each) and some more, since a provider may add its own (openid...).
MAX_GRANTED_SCOPE_CHARS = 4 * 1024
_HEADER_SAFE = re.compile(r"^[\x20-\x7e]+$")
_PRINTABLE = re.compile(r"[^\x20-\x7e]+")


@dataclass(frozen=True)
class MintedToken:
    value: str
    lifetime: float  # seconds from when it was asked for


@dataclass(frozen=True)
class GrantedTokens:
    """A refresh's (or a code exchange's) answer: the access token, the refresh token to use next
    ("" when the endpoint rotated none: the one sent stays), and the scopes granted (None when the
    answer names none: those asked for)."""

    access: MintedToken
    refresh_token: str
    scopes: tuple[str, ...] | None


class TokenRefused(ProxyError):
    """The endpoint answered an OAuth 2.0 error: ``error`` is its code (``invalid_grant``: the
    refresh token, or the code, is no longer good, RFC 6749 5.2)."""

    def __init__(self, code: RefusalCode, message: str, error: str) -> None:
        super().__init__(code, message)
        self.error = error


# What an endpoint's error answer says: its error code ("" if none), and ``: code (detail)``.
ErrorReader = Callable[[bytes, Redactor, bool], tuple[str, str]]


@dataclass(frozen=True)
class GrantRequest:
    """One token request: the form posted to ``url`` with ``headers``, within ``seconds``. A
    failure is a ProxyError ``code`` with the provider's ``error`` and (``describe_errors``) its
    ``error_description``, scrubbed by ``redact`` (an endpoint may echo what it was sent), as
    ``read_error`` reads them (OAuth 2.0's JSON unless the endpoint speaks another)."""

    url: str
    form: Mapping[str, str]
    headers: Mapping[str, str]
    seconds: float
    code: RefusalCode
    redact: Redactor
    describe_errors: bool = True
    read_error: ErrorReader | None = None


@dataclass(frozen=True)
class TokenClient:
    """Token requests, behind the upstreams' guard: the session's resolver checks what a name
    resolves to; an address written in the URL is checked here, since aiohttp never resolves
    it; and https is required unless the installation allows http upstreams."""

    session: aiohttp.ClientSession
    policy: NetworkPolicy
    allow_http: bool = False
    max_token_chars: int = MAX_TOKEN_CHARS

    async def post(self, grant: GrantRequest) -> MintedToken:
        """The access token the endpoint grants; raises ProxyError ``grant.code`` saying why
        not."""
        return _grant(await self._answer(grant), grant.code, self.max_token_chars)

    async def post_for_grant(self, grant: GrantRequest) -> GrantedTokens:
        """The access token and the (rotated) refresh token the endpoint grants, each bounded
        as an access token is; raises ProxyError ``grant.code`` saying why not, a
        :class:`TokenRefused` when the endpoint said so."""
        answer = await self._answer(grant)
        access = _grant(answer, grant.code, self.max_token_chars)
        refresh = answer.get("refresh_token", "")
        if not isinstance(refresh, str):
            raise ProxyError(grant.code, "the token endpoint's refresh_token is not a string")
        if len(refresh) > self.max_token_chars or (refresh and not _HEADER_SAFE.match(refresh)):
            raise ProxyError(
                grant.code,
                f"the token endpoint's refresh_token is over {self.max_token_chars:,} characters "
                "or has characters a form cannot carry as they are",
            )
        scope = answer.get("scope")
        if isinstance(scope, str) and (
            len(scope) > MAX_GRANTED_SCOPE_CHARS or not _HEADER_SAFE.match(scope or " ")
        ):
            # Kept in every grant, in the namespace's share of the store.
            raise ProxyError(
                grant.code,
                f"the token endpoint's scope is over {MAX_GRANTED_SCOPE_CHARS:,} characters "
                "or not printable ASCII",
            )
        scopes = tuple(scope.split()) if isinstance(scope, str) else None
        return GrantedTokens(access, refresh, scopes)

    async def revoke(self, grant: GrantRequest) -> None:
        """A revocation (RFC 7009): the endpoint's 200, whatever its body; raises ProxyError
        ``grant.code`` saying why not, within the same bounds as a token request."""
        await self.posted(grant)

    async def _answer(self, grant: GrantRequest) -> dict[str, object]:
        body = await self.posted(grant)
        try:
            answer = json.loads(body)
        except ValueError:
            raise ProxyError(grant.code, "the token endpoint's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ProxyError(grant.code, "the token endpoint's answer is not a JSON object")
        return answer

    async def posted(self, grant: GrantRequest) -> bytes:
        """The body of the endpoint's 200, read within bounds (an endpoint that answers other
        than OAuth 2.0's JSON: AWS STS's XML); raises ProxyError ``grant.code`` saying why not."""
        target = URL(grant.url)
        if target.scheme != "https" and not self.allow_http:
            raise ProxyError(grant.code, "the token endpoint must be https on this installation")
        return await _post_for_token(self.session, self.policy, target, grant)


async def _post_for_token(
    session: aiohttp.ClientSession, policy: NetworkPolicy, url: URL, grant: GrantRequest
) -> bytes:
    """The body of the endpoint's 200, read within bounds; a ProxyError saying why not."""
    code, seconds = grant.code, grant.seconds
    try:
        policy.check_address(url.raw_host or "")
        async with asyncio.timeout(seconds):
            async with session.post(
                url,
                # Encoded as sent_forms says, so that what is scrubbed is what was sent.
                data=sent_forms.form_body(grant.form),
                headers={**grant.headers, "Content-Type": "application/x-www-form-urlencoded"},
                allow_redirects=False,
            ) as reply:
                status = reply.status
                if reply.content_length is not None and reply.content_length > MAX_ANSWER_BYTES:
                    raise ProxyError(
                        code, f"the token endpoint's answer is over {MAX_ANSWER_BYTES:,} bytes"
                    )
                body = await _read_bounded(reply.content, code)
    except TimeoutError:
        raise ProxyError(code, f"the token endpoint did not answer within {seconds:g}s") from None
    except aiohttp.ClientConnectorError as error:
        if isinstance(error.os_error, BlockedAddressError):
            raise ProxyError(
                code, "the token endpoint resolves to an address the proxy may not call"
            ) from None
        raise ProxyError(code, "the token endpoint could not be reached") from None
    except BlockedAddressError:
        raise ProxyError(code, "the token endpoint's address is not allowed") from None
    except (aiohttp.ClientError, OSError):
        raise ProxyError(code, "the token endpoint could not be reached") from None
    if is_redirect(status):
        raise ProxyError(
            code, f"the token endpoint answered with a redirect (HTTP {status}), which is refused"
        )
    if status != 200:
        read_error = grant.read_error or _oauth_error
        said, detail = read_error(body, grant.redact, grant.describe_errors)
        message = f"the token endpoint refused the request (HTTP {status}{detail})"
        raise TokenRefused(code, message, said) if said else ProxyError(code, message)
    return body


async def _read_bounded(content: aiohttp.StreamReader, code: RefusalCode) -> bytes:
    body = await read_within(content.iter_chunked(16 * 1024), MAX_ANSWER_BYTES)
    if body is None:
        raise ProxyError(code, f"the token endpoint's answer is over {MAX_ANSWER_BYTES:,} bytes")
    return body


def _grant(grant: dict[str, object], code: RefusalCode, max_token_chars: int) -> MintedToken:
    value = grant.get("access_token")
    if not isinstance(value, str) or not value:
        raise ProxyError(code, "the token endpoint answered without an access_token")
    if len(value) > max_token_chars:
        raise ProxyError(
            code,
            f"the token endpoint's access_token is {len(value):,} characters, over the "
            f"{max_token_chars:,} this installation accepts (proxy.maxTokenChars)",
        )
    if not _HEADER_SAFE.match(value):
        raise ProxyError(
            code, "the token endpoint's access_token has characters a header cannot carry"
        )
    kind = grant.get("token_type", "bearer")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise ProxyError(code, "the token endpoint issued a token that is not a bearer token")
    return MintedToken(value, _lifetime(grant.get("expires_in"), code))


def _lifetime(expires_in: object, code: RefusalCode) -> float:
    if expires_in is None:
        return DEFAULT_LIFETIME_SECONDS
    seconds = math.nan
    # A number, or a numeric string (some providers send "3600").
    if isinstance(expires_in, int | float | str) and not isinstance(expires_in, bool):
        try:
            seconds = float(expires_in)
        except ValueError:
            seconds = math.nan
    if not math.isfinite(seconds):
        raise ProxyError(code, "the token endpoint's expires_in is not a number")
    if seconds <= 0:
        raise ProxyError(
            code, f"the token endpoint's expires_in is {seconds:g}: the token is expired already"
        )
    return min(seconds, MAX_LIFETIME_SECONDS)


def _oauth_error(body: bytes, redact: Redactor, describe: bool) -> tuple[str, str]:
    """OAuth 2.0's error answer (RFC 6749 5.2), as :func:`explained` says it."""
    try:
        answer = json.loads(body)
    except ValueError:
        return "", ""
    if not isinstance(answer, dict):
        return "", ""
    description = answer.get("error_description") if describe else None
    return explained(answer.get("error"), description, redact)


def explained(error: object, description: object, redact: Redactor) -> tuple[str, str]:
    """The error's code, and ``: error (description)``, as far as the answer says, printable and
    scrubbed ("" if it says none). Both are
    shown (to the app, in tests, the store and logs), and an endpoint may echo what it was sent
    in either: the code too (its grammar allows a secret's hex or base64url), and a piece of a
    secret in each (scrubbed as header values are)."""
    if not isinstance(error, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", error):
        return "", ""
    if not isinstance(description, str):
        description = ""
    error, description = redact.headers([error, description])
    if not description.strip():
        return error, f": {error}"
    text = _PRINTABLE.sub(" ", description).strip()
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 3] + "..."
    return error, f": {error}: {text}"
