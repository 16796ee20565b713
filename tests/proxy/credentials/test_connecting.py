"""The connect flow's steps on a proxy worker (``Connecting``), against a real redis-server: what a
link and a state bind, each taken once, counted to the namespace's share, and what the page is
answered when a step cannot be taken. The provider's side (consent, the code exchanged, the
grant kept and used) is end to end: tests/e2e/test_connect_flow.py and test_connect_browser.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from gatehouse_contract.connecting import LINK_SECONDS, GrantsAsked
from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_contract.routes import Authorization, ConnectionRoute, CredentialScope, TokenRequest
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.credentials.connecting import Connecting
from gatehouse_proxy.credentials.fleet_grants import AuthorizationRequired, FleetGrants
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.store.connect_store import ConnectStore
from gatehouse_proxy.store.grant_store import GrantStore
from gatehouse_proxy.store.shared_store import SharedStore
from gatehouse_proxy.store.shares import Shares, ShareSettings
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from gatehouse_proxy.viewers.assertions import Viewer
from tests.proxy.stores import quota_route, store_up

PAGE = "https://gatehouse.example.com"
REDIRECT = f"{PAGE}/ui/connect/callback"
ADA = Viewer("ada", "ada@example.com", "https://bi.example.com")


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing stored."""


def _route(scope: CredentialScope = "viewer", uid: str = "uid-sheets") -> ConnectionRoute:
    route = quota_route("team/sheets", uid)
    credential = route.credential.model_copy(
        update={
            "type": "oauth2AuthorizationCode",
            "token_request": TokenRequest(url="https://oauth.example.com/token", client_id="c1"),
            "scopes": ("sheets.read",),
            "authorization": Authorization(
                url="https://oauth.example.com/authorize?hd=example.com",
                parameters=(("access_type", "offline"),),
                credential_scope=scope,
            ),
        }
    )
    return route.model_copy(update={"credential": credential})


class Flow:
    def __init__(self, connecting: Connecting, store: SharedStore, shares: Shares) -> None:
        self.connecting = connecting
        self.store = store
        self.shares = shares
        self.routes: dict[str, ConnectionRoute] = {}


@asynccontextmanager
async def steps_on(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Flow]:
    keyring_path = tmp_path / "keyring.json"
    keyring_path.write_text(Keyring.generate("k1").dump())
    keyring = KeyringFile(keyring_path)
    store = await store_up(redis_server)
    shares = Shares(ShareSettings(namespace_keys=16))
    guard = NetworkPolicy([])
    async with new_session(guard, tls_context()) as session:
        grants = FleetGrants(GrantStore(store, shares), keyring, TokenClient(session, guard, True))
        routes: dict[str, ConnectionRoute] = {}
        connecting = Connecting(
            grants, ConnectStore(store, shares), keyring, PAGE, routes.get, record_ids=True
        )
        made = Flow(connecting, store, shares)
        made.routes = routes
        yield made
    await store.close()


def _refused() -> AuthorizationRequired:
    return AuthorizationRequired("the viewer's account is not connected")


def _link(flow: Flow, route: ConnectionRoute, viewer: Viewer = ADA) -> str:
    error = flow.connecting.required(_refused(), route, "team/DataApp/sales", viewer)
    assert error.code == "viewer_authorization_required"
    url = str(error.details["connectUrl"])
    assert url.startswith(f"{PAGE}/ui/connect#team.")
    return url.partition("#")[2]


async def _ask(steps: Flow, **fields: str) -> dict[str, object]:
    asked = GrantsAsked.model_validate({"id": "1", **fields})
    answered = await steps.connecting.answer(asked)
    return json.loads(answered.model_dump_json())  # type: ignore[no-any-return]


