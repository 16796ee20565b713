"""The connect flow end to end, without a browser (test_connect_browser drives Chromium): an app's
401 with the viewer's connect link, the operator's page spending it and sending the browser to
the dev authorization server, scripted consent, the callback bound to the browser's cookie, and
the app's retry answered with the viewer's own token; then the hostile ways in: a link used
twice, a state replayed or finished in another browser, a code replayed, a token endpoint that
echoes what it was sent, and a disconnect through the app (a link past its time, forged or moved
to another namespace: tests/proxy/credentials/test_connecting.py).

Two proxy replicas of two workers (test_viewer_grants' fleet) answer the page's steps on the
table channel: a link minted by one is spent through another, as it would be in a fleet.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gatehouse_contract.connecting import CALLBACK_PATH
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.consent import Browser
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import fetch
from tests.e2e.test_viewer_grants import ASSERTION, Connected, Fleet, _connected, _stats
from tests.e2e.test_viewer_grants import fleet as fleet

pytestmark = pytest.mark.e2e


def _asked_to_connect(fleet: Fleet, connected: Connected, sub: str, replica: int = 0) -> str:
    app = f"{connected.namespace}/DataApp/sales"
    sent = {ASSERTION: fleet.assertion(app, sub)}
    answer = fetch(
        fleet.replicas[replica].url, connected.token, "sheets", "/api/rows", headers=sent
    )
    assert answer.status_code == 401, answer.text
    error = answer.json()["error"]
    assert error["code"] == "viewer_authorization_required", error
    link: str = error["connectUrl"]
    return link


def _fetched_as(fleet: Fleet, connected: Connected, sub: str, replica: int = 1) -> httpx.Response:
    app = f"{connected.namespace}/DataApp/sales"
    sent = {ASSERTION: fleet.assertion(app, sub)}
    return fetch(fleet.replicas[replica].url, connected.token, "sheets", "/api/rows", headers=sent)


def _callback_uri(stack: Stack) -> str:
    return f"{stack.local.api_url}{CALLBACK_PATH}"


def test_a_viewer_connects_through_the_apps_link_and_the_retry_carries_their_own_token(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer", redirect=_callback_uri(stack))
    link = _asked_to_connect(fleet, connected, "ada")
    browser = Browser(stack.local.api_url)
    begun = browser.begin(link)
    assert begun.status_code == 200, begun.text
    # Whose account this connects, said before the browser goes on.
    assert "for ada" in begun.text
    assert f"{namespace}/DataApp/sales" in begun.text
    authorization = urlsplit(Browser.provider(begun))
    query = parse_qs(authorization.query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["redirect_uri"] == [_callback_uri(stack)]
    assert query["client_id"] == [connected.client.token_request.client_id]
    done = browser.callback(browser.consent(Browser.provider(begun), "ada"))
    assert done.status_code == 200, done.text
    assert "Connected" in done.text
    assert f"{namespace}/sheets" in done.text
    # The app's retry, on the other replica: the viewer's own account.
    answer = _fetched_as(fleet, connected, "ada")
    assert answer.status_code == 200, answer.text
    assert answer.json()["user"] == "ada"
    # Another viewer has no grant of ada's: asked to connect their own.
    assert _asked_to_connect(fleet, connected, "bob", replica=1) != link

    # The link again: spent.
    again = Browser(stack.local.api_url).begin(link)
    assert again.status_code == 410, again.text
    assert "used already" in again.text


def test_a_state_replayed_or_finished_in_another_browser_connects_nothing(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer", redirect=_callback_uri(stack))
    # Mallory begins a connect with her own link and sends her authorization URL to ada: ada's
    # browser lacks the cookie, so ada's consent connects nothing to mallory.
    mallory = Browser(stack.local.api_url)
    begun = mallory.begin(_asked_to_connect(fleet, connected, "mallory"))
    assert begun.status_code == 200, begun.text
    lured = mallory.consent(Browser.provider(begun), "ada")
    ada = Browser(stack.local.api_url)
    ada.begin(_asked_to_connect(fleet, connected, "ada"))  # her own flow's cookie
    refused = ada.callback(lured)
    assert refused.status_code == 400, refused.text
    assert "not begun in this browser" in refused.text
    assert _fetched_as(fleet, connected, "mallory").status_code == 401
    # No cookie at all: the same.
    assert Browser(stack.local.api_url).callback(lured).status_code == 400

    # The rightful callback works once; replayed (the same state, code and cookie), it is spent.
    finished = mallory.callback(lured)
    assert finished.status_code == 200, finished.text
    replayed = mallory.callback(lured)
    assert replayed.status_code == 410, replayed.text
    assert "finished already" in replayed.text

    # A code replayed under a fresh state: the provider refuses it (codes are single-use), and
    # the grant kept stays mallory's first.
    fresh = Browser(stack.local.api_url)
    second = fresh.begin(_asked_to_connect(fleet, connected, "eve"))
    assert second.status_code == 200, second.text
    state = parse_qs(urlsplit(Browser.provider(second)).query)["state"][0]
    code = parse_qs(urlsplit(lured).query)["code"][0]
    reused = fresh.callback(f"{_callback_uri(stack)}?code={code}&state={state}")
    assert reused.status_code == 502, reused.text
    assert code not in reused.text
    assert _fetched_as(fleet, connected, "eve").status_code == 401


def test_a_token_endpoint_echoing_the_code_and_secret_shows_neither(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(
        cluster,
        stack,
        namespace,
        "viewer",
        redirect=_callback_uri(stack),
        endpoint_path="/hostile/echo",
    )
    browser = Browser(stack.local.api_url)
    begun = browser.begin(_asked_to_connect(fleet, connected, "ada"))
    assert begun.status_code == 200, begun.text
    callback = browser.consent(Browser.provider(begun), "ada")
    code = parse_qs(urlsplit(callback).query)["code"][0]
    answer = browser.callback(callback)
    assert answer.status_code == 502, answer.text
    assert "invalid_client" in answer.text
    assert code not in answer.text
    assert connected.client.secret not in answer.text
    for log in (stack.local.workdir / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        assert code not in text, log.name
        assert connected.client.secret not in text, log.name


def test_a_viewer_disconnects_through_the_app_and_the_refresh_token_is_revoked(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer", redirect=_callback_uri(stack))
    for sub in ("ada", "bob"):
        done = Browser(stack.local.api_url).connect(_asked_to_connect(fleet, connected, sub), sub)
        assert done.status_code == 200, done.text
    app = f"{namespace}/DataApp/sales"
    url = f"{fleet.replicas[0].url}/v1/grants/sheets"
    headers = {"Authorization": f"Bearer {connected.token}"}
    # Without the viewer's assertion: whose grant is not known, and nothing is dropped.
    refused = httpx.delete(url, headers=headers, timeout=10)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "viewer_assertion_missing"
    revoked_before = _stats(stack)["revokedGrants"]
    as_ada = {**headers, ASSERTION: fleet.assertion(app, "ada")}
    gone = httpx.delete(url, headers=as_ada, timeout=10)
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"disconnected": True}
    assert _stats(stack)["revokedGrants"] == revoked_before + 1
    # Ada is asked to connect again; bob is still served as himself.
    assert _asked_to_connect(fleet, connected, "ada", replica=1).startswith(stack.local.api_url)
    served = _fetched_as(fleet, connected, "bob", replica=0)
    assert served.status_code == 200, served.text
    assert served.json()["user"] == "bob"
    again = httpx.delete(url, headers=as_ada, timeout=10)
    assert again.json() == {"disconnected": False}
