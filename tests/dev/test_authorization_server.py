"""The dev authorization server's authorization code grant (gatehouse_dev.authorization_code),
served on 127.0.0.1 by the token endpoint's own app: consent, PKCE, single-use codes, rotating
refresh tokens with reuse detection and the reuse interval, RFC 7009 revocation."""

from __future__ import annotations

import ast
import asyncio
import base64
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp.test_utils import TestServer

from gatehouse_dev.token_endpoint import TokenEndpoint, create_app
from tests.node.pods import DEV_PACKAGE, TOKEN_ENDPOINT_MODULES

REDIRECT = "http://127.0.0.1:9/callback"
SECRET = "cs_" + "s" * 24


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.decode().rstrip("=")


class Server:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def register(self, client: str = "app", **settings: Any) -> None:
        body = {"id": client, "secret": SECRET, "method": "body", "redirectUris": [REDIRECT]}
        async with self.session.post(f"{self.base}/clients", json=body | settings) as reply:
            assert reply.status == 200

    async def authorize(self, **query: str) -> aiohttp.ClientResponse:
        params = {
            "response_type": "code",
            "client_id": "app",
            "redirect_uri": REDIRECT,
            "scope": "read",
            "state": "st-1",
        } | query
        async with self.session.get(
            f"{self.base}/authorize", params=params, allow_redirects=False
        ) as reply:
            await reply.read()
            return reply

    async def code(self, challenge: str, user: str = "ada") -> str:
        reply = await self.authorize(
            code_challenge=challenge, code_challenge_method="S256", consent="approve", user=user
        )
        assert reply.status == 302
        query = parse_qs(urlsplit(reply.headers["Location"]).query)
        assert query["state"] == ["st-1"]
        return query["code"][0]

    async def token(self, **form: str) -> tuple[int, dict[str, Any]]:
        body = {"client_id": "app", "client_secret": SECRET} | form
        async with self.session.post(f"{self.base}/token", data=body) as reply:
            return reply.status, await reply.json()

    async def connect(self, user: str = "ada") -> dict[str, Any]:
        verifier, challenge = _pkce()
        code = await self.code(challenge, user)
        status, answer = await self.token(
            grant_type="authorization_code",
            code=code,
            redirect_uri=REDIRECT,
            code_verifier=verifier,
        )
        assert status == 200, answer
        return answer

    async def refresh(self, refresh_token: str) -> tuple[int, dict[str, Any]]:
        return await self.token(grant_type="refresh_token", refresh_token=refresh_token)

    async def api(self, token: str) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}"}
        async with self.session.get(f"{self.base}/api/me", headers=headers) as reply:
            return reply.status, await reply.json()

    async def stats(self) -> dict[str, Any]:
        async with self.session.get(f"{self.base}/stats") as reply:
            answer: dict[str, Any] = await reply.json()
            return answer


