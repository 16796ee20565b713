"""The connection page's "Cache" section in real headless Chromium (issue 51): the settings in
people's units for whoever may see the connection, and the purge button, with the page's CSRF
token, only for who may update it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import apply, connection, get, project_members, wait_condition
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_connections_page import visit as visit

pytestmark = pytest.mark.e2e


def test_an_admin_purges_the_cache_from_the_page_and_a_builder_sees_only_the_settings(
    browser: Browser, visit: Any, cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project_members(cluster, namespace)
    cache = {"ttlSeconds": 60, "maxTTLSeconds": 5_400, "staleIfErrorSeconds": 86_400}
    apply(cluster, namespace, connection("vendor", stack.upstream, {"type": "none"}, cache=cache))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    path = f"/ui/namespaces/{namespace}/connections/vendor"

    builder = visit(members["builder"]).open(path)
    settings = builder.inner_text("#cache-settings")
    for shown in ("1 min unless the API says otherwise", "1 h 30 min", "256 KiB", "1 day"):
        assert shown in settings
    assert "each app its own answers" in settings
    assert builder.inner_text("#cache-purged") == "Last purge: never"
    assert builder.locator("#purge-cache").count() == 0

    admin = visit(members["admin"])
    admin.open(path)
    admin.submit("#purge-cache")
    notice = admin.page.inner_text(".notice")
    assert notice.startswith("Purged: answers cached before ")
    body = get(cluster, namespace, "externalconnection/vendor") or {}
    purged_at = body["metadata"]["annotations"]["gatehouse.dev/cache-purged-at"]
    assert purged_at in notice
    assert admin.page.inner_text("#cache-purged") == f"Last purge: {purged_at}"
    # A builder's own post of the form, with a CSRF token of their own: RBAC still says no.
    refused = visit(members["builder"])
    refused.open(path)
    answer = refused.post(f"{path}/cache/purge", {})
    assert answer.status == 403
    assert "may not update externalconnections/vendor" in answer.text()
