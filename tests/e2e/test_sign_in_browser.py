"""``gatehouse open``'s link in real headless Chromium, against the local stack: the page opens
signed in as the kubeconfig's user, the code never stays in the address bar, a cookie or the
server's logs, and the same link a second time signs nobody in."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_sign_in import code_of, gatehouse_open, kubeconfig_of, link_of, project

pytestmark = pytest.mark.e2e


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
        page = context.new_page()
        page.goto(link)
        page.wait_for_url("**/ui/")
        assert admin.persona.name in page.inner_text(".who")
        page.goto(f"{stack.local.api_url}/ui/namespaces/{namespace}/connections")
        assert "vendor" in page.inner_text("#connections")
        # The code went in the fragment and was posted: no address, history entry or cookie
        # holds it, and the server's logs never saw it.
        assert code not in page.url
        page.go_back()
        page.go_back()
        assert page.url.endswith("/ui/sign-in/link"), page.url
        for cookie in context.cookies():
            assert code.rsplit(":", 1)[1] not in cookie["value"]
        # The same link again: used, and said so on the page.
        again = context.new_page()
        again.goto(link)
        again.wait_for_selector(".error")
        assert "used already" in again.inner_text(".error")
    finally:
        context.close()
    secret = code.rsplit(":", 1)[1]
    for log in (stack.local.workdir / "logs").glob("*.log"):
        assert secret not in log.read_text(errors="replace"), log.name
