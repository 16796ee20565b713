"""The connect flow in real headless Chromium: the app's 401 with the link, the link's page, the
dev authorization server's consent page, the callback, and the app's retry answered with the
viewer's own token; then the connection's page as its admin sees it (how many connected, revoke),
and a shared account connected by the admin from that page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import project_members
from tests.e2e.test_connect_flow import _asked_to_connect, _callback_uri, _fetched_as
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_connections_page import visit as visit
from tests.e2e.test_viewer_grants import Fleet, _connected, _stats
from tests.e2e.test_viewer_grants import fleet as fleet

pytestmark = pytest.mark.e2e


def test_a_viewer_connects_in_the_browser_and_the_admin_sees_and_revokes_it(
    browser: Browser, visit: Any, cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "viewer", redirect=_callback_uri(stack))
    link = _asked_to_connect(fleet, connected, "ada")
    context = browser.new_context()
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto(link)
        page.wait_for_selector("#continue")
        # The link's id left the address bar before anything was spent.
        assert "#" not in page.url
        page.click("#continue")
        # Whose account this connects, before anything goes to the provider.
        page.wait_for_selector("#whose")
        assert "for ada" in page.inner_text("#whose")
        page.click("#provider")
        page.wait_for_url(f"{stack.token_endpoint}/authorize?**")
        page.fill("input[name=user]", "ada")
        page.click("button[value=approve]")
        page.wait_for_url(f"{_callback_uri(stack)}?**")
        assert f"{namespace}/sheets" in page.inner_text("#connected")
        # The code and state stay nowhere the browser keeps: the callback's cookie is gone.
        assert not [c for c in context.cookies() if c["name"] == "__Host-gatehouse-connect"]
        # The same link again, in the same browser: spent.
        page.goto(link)
        page.click("#continue")
        page.wait_for_selector(".error")
        assert "used already" in page.inner_text(".error")
    finally:
        context.close()
    answer = _fetched_as(fleet, connected, "ada")
    assert answer.status_code == 200, answer.text
    assert answer.json()["user"] == "ada"

    # The connection's admin: one account, ada's, with its revoke button.
    admin = visit(project_members(cluster, namespace)["admin"])
    shown = admin.open(f"/ui/namespaces/{namespace}/connections/sheets")
    assert "1 account connected" in shown.inner_text("#grants-count")
    assert "ada" in shown.inner_text("#grants-list")
    assert shown.inner_text("#redirect-uri") == _callback_uri(stack)
    revoked = _stats(stack)["revokedGrants"]
    admin.submit("#grants-list button")
    assert "Revoked the account." in admin.page.inner_text(".notice")
    assert "0 accounts connected" in admin.page.inner_text("#grants-count")
    assert _stats(stack)["revokedGrants"] == revoked + 1
    assert _fetched_as(fleet, connected, "ada").status_code == 401


def test_an_admin_connects_the_shared_account_from_the_connections_page(
    browser: Browser, visit: Any, cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    connected = _connected(cluster, stack, namespace, "shared", redirect=_callback_uri(stack))
    members = project_members(cluster, namespace)
    # A builder sees the connection, not its connected accounts.
    builder = visit(members["builder"])
    assert (
        builder.open(f"/ui/namespaces/{namespace}/connections/sheets").query_selector("#grants")
        is None
    )
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/sheets")
    assert "0 accounts connected" in page.inner_text("#grants-count")
    page.click("#connect-shared")
    page.wait_for_selector("#continue")
    page.click("#continue")
    assert "the shared account" in page.inner_text("#whose")
    page.click("#provider")
    page.wait_for_url(f"{stack.token_endpoint}/authorize?**")
    page.fill("input[name=user]", "team-sheets")
    page.click("button[value=approve]")
    page.wait_for_url(f"{_callback_uri(stack)}?**")
    assert "the shared account" in page.inner_text("#connected")
    # Every viewer is now served as the shared account, with no assertion needed.
    for replica in fleet.replicas:
        answer = httpx.get(
            f"{replica.url}/v1/fetch/sheets/api/rows",
            headers={"Authorization": f"Bearer {connected.token}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["user"] == "team-sheets"
    shown = admin.open(f"/ui/namespaces/{namespace}/connections/sheets")
    assert "1 account connected" in shown.inner_text("#grants-count")
