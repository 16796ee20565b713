"""``gatehouse open``'s link in real headless Chromium, against the local stack: the page opens
signed in as the kubeconfig's user, the code never stays in the address bar, a cookie or the
server's logs, and the same link a second time signs nobody in."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_sign_in import code_of, gatehouse_open, kubeconfig_of, link_of, project

pytestmark = pytest.mark.e2e


def signed_in(context: BrowserContext, link: str, who: str) -> Page:
    """``gatehouse open``'s link in a new tab: whose link it is, named before anything is
    spent, then the click that signs in as them."""
    page = context.new_page()
    page.goto(link)
    page.wait_for_selector("#requester", state="visible")
    assert who in page.inner_text("#requester")
    page.click("#confirm")
    page.wait_for_url("**/ui/")
    assert who in page.inner_text(".who")
    return page


def refused_again(context: BrowserContext, link: str) -> None:
    """The same link a second time: used, and said so on the page."""
    again = context.new_page()
    again.goto(link)
    again.wait_for_selector(".error")
    assert "used already" in again.inner_text(".error")


def test_the_clis_one_time_link_opens_the_page_signed_in_once(
    browser: Browser, cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    members = project(cluster, stack, namespace)
    admin = members["admin"]
    link = link_of(gatehouse_open(kubeconfig_of(cluster, admin, tmp_path), namespace))
    code = code_of(link)
    context = browser.new_context()
    context.set_default_timeout(15_000)
    try:
        page = signed_in(context, link, admin.persona.name)
        page.goto(f"{stack.local.api_url}/ui/namespaces/{namespace}/connections")
        assert "vendor" in page.inner_text("#connections")
        # The code went in the fragment and was posted: no address, history entry or cookie
        # holds it, and the server's logs never saw it.
        visited = [page.url]
        while page.go_back() is not None and len(visited) < 10:
            visited.append(page.url)
        assert not [url for url in visited if code in url or "#code=" in url], visited
        for cookie in context.cookies():
            assert code.rsplit(":", 1)[1] not in cookie["value"]
        refused_again(context, link)
    finally:
        context.close()
    secret = code.rsplit(":", 1)[1]
    for log in (stack.local.workdir / "logs").glob("*.log"):
        assert secret not in log.read_text(errors="replace"), log.name


CLIENT_ID, CLIENT_SECRET = "gatehouse-page", "dev-client-secret-never-shown"


def test_sign_in_with_the_clusters_oidc_issuer_acts_as_the_mapped_user(
    browser: Browser, cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The dev issuer on 127.0.0.1 stands for the one the API server trusts: the page sends the
    visitor there (code + PKCE), verifies the ID token and acts as its email, as
    --oidc-username-claim=email maps it; RBAC grants that user in the namespace."""
    project(cluster, stack, namespace)
    issuer = stack.local.start_oidc_issuer(CLIENT_ID, CLIENT_SECRET)
    page_server = stack.local.start_page_server(
        read_only=False,
        settings={
            "GATEHOUSE_OIDC_ISSUER": issuer.url,
            "GATEHOUSE_OIDC_CLIENT_ID": CLIENT_ID,
            "GATEHOUSE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "GATEHOUSE_OIDC_NAME": "Dev SSO",
            "GATEHOUSE_OIDC_USERNAME_CLAIM": "email",
            "GATEHOUSE_OIDC_GROUPS_CLAIM": "groups",
        },
    )
    user = "alice@example.com"
    cluster.kubectl(
        "create", "rolebinding", "alice", "--clusterrole=gatehouse-admin", f"--user={user}",
        "-n", namespace,
    )  # fmt: skip
    context = browser.new_context()
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto(f"{page_server.url}/ui/sign-in")
        assert page.inner_text("#oidc") == "Sign in with Dev SSO"
        page.click("#oidc")
        page.wait_for_url(f"{issuer.url}/authorize?**")
        page.fill("#user", user)
        page.click("#allow")
        page.wait_for_url(f"{page_server.url}/ui/")
        assert user in page.inner_text(".who")
        page.goto(f"{page_server.url}/ui/namespaces/{namespace}/connections")
        assert "vendor" in page.inner_text("#connections")
        # A callback this browser did not start (or one replayed) signs nobody in.
        stranger = browser.new_context()
        try:
            replay = stranger.new_page()
            replay.goto(f"{page_server.url}/ui/sign-in/oidc/callback?code=x&state=y")
            assert "not started here" in replay.inner_text("#refusal")
            assert stranger.cookies() == []
        finally:
            stranger.close()
    finally:
        context.close()
    for log in (stack.local.workdir / "logs").glob("*.log"):
        assert CLIENT_SECRET not in log.read_text(errors="replace"), log.name