def _run(scenario: Callable[[Server], Awaitable[None]]) -> None:
    async def main() -> None:
        server = TestServer(create_app(TokenEndpoint(None, "", "", 60)), host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as session:
                await scenario(Server(session, str(server.make_url("")).rstrip("/")))
        finally:
            await server.close()

    asyncio.run(main())


def test_the_consent_page_approves_and_denies_by_its_buttons() -> None:
    async def scenario(server: Server) -> None:
        await server.register()
        _, challenge = _pkce()
        page = await server.authorize(code_challenge=challenge, code_challenge_method="S256")
        assert page.status == 200
        async with server.session.get(
            f"{server.base}/authorize",
            params={
                "response_type": "code",
                "client_id": "app",
                "redirect_uri": REDIRECT,
                "state": "st-1",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            },
        ) as reply:
            text = await reply.text()
        assert ">Approve</button>" in text
        assert ">Deny</button>" in text
        request_id = text.split('name="request" value="')[1].split('"')[0]
        decision = {"request": request_id, "decision": "approve", "user": "ada"}
        async with server.session.post(
            f"{server.base}/authorize", data=decision, allow_redirects=False
        ) as reply:
            assert reply.status == 302
            assert "code=" in reply.headers["Location"]
            assert "state=st-1" in reply.headers["Location"]
        # The request is answered once.
        async with server.session.post(
            f"{server.base}/authorize", data=decision, allow_redirects=False
        ) as reply:
            assert reply.status == 400
        denied = await server.authorize(
            code_challenge=challenge, code_challenge_method="S256", consent="deny"
        )
        assert "error=access_denied" in denied.headers["Location"]

    _run(scenario)


def test_pkce_s256_is_required_and_an_unregistered_redirect_is_never_followed() -> None:
    async def scenario(server: Server) -> None:
        await server.register()
        _, challenge = _pkce()
        for query in (
            {"consent": "approve"},
            {"code_challenge": challenge, "code_challenge_method": "plain", "consent": "approve"},
            {"code_challenge": "short", "code_challenge_method": "S256", "consent": "approve"},
        ):
            reply = await server.authorize(**query)
            assert reply.status == 302
            assert "error=invalid_request" in reply.headers["Location"], query
        elsewhere = await server.authorize(
            code_challenge=challenge,
            code_challenge_method="S256",
            consent="approve",
            redirect_uri="http://127.0.0.1:9/callback/other",
        )
        assert elsewhere.status == 400
        assert "Location" not in elsewhere.headers

    _run(scenario)


def test_a_code_is_bound_to_its_verifier_and_redirect_and_used_once() -> None:
    async def scenario(server: Server) -> None:
        await server.register()
        verifier, challenge = _pkce()
        code = await server.code(challenge)
        exchange = {"grant_type": "authorization_code", "code": code}
        status, answer = await server.token(
            **exchange, redirect_uri=REDIRECT, code_verifier=_pkce()[0]
        )
        assert (status, answer["error"]) == (400, "invalid_grant")
        status, answer = await server.token(
            **exchange, redirect_uri=REDIRECT + "x", code_verifier=verifier
        )
        assert (status, answer["error"]) == (400, "invalid_grant")
        status, tokens = await server.token(
            **exchange, redirect_uri=REDIRECT, code_verifier=verifier
        )
        assert status == 200
        assert tokens["refresh_token"]
        assert tokens["expires_in"] == 60
        assert await server.api(tokens["access_token"]) == (200, await _echo(server, tokens))
        # Replayed: refused, and what the first use got is revoked.
        status, answer = await server.token(
            **exchange, redirect_uri=REDIRECT, code_verifier=verifier
        )
        assert (status, answer["error"]) == (400, "invalid_grant")
        assert (await server.api(tokens["access_token"]))[0] == 401
        assert (await server.stats())["revokedGrants"] == 1

    _run(scenario)


async def _echo(server: Server, tokens: dict[str, Any]) -> dict[str, Any]:
    _, echo = await server.api(tokens["access_token"])
    assert echo["user"] == "ada"
    assert echo["client"] == "app"
    return echo


def test_a_rotated_refresh_token_used_again_revokes_the_whole_grant() -> None:
    async def scenario(server: Server) -> None:
        await server.register()
        first = await server.connect()
        status, second = await server.refresh(first["refresh_token"])
        assert status == 200
        assert second["refresh_token"] != first["refresh_token"]
        status, third = await server.refresh(second["refresh_token"])
        assert status == 200
        status, answer = await server.refresh(first["refresh_token"])
        assert (status, answer["error"]) == (400, "invalid_grant")
        # Every token of the grant is dead: the newest refresh token, the access tokens.
        assert (await server.refresh(third["refresh_token"]))[0] == 400
        assert (await server.api(third["access_token"]))[0] == 401
        stats = await server.stats()
        assert (stats["reuseDetections"], stats["revokedGrants"], stats["refreshes"]) == (1, 1, 2)
        (grant,) = stats["grants"].values()
        assert grant == {"client": "app", "user": "ada", "refreshes": 2, "revoked": True}

    _run(scenario)


def test_within_the_reuse_interval_the_previous_refresh_token_answers_the_same_pair() -> None:
    async def scenario(server: Server) -> None:
        await server.register(refreshReuseSeconds=0.5)
        first = await server.connect()
        _, second = await server.refresh(first["refresh_token"])
        status, again = await server.refresh(first["refresh_token"])
        assert status == 200
        assert again == second
        await asyncio.sleep(0.6)
        assert (await server.refresh(first["refresh_token"]))[0] == 400
        assert (await server.stats())["reuseDetections"] == 1

    _run(scenario)


def test_the_refresh_delay_holds_the_answer_after_the_rotation_is_made() -> None:
    async def scenario(server: Server) -> None:
        await server.register(refreshDelaySeconds=0.3, refreshReuseSeconds=5)
        first = await server.connect()
        started = time.monotonic()
        slow = asyncio.ensure_future(server.refresh(first["refresh_token"]))
        await asyncio.sleep(0.1)
        assert (await server.stats())["refreshes"] == 1  # rotated before it answers
        status, _ = await slow
        assert status == 200
        assert time.monotonic() - started >= 0.3

    _run(scenario)


def test_rfc_7009_revocation_revokes_the_grant_of_the_token() -> None:
    async def scenario(server: Server) -> None:
        await server.register()
        await server.register("other")
        tokens = await server.connect()
        form = {"token": tokens["refresh_token"], "token_type_hint": "refresh_token"}
        # Another client's revocation is answered 200, as the RFC says, and revokes nothing.
        other = {"client_id": "other", "client_secret": SECRET}
        async with server.session.post(f"{server.base}/revoke", data=form | other) as reply:
            assert reply.status == 200
        assert (await server.api(tokens["access_token"]))[0] == 200
        mine = {"client_id": "app", "client_secret": SECRET}
        async with server.session.post(f"{server.base}/revoke", data=form | mine) as reply:
            assert reply.status == 200
        assert (await server.api(tokens["access_token"]))[0] == 401
        assert (await server.refresh(tokens["refresh_token"]))[0] == 400
        assert (await server.stats())["revokedGrants"] == 1

    _run(scenario)


def test_the_pods_modules_import_no_other_dev_module() -> None:
    """The node tests run token_endpoint and authorization_code in a Pod as a package of their
    own (tests/node/pods.py): an import of another gatehouse_dev module would fail there."""
    shipped = {f"gatehouse_dev.{name.removesuffix('.py')}" for name in TOKEN_ENDPOINT_MODULES}
    for name in TOKEN_ENDPOINT_MODULES:
        tree = ast.parse(Path(DEV_PACKAGE / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gatehouse"):
                assert node.module in shipped, (name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("gatehouse"), (name, alias.name)