def test_a_link_begins_once_at_the_connections_authorization_url_with_pkce(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            link = _link(flow, route)
            begun = await _ask(flow, action="begin", flow=link, redirectUri=REDIRECT)
            assert begun["problem"] is None
            url = urlsplit(str(begun["authorizationUrl"]))
            assert (url.netloc, url.path) == ("oauth.example.com", "/authorize")
            query = parse_qs(url.query)
            # The connection's own query and parameters kept; the flow's own set last.
            assert query["hd"] == ["example.com"]
            assert query["access_type"] == ["offline"]
            assert query["response_type"] == ["code"]
            assert query["client_id"] == ["c1"]
            assert query["redirect_uri"] == [REDIRECT]
            assert query["scope"] == ["sheets.read"]
            assert query["code_challenge_method"] == ["S256"]
            assert len(query["code_challenge"][0]) == 43
            assert query["state"] == [begun["flow"]]
            assert (begun["connection"], begun["app"], begun["ownerLabel"]) == (
                "team/sheets",
                "team/DataApp/sales",
                "ada@example.com",
            )
            again = await _ask(flow, action="begin", flow=link, redirectUri=REDIRECT)
            assert again["problem"] == {
                "code": "connect_unknown",
                "message": "this connect link was used already, is over ten minutes old, or "
                "was never made: ask the app for a new one",
            }

    asyncio.run(scenario())


def test_a_state_finishes_once_and_only_at_the_redirect_uri_it_began_with(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            begun = await _ask(flow, action="begin", flow=_link(flow, route), redirectUri=REDIRECT)
            state = str(begun["flow"])
            elsewhere = await _ask(
                flow, action="finish", flow=state, code="c", redirectUri="https://evil.example/cb"
            )
            assert elsewhere["problem"] == {
                "code": "connect_failed",
                "message": "the callback came to another redirect URI than it began with",
            }
            # Spent by that try: a state is taken once, whatever the try's outcome.
            replayed = await _ask(flow, action="finish", flow=state, code="c", redirectUri=REDIRECT)
            assert replayed["problem"]["code"] == "connect_unknown"  # type: ignore[index]

    asyncio.run(scenario())


def test_a_connection_made_again_under_the_name_does_not_take_the_old_link(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            link = _link(flow, route)
            flow.routes[route.key] = _route(uid="uid-sheets-2")
            begun = await _ask(flow, action="begin", flow=link, redirectUri=REDIRECT)
            assert begun["problem"]["code"] == "connect_failed"  # type: ignore[index]
            assert "made again" in begun["problem"]["message"]  # type: ignore[index]

    asyncio.run(scenario())


def test_a_made_up_forged_moved_or_late_link_is_unknown(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            encrypted = _link(flow, route).partition(".")[2]
            tampered = encrypted[:-2] + ("AA" if encrypted[-2:] != "AA" else "BB")
            # Made up; tampered with; moved to another namespace (whose share would count it).
            for forged in ("team." + "A" * 43, f"team.{tampered}", f"other.{encrypted}"):
                begun = await _ask(flow, action="begin", flow=forged, redirectUri=REDIRECT)
                assert begun["problem"]["code"] == "connect_unknown"  # type: ignore[index]
            # Past its ten minutes.
            late = _link(flow, route)
            now = time.time()
            monkeypatch.setattr(time, "time", lambda: now + LINK_SECONDS + 1)
            begun = await _ask(flow, action="begin", flow=late, redirectUri=REDIRECT)
            assert begun["problem"]["code"] == "connect_unknown"  # type: ignore[index]
            monkeypatch.undo()
            begun = await _ask(flow, action="begin", flow=late, redirectUri=REDIRECT)
            assert begun["problem"] is None

    asyncio.run(scenario())


def test_an_app_asking_again_and_again_fills_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Each 401 carries a fresh link, encrypted, not stored: nothing is written until one is
    clicked."""

    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            links = {_link(flow, route) for _ in range(50)}
            assert len(links) == 50
            await flow.shares.read(flow.store, ["team"])
            assert "team" not in flow.shares.usage

    asyncio.run(scenario())


def test_connects_past_the_namespaces_share_are_refused_and_say_so(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.routes[route.key] = route
            # 16 keys a namespace: each begun connect holds two (its link's mark, its state).
            answers = []
            for n in range(9):
                link = _link(flow, route, Viewer(f"v{n}", "", ADA.issuer))
                answers.append(await _ask(flow, action="begin", flow=link, redirectUri=REDIRECT))
            assert [answer["problem"] for answer in answers[:8]] == [None] * 8
            assert answers[8]["problem"] == {
                "code": "connect_failed",
                "message": "the shared store did not keep the connect (the namespace's share is "
                "full)",
            }
            # Another namespace's connects are its own share's.
            other = quota_route("other/sheets", "uid-other")
            other = other.model_copy(update={"credential": _route().credential})
            flow.routes[other.key] = other
            error = flow.connecting.required(_refused(), other, "other/DataApp/x", ADA)
            link = str(error.details["connectUrl"]).partition("#")[2]
            begun = await _ask(flow, action="begin", flow=link, redirectUri=REDIRECT)
            assert begun["problem"] is None

    asyncio.run(scenario())


def test_a_viewer_of_a_shared_account_is_given_no_link_of_their_own(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            error = flow.connecting.required(_refused(), _route("shared"), "team/DataApp/s", ADA)
            assert error.details == {}
            assert error.message == _refused().message

    asyncio.run(scenario())


def test_the_shared_account_has_a_link_only_on_a_shared_connection(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            viewer_route = _route()
            flow.routes[viewer_route.key] = viewer_route
            linked = await _ask(flow, action="link", connection="team/sheets")
            assert linked["problem"]["code"] == "connect_failed"  # type: ignore[index]
            assert "each viewer connects" in linked["problem"]["message"]  # type: ignore[index]
            shared = _route("shared")
            flow.routes[shared.key] = shared
            linked = await _ask(flow, action="link", connection="team/sheets")
            begun = await _ask(flow, action="begin", flow=str(linked["flow"]), redirectUri=REDIRECT)
            assert begun["ownerLabel"] == "the shared account"
            assert begun["app"] == ""

    asyncio.run(scenario())


def test_without_a_page_url_the_401_has_no_link_and_says_why(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with steps_on(redis_server, tmp_path) as flow:
            route = _route()
            flow.connecting.page_url = ""
            error = flow.connecting.required(_refused(), route, "team/DataApp/sales", ADA)
            assert error.details == {}
            assert "operator.page.url" in error.message

    asyncio.run(scenario())
