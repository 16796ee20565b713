"""Client-credentials token requests against the dev authorization server, run in this process on
127.0.0.1: both client authentication styles, and every way an endpoint can misbehave, bounded."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import TokenRequest
from gatehouse_dev.echoes import leaks
from gatehouse_dev.token_endpoint import TokenEndpoint, create_app
from gatehouse_proxy.credentials import oauth2_tokens
from gatehouse_proxy.credentials.token_grants import (
    MAX_GRANTED_SCOPE_CHARS,
    MAX_LIFETIME_SECONDS,
    GrantRequest,
    TokenClient,
)
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy

SECRET = "cs_live+/ secret=&%"  # characters Basic must form-encode


@asynccontextmanager
async def authorization_server() -> AsyncIterator[tuple[str, TokenEndpoint]]:
    endpoint = TokenEndpoint(None, "", "", 3600)
    runner = web.AppRunner(create_app(endpoint))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", endpoint
    finally:
        await runner.cleanup()


def _run(
    scenario: Callable[[str, TokenEndpoint, TokenClient], Awaitable[None]],
    policy: NetworkPolicy | None = None,
) -> None:
    async def main() -> None:
        guard = policy or NetworkPolicy(["127.0.0.0/8"])
        # The proxy's own session: its resolver checks what a name resolves to.
        async with (
            authorization_server() as (url, endpoint),
            new_session(guard, tls_context()) as session,
        ):
            await scenario(url, endpoint, TokenClient(session, guard, True))

    asyncio.run(main())


def _register(endpoint: TokenEndpoint, client_id: str, method: str) -> None:
    from gatehouse_dev.token_endpoint import Client

    endpoint.clients[client_id] = Client(SECRET, method, 3600)


@pytest.mark.parametrize("method", ["basic", "body"])
def test_each_client_authentication_style_gets_a_token(method: str) -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        _register(endpoint, "crm", method)
        request = TokenRequest(
            url=f"{url}/token",
            client_id="crm",
            client_authentication=method,  # type: ignore[arg-type]
            parameters=(("audience", "https://api.example.com"),),
        )
        minted = await oauth2_tokens.mint(client, request, ("read", "write"), SECRET)
        assert minted.lifetime == 3600
        info = endpoint.issued[minted.value]
        assert (info["client"], info["scope"]) == ("crm", "read write")

    _run(scenario)


def test_the_wrong_style_is_refused_with_the_providers_words() -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        _register(endpoint, "crm", "body")
        request = TokenRequest(url=f"{url}/token", client_id="crm")
        with pytest.raises(ProxyError) as refused:
            await oauth2_tokens.mint(client, request, (), SECRET)
        assert refused.value.code == "token_endpoint_failed"
        assert "HTTP 401: invalid_client: this client authenticates with body" in str(refused.value)

    _run(scenario)


@pytest.mark.parametrize("method", ["basic", "body"])
def test_a_secret_echoed_in_error_description_is_scrubbed(method: str) -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(
            url=f"{url}/hostile/echo",
            client_id="crm",
            client_authentication=method,  # type: ignore[arg-type]
        )
        with pytest.raises(ProxyError) as refused:
            await oauth2_tokens.mint(client, request, (), SECRET)
        message = str(refused.value)
        assert "invalid_client: bad credentials" in message
        assert SECRET not in message
        assert "cs_live" not in message
        assert "[redacted]" in message
        # Nor in any form it was sent in: HTTP Basic's base64 of the form-encoded pair.
        assert not leaks(message.encode(), SECRET), message

    _run(scenario)


@pytest.mark.parametrize("method", ["basic", "body"])
@pytest.mark.parametrize(
    ("secret", "form"),
    [
        ("cs_live.plain-secret_0123", "as-is"),
        (SECRET, "hex"),
        (SECRET, "hex-upper"),
        (SECRET, "base64url"),
        ("Sx9+kQ/7vZ=m2Lp+Wr4/Tn8=", "base64url"),
    ],
)
def test_a_secret_echoed_in_the_error_code_is_scrubbed(method: str, secret: str, form: str) -> None:
    """The code is shown as the description is, and its grammar (letters, digits, _ . : -)
    lets a secret through as it is, in hex or in base64url."""

    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(
            url=f"{url}/hostile/echo-in-error={form}",
            client_id="crm",
            client_authentication=method,  # type: ignore[arg-type]
        )
        with pytest.raises(ProxyError) as refused:
            await oauth2_tokens.mint(client, request, (), secret)
        message = str(refused.value)
        # (base64url's last character, which the next byte would change too, may stay)
        assert message.startswith("the token endpoint refused the request (HTTP 401: [redacted]")
        assert not leaks(message.encode(), secret), message

    _run(scenario)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("redirect", "redirect (HTTP 302), which is refused"),
        ("huge", "answer is over 65,536 bytes"),
        ("expires=0", "expires_in is 0: the token is expired already"),
        ("expires=-1", "expires_in is -1"),
        ('expires="soon"', "expires_in is not a number"),
    ],
)
def test_an_endpoint_that_misbehaves_is_refused_with_a_reason(mode: str, said: str) -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(url=f"{url}/hostile/{mode}", client_id="crm")
        with pytest.raises(ProxyError, match=re.escape(said)):
            await oauth2_tokens.mint(client, request, (), SECRET)

    _run(scenario)


def test_a_token_over_the_size_bound_is_refused_with_its_size_and_the_bound() -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        largest = TokenRequest(url=f"{url}/hostile/size=8192", client_id="crm")
        assert len((await oauth2_tokens.mint(client, largest, (), SECRET)).value) == 8192
        over = TokenRequest(url=f"{url}/hostile/size=8193", client_id="crm")
        with pytest.raises(ProxyError) as refused:
            await oauth2_tokens.mint(client, over, (), SECRET)
        assert refused.value.code == "token_endpoint_failed"
        assert "access_token is 8,193 characters, over the 8,192" in refused.value.message
        # The installation's own bound (GATEHOUSE_MAX_TOKEN_CHARS).
        raised = replace(client, max_token_chars=16_384)
        assert len((await oauth2_tokens.mint(raised, over, (), SECRET)).value) == 8193

    _run(scenario)


def test_a_lifetime_of_ten_years_is_kept_a_day_at_most() -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(url=f"{url}/hostile/expires=10000000000", client_id="crm")
        minted = await oauth2_tokens.mint(client, request, (), SECRET)
        assert minted.lifetime == MAX_LIFETIME_SECONDS

    _run(scenario)


def test_an_answer_that_trickles_past_the_deadline_is_cut_off() -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(url=f"{url}/hostile/trickle", client_id="crm")
        started = time.monotonic()
        with pytest.raises(ProxyError, match="did not answer within 1s"):
            await oauth2_tokens.mint(client, request, (), SECRET, seconds=1.0)
        assert time.monotonic() - started < 3

    _run(scenario)


@pytest.mark.parametrize(
    "token_url",
    [
        "http://169.254.169.254/token",  # cloud metadata: refused before any packet is sent
        "http://[::ffff:169.254.169.254]/token",
        "http://localhost:9/token",  # a name that resolves to loopback
    ],
)
def test_a_token_url_at_a_denied_address_is_refused(token_url: str) -> None:
    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        request = TokenRequest(url=token_url, client_id="crm")
        with pytest.raises(ProxyError, match="address"):
            await oauth2_tokens.mint(client, request, (), SECRET)

    # The installation allows no private network here: loopback is denied too.
    _run(scenario, NetworkPolicy())


def test_http_token_urls_need_the_installations_leave() -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            client = TokenClient(session, NetworkPolicy(), allow_http=False)
            request = TokenRequest(url="http://auth.example.com/token", client_id="crm")
            with pytest.raises(ProxyError, match="must be https"):
                await oauth2_tokens.mint(client, request, (), SECRET)

    asyncio.run(main())


def _form(request: TokenRequest, secret: str) -> dict[str, Any]:
    sent = oauth2_tokens.token_request_form(request, ("a",), secret)
    return {**sent.form, **sent.headers}


def test_the_secret_is_in_the_header_or_the_body_never_both() -> None:
    basic = _form(TokenRequest(url="https://x/token", client_id="c"), "s")
    body = _form(
        TokenRequest(url="https://x/token", client_id="c", client_authentication="body"), "s"
    )
    assert "client_secret" not in basic
    assert basic["Authorization"] == "Basic Yzpz"
    assert body["client_secret"] == "s"
    assert "Authorization" not in body


def test_a_grants_scope_over_its_bound_is_refused() -> None:
    """The scope an endpoint says it granted is kept in every grant, in the namespace's share
    of the store: bounded where it is read."""

    async def scenario(url: str, endpoint: TokenEndpoint, client: TokenClient) -> None:
        def grant(size: int) -> GrantRequest:
            return GrantRequest(
                f"{url}/hostile/scope={size}",
                form={"grant_type": "refresh_token", "refresh_token": "r-0"},
                headers={},
                seconds=5,
                code="token_endpoint_failed",
                redact=Redactor(()),
            )

        largest = await client.post_for_grant(grant(MAX_GRANTED_SCOPE_CHARS))
        assert largest.scopes is not None
        assert len(" ".join(largest.scopes)) == MAX_GRANTED_SCOPE_CHARS
        with pytest.raises(ProxyError) as refused:
            await client.post_for_grant(grant(MAX_GRANTED_SCOPE_CHARS + 1))
        assert refused.value.code == "token_endpoint_failed"
        assert "scope is over 4,096 characters" in refused.value.message

    _run(scenario)
