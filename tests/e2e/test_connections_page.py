"""The "Data app connections" page in real headless Chromium, against the real control plane.

Every page a test visits is checked for the canary secret and the visitor's Kubernetes token; the
browser's cookies and storage and the server's logs are checked at the end of each test.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.sync_api import (
    APIResponse,
    Browser,
    BrowserContext,
    Dialog,
    Page,
    Playwright,
    sync_playwright,
)

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import free_port
from gatehouse_dev.services import Endpoint
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.keys.sealed_values import SealedValue
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Member,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    get,
    grant_secrets,
    project_members,
    register_client,
    secret,
    wait_condition,
    wait_settled,
)

pytestmark = pytest.mark.e2e

CANARY = "canary-7f3a9c1e-never-shown"
# `make screenshots` points this at docs/screenshots, which docs/concepts/connections-page.md
# shows; a plain test run keeps them out of the work tree.
SCREENSHOTS = Path(
    os.environ.get("GATEHOUSE_SCREENSHOTS_DIR")
    or Path(__file__).parents[2] / ".gatehouse" / "screenshots"
)


# Module-scoped: Playwright's sync API keeps an event loop running in this thread while it is
# started, and the other modules' tests start loops of their own.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium, "the browser tests need Debian's chromium: `make test` installs it"
    # Chromium's sandbox needs user namespaces that a root CI shell does not give it.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    found = playwright.chromium.launch(executable_path=chromium, args=args)
    yield found
    found.close()


class Visit:
    """A browser context of one visitor; every page it shows is checked for secrets."""

    def __init__(self, context: BrowserContext, base: str, secrets: list[str]) -> None:
        self.context = context
        self.base = base
        self.secrets = secrets
        self.page = context.new_page()
        self.dialogs: list[str] = []
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: str) -> Page:
        self.page.goto(self.base + path)
        self.check()
        return self.page

    def check(self) -> None:
        html = self.page.content()
        for secret_value in self.secrets:
            assert secret_value not in html
        stored = self.page.evaluate(
            "() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"
        )
        for secret_value in self.secrets:
            assert secret_value not in stored
        for cookie in self.context.cookies():
            for secret_value in self.secrets:
                assert secret_value not in cookie["value"]

    def post(self, path: str, fields: dict[str, str]) -> APIResponse:
        """A form posted outside the page's own forms, with the visitor's CSRF token from the page
        shown now, from this origin: what only RBAC and the page's own rules still stop."""
        csrf = self.page.get_attribute("input[name=csrf]", "value") or ""
        return self.page.request.post(
            self.base + path, form={"csrf": csrf, **fields}, headers={"Origin": self.base}
        )

    def submit(self, selector: str) -> Page:
        self.page.click(selector)
        self.page.wait_for_load_state()
        self.check()
        return self.page


@pytest.fixture
def visit(browser: Browser, stack: Stack) -> Iterator[Any]:
    contexts: list[BrowserContext] = []
    tokens: list[str] = []

    def open_as(member: Member | None, *, base: str = "", via_proxy: bool = False) -> Visit:
        headers = member.headers() if member and via_proxy else {}
        context = browser.new_context(
            extra_http_headers=headers, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        secrets = [CANARY, *([member.token] if member else [])]
        tokens.extend(secrets)
        visitor = Visit(context, base or stack.local.api_url, secrets)
        if member and not via_proxy:
            page = visitor.open("/ui/sign-in")
            page.fill("textarea[name=token]", member.token)
            visitor.submit("button[type=submit]")
            assert page.url.endswith("/ui/"), page.url
        return visitor

    yield open_as
    for context in contexts:
        context.close()
    for log in (stack.local.workdir / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        for secret_value in {CANARY, *tokens}:
            assert secret_value not in text, log.name


def project(cluster: Cluster, stack: Stack, namespace: str) -> dict[str, Member]:
    """Two connections, one per link policy, the canary as the stored secret; one DataApp."""
    apply(cluster, namespace, secret("vendor", **{"api-key": CANARY}))
    apply(
        cluster,
        namespace,
        connection(
            "open",
            stack.upstream,
            API_KEY_AUTH,
            displayName="Open vendor API",
            allowedMethods=["GET", "POST"],
            allowedPaths=["/echo"],
            instructions="Paginate with `?page=`.\n\n- one\n- two",
        ),
        connection(
            "locked",
            stack.upstream,
            API_KEY_AUTH,
            displayName="Locked API",
            linkPolicy="AdminsOnly",
        ),
        data_app("board", {}),
    )
    wait_condition(cluster, namespace, "externalconnection/open", "True")
    wait_condition(cluster, namespace, "externalconnection/locked", "True")
    return project_members(cluster, namespace)


def rows(page: Page) -> list[str]:
    return [
        row.get_attribute("data-name") or ""
        for row in page.query_selector_all("#connections tbody tr")
    ]


def test_a_signed_out_visitor_sees_nothing(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    project(cluster, stack, namespace)
    stranger = visit(None)
    for path in (
        f"/ui/namespaces/{namespace}/connections",
        f"/ui/namespaces/{namespace}/connections/open",
        "/ui/",
        "/",
    ):
        page = stranger.open(path)
        assert page.url.endswith("/ui/sign-in"), path
        assert "Open vendor API" not in page.content()
    page = stranger.open("/ui/sign-in")
    page.fill("textarea[name=token]", "not-a-token")
    stranger.submit("button[type=submit]")
    assert "did not accept this token" in page.inner_text(".error")
    assert stranger.context.cookies() == []


def test_an_admin_tests_a_connection_saves_a_sample_and_deletes_it(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections")
    assert rows(page) == ["locked", "open"]
    row = page.inner_text("#connections tr[data-name=open]")
    for shown in ("Ready", "apiKey", "yes", "Builders"):
        assert shown in row
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "connections-list.png"), full_page=True)

    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    assert page.inner_text("#instructions li") == "one"
    assert [o.inner_text() for o in page.query_selector_all("#test select option")] == [
        "GET",
        "POST",
    ]
    page.fill("#test input[name=path]", "echo/orders?page=1")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#verdict").startswith("Passed")
    assert page.inner_text("#status-code") == "200"
    assert "/echo/orders" in page.inner_text("#response-body")
    page.fill("#save-sample input[name=label]", "Orders, page 1")
    admin.submit("#save-sample button[type=submit]")
    assert page.inner_text(".notice") == "Saved sample “Orders, page 1”."
    assert page.inner_text("#samples h3") == "Orders, page 1"
    page.screenshot(path=str(SCREENSHOTS / "connection-detail.png"), full_page=True)

    # A failing test offers no save; a body that is not JSON is named.
    page.fill("#test input[name=path]", "/elsewhere")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#verdict").startswith("Failed — PathNotAllowed")
    assert page.query_selector("#save-sample") is None
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    page.select_option("#test select[name=method]", "POST")
    page.fill("#test textarea[name=body]", "{not json")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#refusal").startswith("body: not JSON")

    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    admin.submit("#samples button.danger")
    assert page.inner_text(".notice") == "Sample deleted."
    assert page.query_selector("#samples article") is None


def test_what_a_tester_typed_is_scrubbed_a_label_is_optional_and_a_cut_answer_is_named(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    page.fill("#test input[name=path]", "echo/orders?api_key=typed-by-the-tester&page=1")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#verdict").startswith("Passed")
    # The Request line shows what the ConnectionTest keeps: what was typed, scrubbed.
    assert "/echo/orders?api_key=[redacted]&page=1" in page.inner_text("dl.fields code")
    assert "typed-by-the-tester" not in page.content()
    # The label is optional, as in the reference.
    admin.submit("#save-sample button[type=submit]")
    assert page.inner_text(".notice").startswith("Saved sample open-"), page.inner_text(".notice")
    assert page.inner_text("#samples h3").startswith("Sample open-")

    # The wizard's Test step says when the answer was cut, as the detail page does.
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Big answers")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("button.step[value='go:access']")
    page.check("input[name=link_policy][value=Builders]")
    admin.submit("button.step[value='go:test']")
    page.fill("input[name=test_path]", "/big?bytes=20000")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed"), page.inner_text("#verdict")
    assert page.inner_text("#response-cut").startswith("The answer was cut: the first 4000")
    # A sample is asked for without a label.
    page.check("#save-sample")
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    notice = page.inner_text(".notice")
    assert notice.startswith("Created connection big-answers. Its sample is kept once test"), notice


def may_write_secrets(cluster: Cluster, namespace: str, member: str) -> None:
    """The wizard writes the Secret as the visitor, and the connection that uses it needs get on
    it (see grant_secrets)."""
    grant_secrets(cluster, namespace, member, "get,create,patch,delete")


def test_an_admin_creates_a_connection_through_the_wizard_tests_it_edits_and_deletes_it(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    may_write_secrets(cluster, namespace, "admin")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections")
    admin.submit("#new-connection")
    assert page.url.endswith(f"/ui/namespaces/{namespace}/new-connection")

    # 1. The API.
    page.fill("input[name=display_name]", "Payments API")
    page.fill("input[name=base_url]", stack.upstream)
    page.check("input[name=allowed_methods][value=POST]")
    page.fill("textarea[name=allowed_paths]", "/echo")
    admin.submit("#next")
    # 2. Authentication: the secret is write-only, and only ever travels sealed after this.
    # Sealed into the connection is the default where the installation can seal; this admin
    # keeps it in a Secret, the second way.
    # (Auth type none asks for no secret: its storage shows once a kind that has one is chosen.)
    page.select_option("select[name=auth_type]", "apiKey")
    assert page.is_checked("input[name=storage][value=sealed]")
    page.check("input[name=storage][value=secret]")
    page.fill("input[name=api_key_name]", "X-API-Key")
    page.fill("input[name=secret]", CANARY)
    admin.submit("#next")
    assert page.get_attribute("input[name=secret]", "value") in (None, "")
    # 3. Access.
    page.check("input[name=link_policy][value=Builders]")
    page.fill("textarea[name=instructions]", "Orders live under `/echo/orders`.")
    admin.submit("#next")
    assert "A secret is entered" in page.inner_text("#secret-state")
    # 4. Test this draft, before anything exists.
    page.fill("input[name=test_path]", "/echo/orders")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed"), page.inner_text("#verdict")
    assert page.inner_text("#status-code") == "200"
    echoed = json.loads(page.inner_text("#response-body"))
    assert echoed["headers"]["x-api-key"] == "[redacted]"
    seen = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    assert seen["headers"]["x-api-key"] == CANARY
    # Only the methods chosen in the API step are offered; after a pass, Save as sample.
    offered = page.eval_on_selector_all(
        "select[name=test_method] option", "options => options.map(o => o.textContent)"
    )
    assert offered == ["GET", "POST"]
    page.fill("#sample-label", "Orders, from the draft")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "wizard-test-step.png"), full_page=True)
    assert get(cluster, namespace, "externalconnection/payments-api") is None
    assert get(cluster, namespace, "secret/payments-api-credential") is None
    assert cluster.kubectl("get", "connectiontests", "-n", namespace, "-o", "name").stdout == ""
    # 5. Review: the YAML to commit, and the API server's dry run as the admin.
    admin.submit("#next")
    assert "accepts this connection" in page.inner_text("#dry-run")
    manifest = yaml.safe_load(page.inner_text("#yaml").split("---")[0])
    assert manifest["metadata"] == {"name": "payments-api", "namespace": namespace}
    assert manifest["spec"]["auth"]["secretRef"] == {
        "name": "payments-api-credential",
        "key": "token",
    }
    admin.submit("#save")
    assert page.url.split("?")[0].endswith("/connections/payments-api"), page.url
    notice = page.inner_text(".notice")
    assert notice.startswith(
        "Created connection payments-api. Its sample 'Orders, from the draft' is kept once test "
        "payments-api-"
    ), notice
    wait_condition(cluster, namespace, "externalconnection/payments-api", "True")
    stored = get(cluster, namespace, "externalconnection/payments-api") or {}
    assert stored["spec"]["allowedMethods"] == ["GET", "POST"]
    assert stored["spec"]["linkPolicy"] == "Builders"
    made = get(cluster, namespace, "secret/payments-api-credential") or {}
    assert made["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]

    # The draft's request, tested again on the saved connection, became its sample.
    def draft_sample() -> bool:
        listed = cluster.kubectl("get", "connectionsamples", "-n", namespace, "-o", "json")
        labels = [item["spec"]["label"] for item in json.loads(listed.stdout)["items"]]
        return "Orders, from the draft" in labels

    wait_for(draft_sample, timeout=30, what="the draft's sample")

    # Saved: tested like any connection, and a sample saved after the pass.
    page = admin.open(f"/ui/namespaces/{namespace}/connections/payments-api")
    page.fill("#test input[name=path]", "/echo/orders")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#verdict").startswith("Passed")
    page.fill("#save-sample input[name=label]", "Orders")
    admin.submit("#save-sample button[type=submit]")
    shown = page.eval_on_selector_all("#samples h3", "titles => titles.map(t => t.textContent)")
    assert sorted(shown) == ["Orders", "Orders, from the draft"], shown

    # Edit: the stored secret is kept when the field is left empty.
    admin.submit("#edit")
    assert page.input_value("input[name=display_name]") == "Payments API"
    page.fill("input[name=display_name]", "Payments API v2")
    admin.submit("button.step[value='go:auth']")
    assert "A secret is stored" in page.inner_text("#secret-state")
    admin.submit("button.step[value='go:test']")
    page.fill("input[name=test_path]", "/echo/v2")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed")
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.inner_text(".notice") == "Saved connection payments-api."
    assert page.inner_text("h1").startswith("Payments API v2")
    edited = get(cluster, namespace, "externalconnection/payments-api") or {}
    assert edited["spec"]["auth"] == stored["spec"]["auth"]
    kept = get(cluster, namespace, "secret/payments-api-credential") or {}
    assert kept["data"] == made["data"]

    # A new secret goes to a new Secret, which the connection switches to; the old one goes.
    admin.submit("#edit")
    admin.submit("button.step[value='go:auth']")
    page.fill("input[name=secret]", CANARY + "-rotated")
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.inner_text(".notice") == (
        "Saved connection payments-api. Its Secret payments-api-credential was deleted too."
    )
    rotated = (get(cluster, namespace, "externalconnection/payments-api") or {})["spec"]["auth"]
    new_secret = rotated["secretRef"]["name"]
    assert new_secret.startswith("payments-api-credential-"), rotated
    assert get(cluster, namespace, "secret/payments-api-credential") is None
    wait_settled(cluster, namespace, "externalconnection/payments-api")

    # Sealed into the connection from now on: the Secret the wizard made goes, and no other.
    admin.submit("#edit")
    admin.submit("button.step[value='go:auth']")
    page.check("input[name=storage][value=sealed]")
    page.fill("input[name=secret]", CANARY + "-sealed")
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.inner_text(".notice") == (
        f"Saved connection payments-api. Its Secret {new_secret} was deleted too."
    )
    sealed = (get(cluster, namespace, "externalconnection/payments-api") or {})["spec"]["auth"]
    assert "secretRef" not in sealed
    assert sealed["sealedSecret"].startswith("gh1.")
    assert get(cluster, namespace, f"secret/{new_secret}") is None
    wait_condition(cluster, namespace, "externalconnection/payments-api", "True")

    # Delete: the name typed to confirm (a Secret the wizard made would go with it).
    admin.submit("#edit")
    page.fill("#delete input[name=confirm]", "payments-api")
    admin.submit("#delete button[type=submit]")
    assert page.inner_text(".notice") == "Deleted connection payments-api."
    assert rows(page) == ["locked", "open"]
    assert get(cluster, namespace, "externalconnection/payments-api") is None
    assert get(cluster, namespace, f"secret/{new_secret}") is None


def test_an_admin_registers_an_oauth2_api_with_headers_quotas_and_a_sealed_client_secret(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    """The dev authorization server's API, as a platform team registers Salesforce or Graph:
    token URL, client id, scopes, client authentication and an extra parameter; the client
    secret sealed into the connection (bound to the token URL and client id); the vendor's
    headers, each row checked where it is typed; the content types and the credential's quotas.
    The exfiltration warning on Review and on the link form; an edit that moves the token URL
    asks for the secret again."""
    members = project(cluster, stack, namespace)
    client_id, client_secret = f"crm-{namespace}", f"{CANARY}-oauth2"
    register_client(stack.token_endpoint, client_id, client_secret, "body")
    token_url = f"{stack.token_endpoint}/token"
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")

    # 1. The API, with a header the proxy keeps for itself: its rule beside its row.
    page.fill("input[name=display_name]", "CRM")
    page.fill("input[name=base_url]", stack.token_endpoint)
    page.check("input[name=allowed_methods][value=POST]")
    names, values = (
        page.query_selector_all("input[name=header_name]"),
        page.query_selector_all("input[name=header_value]"),
    )
    assert len(names) == 2  # two empty rows; more on request
    names[0].fill("X-Forwarded-Host")
    values[0].fill("evil.example")
    names[1].fill("Notion-Version")
    values[1].fill("2022-06-28")
    page.fill("textarea[name=allowed_content_types]", "application/json")
    admin.submit("#more-headers")
    assert len(page.query_selector_all("input[name=header_name]")) == 4
    assert page.inner_text("#header-error-0").startswith(
        "headers[].name must not be a header the proxy or HTTP itself controls"
    )
    assert page.query_selector("#header-error-1") is None
    page.fill("#header-0 input[name=header_name]", "X-Api-Client")
    page.fill("#header-0 input[name=header_value]", "gatehouse")
    admin.submit("#next")
    assert page.query_selector("#header-error-0") is None
    # 2. Authentication: OAuth 2.0, the client secret sealed into the connection.
    page.select_option("select[name=auth_type]", "oauth2ClientCredentials")
    page.fill("input[name=token_url]", token_url)
    page.fill("input[name=client_id]", client_id)
    page.fill("textarea[name=oauth_scopes]", "crm.read")
    page.select_option("select[name=client_authentication]", "body")
    page.fill("textarea[name=token_parameters]", "audience=crm")
    page.fill("input[name=secret]", client_secret)
    page.check("input[name=storage][value=sealed]")
    admin.submit("#next")
    # 3. Access, with the credential's quotas.
    page.check("input[name=link_policy][value=Builders]")
    page.fill("input[name=connectionRequestsPerMinute]", "600")
    page.fill("input[name=requestsPerDay]", "10000")
    admin.submit("#next")
    # 4. The draft mints a token with the client secret, and sends the connection's headers.
    page.fill("input[name=test_path]", "/api/orders")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed"), page.inner_text("#verdict")
    seen = json.loads(page.inner_text("#response-body"))
    assert (seen["client"], seen["scope"]) == (client_id, "crm.read")
    assert seen["headers"]["x-api-client"] == "gatehouse"
    assert seen["headers"]["notion-version"] == "2022-06-28"
    assert seen["headers"]["authorization"].endswith("[redacted]")  # the minted token
    assert "ya29." not in page.inner_text("#response-body")
    # 5. Review: what linking it lets apps do, stronger with POST; the YAML with the sealed value.
    admin.submit("#next")
    assert "accepts this connection" in page.inner_text("#dry-run")
    warning = page.inner_text("#exfiltration-warning")
    assert warning == (
        "Apps linked to this connection can send any data they can query to "
        f"{stack.token_endpoint}. It allows POST: linked apps can also create, change or "
        "delete data there, with this connection's credential."
    )
    assert "strong" in (page.get_attribute("#exfiltration-warning", "class") or "")
    manifest = yaml.safe_load(page.inner_text("#yaml"))
    spec = manifest["spec"]
    assert spec["headers"] == [
        {"name": "X-Api-Client", "value": "gatehouse"},
        {"name": "Notion-Version", "value": "2022-06-28"},
    ]
    assert spec["allowedContentTypes"] == ["application/json"]
    assert spec["limits"] == {"connectionRequestsPerMinute": 600, "requestsPerDay": 10000}
    assert spec["auth"]["oauth2ClientCredentials"] == {
        "tokenURL": token_url,
        "clientId": client_id,
        "scopes": ["crm.read"],
        "clientAuthentication": "body",
        "parameters": {"audience": "crm"},
    }
    scope = SealedValue.parse(spec["auth"]["sealedSecret"]).scope
    assert (scope.token_url, scope.client_id) == (token_url, client_id)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "wizard-oauth2-review.png"), full_page=True)
    admin.submit("#save")
    assert page.inner_text(".notice") == "Created connection crm."
    wait_condition(cluster, namespace, "externalconnection/crm", "True", "Routed")

    # The detail page: the auth kind's settings, never the secret; headers, types, quotas.
    page = admin.open(f"/ui/namespaces/{namespace}/connections/crm")
    shown = page.inner_text("#auth")
    for expected in (
        "OAuth 2.0 client credentials", token_url, client_id, "crm.read", "in the form body",
        "audience=crm",
    ):  # fmt: skip
        assert expected in shown, (expected, shown)
    assert page.inner_text("#headers") == "X-Api-Client: gatehouse\nNotion-Version: 2022-06-28"
    assert page.inner_text("#content-types") == "application/json"
    limits = page.inner_text("#limits")
    assert "Requests per minute, all apps together 600" in limits
    assert "Requests per UTC day, all apps together 10,000" in limits
    assert "sealed into the connection" in page.inner_text("#secret")
    # Linking it: the warning on the form, and again once linked.
    assert page.inner_text("#link-warning") == warning
    page.fill("#link-form input[name=alias]", "crm")
    admin.submit("#link-form button[type=submit]")
    assert page.inner_text(".notice") == f"Linked crm to DataApp board as “crm”. {warning}"
    page = admin.open(f"/ui/namespaces/{namespace}/connections")
    assert page.inner_text("#link-warning").startswith(
        "Apps linked to a connection can send any data they can query to its origin; where it "
        "allows POST, PUT, PATCH or DELETE"
    )

    # An edit that moves the token URL does not take the sealed client secret along.
    page = admin.open(f"/ui/namespaces/{namespace}/connections/crm/edit")
    assert page.input_value("input[name=token_url]") == token_url
    assert [i.input_value() for i in page.query_selector_all("input[name=header_name]")][:2] == [
        "X-Api-Client",
        "Notion-Version",
    ]
    admin.submit("button.step[value='go:auth']")
    assert "A secret is stored" in page.inner_text("#secret-state")
    page.fill("input[name=token_url]", f"{stack.token_endpoint}/hostile/echo")
    admin.submit("button.step[value='go:review']")
    assert (
        "Secret: enter it again: the token URL changed, and a stored secret is kept only while "
        "the auth type, base URL, token URL and client id stay as they were"
    ) in page.inner_text("#errors")
    assert "sealedSecret" not in page.inner_text("#yaml")
    assert "The stored secret is not kept: the token URL changed" in page.inner_text(
        "#secret-state"
    )
    # Put back, it is kept again: saved with the stored value.
    admin.submit("button.step[value='go:auth']")
    page.fill("input[name=token_url]", token_url)
    page.fill("input[name=client_id]", f"{client_id}-other")
    admin.submit("button.step[value='go:review']")
    assert "the client id changed" in page.inner_text("#errors")
    admin.submit("button.step[value='go:auth']")
    page.fill("input[name=client_id]", client_id)
    admin.submit("button.step[value='go:review']")
    assert page.query_selector("#errors") is None
    stored = get(cluster, namespace, "externalconnection/crm") or {}
    admin.submit("#save")
    assert page.inner_text(".notice") == "Saved connection crm."
    saved = get(cluster, namespace, "externalconnection/crm") or {}
    assert saved["spec"]["auth"]["sealedSecret"] == stored["spec"]["auth"]["sealedSecret"]


def test_an_admin_declares_a_per_viewer_oauth2_api_with_a_sealed_client_secret(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    """OAuth 2.0 authorization code through the wizard, as a BI team declares each analyst's own
    Google Sheets: the endpoints, scopes, extra authorization parameters, whose account it is and
    the warning of a shared one; the client secret sealed for the token URL and client id. Saved,
    the connection is checked and kept, and says the proxies do not serve the kind yet; its page
    shows the kind's settings and no secret."""
    members = project(cluster, stack, namespace)
    token_url = f"{stack.token_endpoint}/token"
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Sheets")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    assert "A shared account is one person's login used for every viewer" in page.inner_text(
        "#credential-scope-warning"
    )
    page.select_option("select[name=auth_type]", "oauth2AuthorizationCode")
    page.fill("input[name=code_authorization_url]", f"{stack.token_endpoint}/authorize")
    page.fill("input[name=code_token_url]", token_url)
    page.fill("input[name=code_client_id]", "sheets")
    page.fill("textarea[name=code_scopes]", "sheets.read")
    # A parameter PKCE sets itself is named under its field's title.
    page.fill("textarea[name=code_parameters]", "code_challenge_method=plain")
    page.fill("input[name=secret]", f"{CANARY}-code")
    page.check("input[name=storage][value=sealed]")
    admin.submit("button.step[value='go:review']")
    assert (
        "Extra authorization parameters: auth.oauth2AuthorizationCode.authorizationParameters "
        "must not set a parameter OAuth 2.0 or PKCE sets itself"
    ) in page.inner_text("#errors")
    admin.submit("button.step[value='go:auth']")
    page.fill("textarea[name=code_parameters]", "access_type=offline")
    page.fill("input[name=code_revocation_url]", f"{stack.token_endpoint}/revoke")
    admin.submit("#next")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("#next")
    # A draft test calls as nobody: no viewer, so no viewer's grant to send.
    admin.submit("#try-draft")
    verdict = page.inner_text("#verdict")
    assert "this request names no viewer" in verdict, verdict
    admin.submit("button.step[value='go:review']")
    assert page.query_selector("#errors") is None, page.inner_text("#errors")
    assert "accepts this connection" in page.inner_text("#dry-run")
    spec = yaml.safe_load(page.inner_text("#yaml"))["spec"]
    assert spec["auth"]["oauth2AuthorizationCode"] == {
        "authorizationURL": f"{stack.token_endpoint}/authorize",
        "tokenURL": token_url,
        "clientId": "sheets",
        "scopes": ["sheets.read"],
        "authorizationParameters": {"access_type": "offline"},
        "clientAuthentication": "basic",
        "revocationURL": f"{stack.token_endpoint}/revoke",
        "credentialScope": "viewer",
    }
    scope = SealedValue.parse(spec["auth"]["sealedSecret"]).scope
    assert (scope.token_url, scope.client_id) == (token_url, "sheets")
    admin.submit("#save")
    assert page.inner_text(".notice") == "Created connection sheets."
    # Checked and kept, the secret opened, and routed.
    wait_condition(cluster, namespace, "externalconnection/sheets", "True", "Routed")
    conditions = {
        c["type"]: c
        for c in (get(cluster, namespace, "externalconnection/sheets") or {})["status"][
            "conditions"
        ]
    }
    assert conditions["CredentialReady"]["status"] == "True", conditions
    page = admin.open(f"/ui/namespaces/{namespace}/connections/sheets")
    shown = page.inner_text("#auth")
    for expected in (
        "OAuth 2.0 authorization code", "each viewer's own", f"{stack.token_endpoint}/authorize",
        token_url, "sheets.read", "access_type=offline", f"{stack.token_endpoint}/revoke",
        "PKCE (S256) always",
    ):  # fmt: skip
        assert expected in shown, (expected, shown)
    assert "exchanges and refreshes viewers' grants" in page.inner_text("#secret")


def test_basic_auth_through_the_wizard_stores_the_pair_and_asks_again_for_another_auth_type(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    may_write_secrets(cluster, namespace, "admin")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Reports")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    page.select_option("select[name=auth_type]", "basic")
    page.check("input[name=storage][value=secret]")
    page.fill("input[name=basic_user]", "reports")
    admin.submit("#next")
    assert "User name and password: enter both for basic authentication" in page.inner_text(
        "#errors"
    )
    admin.submit("button.step[value='go:auth']")
    assert page.input_value("input[name=basic_user]") == ""  # write-only, as the password
    page.fill("input[name=basic_user]", "reports")
    page.fill("input[name=secret]", CANARY)
    admin.submit("#next")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("button.step[value='go:test']")
    page.fill("input[name=test_path]", "/echo/basic")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed"), page.inner_text("#verdict")
    echoed = json.loads(page.inner_text("#response-body"))
    received = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    pair = base64.b64encode(f"reports:{CANARY}".encode()).decode()
    assert received["headers"]["authorization"] == f"Basic {pair}"
    admin.submit("button.step[value='go:review']")
    warning = page.inner_text("#exfiltration-warning")
    assert warning == (
        f"Apps linked to this connection can send any data they can query to {stack.upstream}."
    )
    assert "strong" not in (page.get_attribute("#exfiltration-warning", "class") or "")
    admin.submit("#save")
    made = get(cluster, namespace, "secret/reports-credential") or {}
    assert made["data"]["token"] == base64.b64encode(f"reports:{CANARY}".encode()).decode()
    wait_condition(cluster, namespace, "externalconnection/reports", "True")
    page = admin.open(f"/ui/namespaces/{namespace}/connections/reports")
    assert "user name and password, in the secret" in page.inner_text("#auth")

    # The pair is not a bearer token: another auth type asks for the secret again.
    admin.submit("#edit")
    admin.submit("button.step[value='go:auth']")
    page.select_option("select[name=auth_type]", "bearer")
    admin.submit("button.step[value='go:review']")
    assert "Secret: enter it again: the auth type changed" in page.inner_text("#errors")
    answer = admin.post(
        f"/ui/namespaces/{namespace}/connections/reports/edit",
        {
            "action": "save",
            "display_name": "Reports",
            "base_url": stack.upstream,
            "allowed_methods": "GET",
            "auth_type": "bearer",
            "link_policy": "AdminsOnly",
            "resource_version": (get(cluster, namespace, "externalconnection/reports") or {})[
                "metadata"
            ]["resourceVersion"],
        },
    )
    assert answer.status == 422
    assert "Secret: enter it again: the auth type changed" in answer.text()
    kept = get(cluster, namespace, "externalconnection/reports") or {}
    assert kept["spec"]["auth"]["type"] == "basic"


def test_aws_keys_entered_in_parts_sign_the_draft_test_and_are_stored_as_their_json(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    may_write_secrets(cluster, namespace, "admin")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Orders")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    page.select_option("select[name=auth_type]", "awsSigV4")
    assert visible(page, "input[name=aws_access_key_id]")
    assert not visible(page, "input[name=basic_user]")
    page.check("input[name=storage][value=secret]")
    page.fill("input[name=aws_region]", "us-east-1")
    page.fill("input[name=aws_service]", "execute-api")
    page.fill("input[name=aws_access_key_id]", "akia-not-an-id")
    page.fill("input[name=secret]", CANARY)
    admin.submit("#next")
    errors = page.inner_text("#errors")
    assert "Access key id must be 16 to 128 upper case letters and digits" in errors
    assert "akia-not-an-id" not in errors
    admin.submit("button.step[value='go:auth']")
    assert page.input_value("input[name=aws_access_key_id]") == ""  # write-only, as the secret
    assert page.input_value("input[name=aws_region]") == "us-east-1"
    page.fill("input[name=aws_access_key_id]", "ASIAIOSFODNN7EXAMPLE")
    page.fill("input[name=secret]", CANARY)
    page.fill("input[name=aws_session_token]", f"session-{CANARY}")
    admin.submit("#next")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("button.step[value='go:test']")
    page.fill("input[name=test_path]", "/echo/orders")
    admin.submit("#try-draft")
    assert page.inner_text("#verdict").startswith("Passed"), page.inner_text("#verdict")
    echoed = json.loads(page.inner_text("#response-body"))
    received = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    signed = received["headers"]["authorization"]
    assert signed.startswith("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7EXAMPLE/")
    assert "/us-east-1/execute-api/aws4_request" in signed
    assert received["headers"]["x-amz-security-token"] == f"session-{CANARY}"
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    made = get(cluster, namespace, "secret/orders-credential") or {}
    stored = json.loads(base64.b64decode(made["data"]["aws-keys.json"]))
    assert stored == {
        "Version": 1,
        "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",
        "SecretAccessKey": CANARY,
        "SessionToken": f"session-{CANARY}",
    }
    wait_condition(cluster, namespace, "externalconnection/orders", "True")
    page = admin.open(f"/ui/namespaces/{namespace}/connections/orders")
    assert "each request signed for us-east-1, service execute-api" in page.inner_text("#auth")


def test_the_wizard_names_each_problem_and_a_refused_connection_writes_no_secret(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    may_write_secrets(cluster, namespace, "admin")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    admin.submit("button.step[value='go:review']")
    errors = page.inner_text("#errors")
    assert "Display name: required" in errors
    assert "Base URL: required" in errors
    # The schema's rule, from the API server's dry run as the admin, names the field.
    admin.submit("button.step[value='go:api']")
    page.fill("input[name=display_name]", "Bad")
    page.fill("input[name=base_url]", "https://user:pw@example.com")
    admin.submit("button.step[value='go:auth']")
    page.select_option("select[name=auth_type]", "bearer")
    page.fill("input[name=secret]", CANARY)
    # Who may link it has no preselected value: it is named until chosen.
    admin.submit("button.step[value='go:review']")
    assert "Who can link it: one of AdminsOnly, Builders" in page.inner_text("#errors")
    admin.submit("button.step[value='go:access']")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("button.step[value='go:review']")
    assert "baseURL must not contain credentials" in page.inner_text("#errors")
    answer = admin.post(
        f"/ui/namespaces/{namespace}/new-connection",
        {
            "action": "save",
            "display_name": "Bad",
            "base_url": "https://user:pw@example.com",
            "allowed_methods": "GET",
            "auth_type": "bearer",
            "link_policy": "AdminsOnly",
            "secret": CANARY,
        },
    )
    assert answer.status == 422
    assert "baseURL must not contain credentials" in answer.text()
    assert CANARY not in answer.text()
    assert get(cluster, namespace, "externalconnection/bad") is None
    assert get(cluster, namespace, "secret/bad-credential") is None
    # A secret is required to create a connection that needs one.
    answer = admin.post(
        f"/ui/namespaces/{namespace}/new-connection",
        {
            "action": "save",
            "display_name": "Keyless",
            "base_url": stack.upstream,
            "allowed_methods": "GET",
            "auth_type": "bearer",
            "link_policy": "AdminsOnly",
        },
    )
    assert answer.status == 422
    assert "Secret: required for Bearer token authentication" in answer.text()
    assert get(cluster, namespace, "externalconnection/keyless") is None
    # A value no option of the form has is named, not a failure of the page.
    answer = admin.post(
        f"/ui/namespaces/{namespace}/new-connection",
        {"action": "save", "display_name": "Odd", "base_url": stack.upstream, "auth_type": "x"},
    )
    assert answer.status == 422
    assert (
        "Auth type: one of none, apiKey, bearer, basic, oauth2ClientCredentials, "
        "oauth2AuthorizationCode, googleServiceAccount"
    ) in answer.text()
    # Every method unchecked is named, never taken as GET.
    answer = admin.post(
        f"/ui/namespaces/{namespace}/new-connection",
        {
            "action": "save",
            "display_name": "Methodless",
            "base_url": stack.upstream,
            "link_policy": "AdminsOnly",
        },
    )
    assert answer.status == 422
    assert "Allowed methods: at least one of GET, POST, PUT, PATCH, DELETE" in answer.text()
    assert get(cluster, namespace, "externalconnection/methodless") is None


def test_the_api_servers_refusal_is_named_under_each_fields_title_and_a_typed_secret_is_sealed(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    """Rules only the API server checks (the schema's CEL the model does not mirror, a resource
    name that is not one): its dry run's causes under the page's titles, nothing cut mid-word;
    and a secret typed for a base URL the operator cannot seal for names that URL, not the rule
    that an auth type needs a secretRef or a sealedSecret."""
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Dotted")
    page.fill("input[name=base_url]", stack.upstream)
    page.fill("textarea[name=allowed_paths]", "/v1\n/v1/../admin")
    admin.submit("button.step[value='go:access']")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("button.step[value='go:review']")
    errors = page.inner_text("#errors")
    assert errors.splitlines() == [
        'Allowed paths: Invalid value: "/v1/../admin": allowedPaths entries must not contain . '
        "or .. segments"
    ], errors
    assert "accepts this connection" not in page.content()
    # The same causes from Create: nothing written.
    admin.submit("#save")
    assert page.inner_text("#errors").splitlines() == errors.splitlines()
    assert get(cluster, namespace, "externalconnection/dotted") is None
    # A name the API server refuses, under the page's title for it (posted as typed: the
    # browser's own check of the field would stop the form).
    answer = admin.post(
        f"/ui/namespaces/{namespace}/new-connection",
        {
            "action": "go:review",
            "name": "Dotted_API",
            "display_name": "Dotted",
            "base_url": stack.upstream,
            "allowed_methods": "GET",
            "link_policy": "AdminsOnly",
        },
    )
    assert answer.status == 422
    assert "<p>Resource name: Invalid value: &#34;Dotted_API&#34;: a lowercase RFC 1123" in (
        answer.text()
    ), answer.text()
    # Sealed, for a base URL the schema takes but the operator's origin rules do not.
    admin.submit("button.step[value='go:api']")
    page.fill("textarea[name=allowed_paths]", "/v1")
    page.fill("input[name=base_url]", "https://exa_mple.com")
    admin.submit("button.step[value='go:auth']")
    assert page.is_checked("input[name=storage][value=sealed]")
    page.select_option("select[name=auth_type]", "bearer")
    page.fill("input[name=secret]", CANARY)
    admin.submit("button.step[value='go:review']")
    errors = page.inner_text("#errors")
    assert errors.splitlines() == [
        "Base URL: baseURL host 'exa_mple.com' is not a valid host name"
    ], errors
    assert "secretRef" not in errors


def test_saving_tells_of_an_existing_secret_only_what_the_visitors_own_create_is_told(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    """The wizard writes the Secret as the visitor and reads none with the operator's rights:
    whether `<name>-credential` exists is said only by the visitor's own create (409), so an
    admin who may not create Secrets learns nothing of which exist."""
    members = project(cluster, stack, namespace)
    apply(cluster, namespace, secret("taken-credential", token="not-the-visitors"))
    admin = visit(members["admin"])

    def save(name: str) -> str:
        answer = admin.post(
            f"/ui/namespaces/{namespace}/new-connection",
            {
                "action": "save",
                "display_name": name,
                "base_url": stack.upstream,
                "allowed_methods": "GET",
                "auth_type": "bearer",
                "link_policy": "AdminsOnly",
                "secret": CANARY,
            },
        )
        assert answer.status == 422, answer.text()
        text: str = answer.text()
        return text

    # Without Secret rights: the same refusal (the dry run's, at admission) whether the name is
    # taken or not, and no Secret written.
    taken, free = save("Taken"), save("Free")
    for text, name in ((taken, "taken"), (free, "free")):
        assert f"may not get Secret &#39;{name}-credential&#39;" in text, text
        assert "exists already" not in text
    assert get(cluster, namespace, "secret/free-credential") is None
    # With create (and get, as a connection that uses it needs): the create's own 409.
    grant_secrets(cluster, namespace, "admin", "create,get")
    assert "a Secret named taken-credential exists already" in save("Taken")
    assert get(cluster, namespace, "externalconnection/taken") is None


def test_a_builder_sees_only_builders_connections_links_one_and_is_refused_a_locked_one(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    builder = visit(members["builder"])
    page = builder.open(f"/ui/namespaces/{namespace}/connections")
    assert rows(page) == ["open"]
    assert builder.open(f"/ui/namespaces/{namespace}/connections/locked").inner_text("#refusal")
    page = builder.open(f"/ui/namespaces/{namespace}/connections")
    # The form links any of them: what a link lets apps do, in general, before; the one
    # linked's own warning after (it allows POST).
    assert page.inner_text("#link-warning").startswith(
        "Apps linked to a connection can send any data they can query to its origin"
    )
    page.fill("#link-form input[name=alias]", "vendor")
    page.fill("#link-form input[name=connection]", "open")
    builder.submit("#link-form button[type=submit]")
    assert page.inner_text(".notice") == (
        "Linked open to DataApp board as “vendor”. Apps linked to this connection can send any "
        f"data they can query to {stack.upstream}. It allows POST: linked apps can also create, "
        "change or delete data there, with this connection's credential."
    )
    assert "DataApp/board" in page.inner_text("#connections tr[data-name=open]")
    links = (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"]
    assert links == [{"alias": "vendor", "connection": "open"}]

    page.fill("#link-form input[name=alias]", "secret")
    page.fill("#link-form input[name=connection]", "locked")
    builder.submit("#link-form button[type=submit]")
    refusal = page.inner_text("#refusal")
    assert refusal.startswith("not linked:"), refusal
    assert "'locked'" in refusal, refusal
    # The same words as for a connection that does not exist: nothing of its link policy.
    assert "no connection of that name they may link" in refusal, refusal
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == links


def test_linked_by_tabs_link_inline_with_an_alias_from_the_name_idempotent_and_apart(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    gauge = data_app("gauge", {"open": "open"})
    gauge["kind"] = "ChartType"
    apply(cluster, namespace, gauge, data_app("sales", {"open": "locked"}))
    builder = visit(members["builder"])
    page = builder.open(f"/ui/namespaces/{namespace}/connections/open")
    # Data apps and chart types apart: the linking ones with their alias, then the ones the
    # visitor may link it into.
    # Laid out as the page's other tab rows are: the words matter, not the line breaks.
    assert " ".join(page.inner_text("#linked-by nav").split()) == "Data apps (0) Chart types (1)"
    assert page.inner_text("#linked-ChartType tr[data-name=gauge] .alias") == "open"
    for app in ("board", "sales"):
        assert page.inner_text(f"#linked-DataApp tr[data-name={app}] .alias") == "not linked"
    # Linked inline: the alias is made from the connection's name.
    builder.submit("#linked-DataApp tr[data-name=board] button.link-inline")
    assert page.inner_text(".notice").startswith("Linked open to DataApp board as “open”."), (
        page.inner_text(".notice")
    )
    assert page.inner_text("#linked-DataApp tr[data-name=board] .alias") == "open"
    board = (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"]
    assert board == [{"alias": "open", "connection": "open"}]
    # A retry finds the link there and changes nothing.
    again = builder.post(
        f"/ui/namespaces/{namespace}/links",
        {"app": "DataApp/board", "connection": "open", "back": "detail"},
    )
    assert again.ok
    assert "DataApp board links open as “open” already." in again.text()
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == board
    # Unique within the app: sales uses "open" for another connection, so the alias steps on.
    builder.submit("#linked-DataApp tr[data-name=sales] button.link-inline")
    assert page.inner_text(".notice").startswith("Linked open to DataApp sales as “open-2”.")
    # An alias another connection holds, typed, is refused, naming the field and the holder.
    refused = builder.post(
        f"/ui/namespaces/{namespace}/links",
        {"app": "DataApp/sales", "connection": "open", "alias": "open", "back": "detail"},
    )
    assert refused.status == 409
    assert (
        "alias: &#39;open&#39; is held by connection &#39;locked&#39; in DataApp sales"
        in (refused.text())
        or "alias: 'open' is held by connection 'locked' in DataApp sales" in refused.text()
    )
    sales = (get(cluster, namespace, "dataapp/sales") or {})["spec"]["connections"]
    assert sales == [
        {"alias": "open", "connection": "locked"},
        {"alias": "open-2", "connection": "open"},
    ]
    # The same admission checks as every link: a builder cannot link an AdminsOnly connection
    # from its side either (the page is not theirs to see, and the form is refused).
    locked = builder.post(
        f"/ui/namespaces/{namespace}/links",
        {"app": "DataApp/board", "connection": "locked", "back": "detail"},
    )
    assert "no connection of that name they may link" in locked.text()
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == board


def test_an_interactive_viewer_sees_the_list_and_cannot_change_anything(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    viewer = visit(members["viewer"])
    page = viewer.open(f"/ui/namespaces/{namespace}/connections")
    assert rows(page) == ["open"]
    assert page.query_selector_all("form[method=post]:not([action='/ui/sign-out'])") == []
    page = viewer.open(f"/ui/namespaces/{namespace}/connections/open")
    assert page.query_selector_all("form[method=post]:not([action='/ui/sign-out'])") == []
    # The forms are not merely hidden: posted anyway, with the viewer's own CSRF token, they fail.
    assert viewer.open(f"/ui/namespaces/{namespace}/new-connection").inner_text("#refusal")
    assert viewer.open(f"/ui/namespaces/{namespace}/connections/open/edit").inner_text("#refusal")
    viewer.open(f"/ui/namespaces/{namespace}/connections/open")  # a page with the CSRF token
    for action, fields in (
        ("links", {"app": "DataApp/board", "alias": "x", "connection": "open"}),
        ("connections/open/test", {"method": "GET", "path": "/echo"}),
        ("connections/open/delete", {"confirm": "open"}),
        ("connections/open/edit", {"action": "save", "display_name": "Mine"}),
        ("new-connection", {"action": "save", "display_name": "Mine"}),
    ):
        answer = viewer.post(f"/ui/namespaces/{namespace}/{action}", fields)
        assert answer.status == 403, action
    assert get(cluster, namespace, "externalconnection/open") is not None
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == []


class AttackerSite:
    """A page on another site that posts a form to the connections page when it loads."""

    def __init__(self, target: str, fields: dict[str, str]) -> None:
        inputs = "".join(f'<input name="{k}" value="{v}">' for k, v in fields.items())
        html = (
            f'<form id="f" method="post" action="{target}">{inputs}</form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(html)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, host: str) -> str:
        return f"http://{host}:{self.server.server_address[1]}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("via_proxy", [False, True], ids=["session-cookie", "proxy-header"])
def test_a_cross_site_form_post_is_refused(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any, via_proxy: bool
) -> None:
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"], via_proxy=via_proxy)
    admin.open(f"/ui/namespaces/{namespace}/connections")
    target = f"{stack.local.api_url}/ui/namespaces/{namespace}/links"
    attacker = AttackerSite(target, {"app": "DataApp/board", "alias": "x", "connection": "locked"})
    try:
        # localhost is another site; another port of 127.0.0.1 is the same site, another origin.
        for host in ("localhost", "127.0.0.1"):
            page = admin.page
            with page.expect_navigation(url=target):
                page.goto(attacker.url(host))
            page.wait_for_load_state()
            assert page.inner_text("#refusal") == "refused: the form was sent by another site", host
    finally:
        attacker.close()
    # Same-origin but without the visitor's CSRF token (a page of this origin that is not ours):
    # refused too.
    forged = admin.page.request.post(
        target,
        form={"app": "DataApp/board", "alias": "x", "connection": "locked"},
        headers={"Origin": stack.local.api_url, "Sec-Fetch-Site": "same-origin"},
    )
    assert forged.status == 403
    assert "the form has expired" in forged.text()
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == []


def test_a_script_in_instructions_is_shown_and_never_run(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    hostile = (
        "<script>document.title = 'ran'; alert('script')</script>\n\n"
        "<img src=x onerror=\"alert('img')\">\n\n"
        "[click](javascript:alert('link')) and [docs](https://example.com/docs)"
    )
    apply(
        cluster,
        namespace,
        connection("open", stack.upstream, API_KEY_AUTH, instructions=hostile),
    )
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    page.wait_for_timeout(300)
    shown = page.inner_text("#instructions")
    assert "<script>document.title = 'ran'" in shown
    assert page.query_selector_all("#instructions script, #instructions img") == []
    assert page.title() != "ran"
    assert admin.dialogs == []
    hrefs = [a.get_attribute("href") for a in page.query_selector_all("#instructions a")]
    assert hrefs == ["https://example.com/docs"]


@pytest.fixture
def read_only_page(stack: Stack) -> Iterator[Endpoint]:
    server = stack.local.start_page_server(read_only=True)
    yield server
    server.server.stop()
    stack.local.servers.remove(server.server)


def test_the_read_only_setting_hides_every_write(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any, read_only_page: Endpoint
) -> None:
    members = project(cluster, stack, namespace)
    # The draft names the wizard's Secret (the stored one's key is not the wizard's): the dry
    # run asks for get on it, as a namespace admin has through Kubernetes' admin role.
    grant_secrets(cluster, namespace, "admin", "get")
    admin = visit(members["admin"], base=read_only_page.url)
    page = admin.open(f"/ui/namespaces/{namespace}/connections")
    assert page.query_selector("#read-only") is not None
    assert rows(page) == ["locked", "open"]
    assert page.query_selector("#link-form") is None
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    assert page.query_selector("#link-form") is None
    # Tests and samples stay.
    page.fill("#test input[name=path]", "/echo/ro")
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#verdict").startswith("Passed")
    # Editing is drafting: the YAML of a change is shown, never saved; nothing deletes. (Draft
    # tests need the operator's table channel, which this second front end has no proxy on.)
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    assert page.inner_text("#edit") == "Draft a change"
    admin.submit("#edit")
    assert page.query_selector("#delete") is None
    page.fill("input[name=display_name]", "Open vendor API, renamed")
    admin.submit("button.step[value='go:review']")
    assert "accepts this connection" in page.inner_text("#dry-run")
    assert page.query_selector("#save") is None
    assert "Open vendor API, renamed" in page.inner_text("#yaml")
    for action, fields in (
        ("links", {"app": "DataApp/board", "alias": "x", "connection": "open"}),
        ("connections/open/edit", {"action": "save", "display_name": "Renamed"}),
        ("connections/open/delete", {"confirm": "open"}),
        ("new-connection", {"action": "save", "display_name": "New"}),
    ):
        answer = admin.post(f"/ui/namespaces/{namespace}/{action}", fields)
        assert answer.status == 403, action
        assert "read-only" in answer.text(), action
    assert (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"] == []
    assert (get(cluster, namespace, "externalconnection/open") or {})["spec"]["displayName"] == (
        "Open vendor API"
    )


def test_in_read_only_mode_the_wizard_gives_yaml_with_the_secret_sealed(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any, read_only_page: Endpoint
) -> None:
    """The GitOps path: draft on the read-only page, take the YAML with the secret sealed in
    it, apply it as the admin; no Secret is written by anyone, and the connection works."""
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"], base=read_only_page.url)
    sealed_canary = "sealed-canary-3e8b-never-shown"
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Sealed vendor")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    page.select_option("select[name=auth_type]", "apiKey")
    page.fill("input[name=api_key_name]", "X-API-Key")
    page.fill("input[name=secret]", sealed_canary)
    # Read-only: sealed into the connection is the default.
    assert page.is_checked("input[name=storage][value=sealed]")
    admin.submit("#next")
    page.check("input[name=link_policy][value=Builders]")
    admin.submit("button.step[value='go:review']")
    assert "accepts this connection" in page.inner_text("#dry-run")
    text = page.inner_text("#yaml")
    assert sealed_canary not in page.content()
    assert "safe to commit" in text
    manifest = yaml.safe_load(text)
    auth = manifest["spec"]["auth"]
    assert "secretRef" not in auth
    assert auth["sealedSecret"].startswith("gh1.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "wizard-sealed-review.png"), full_page=True)

    cluster.kubectl("apply", "-f", "-", stdin=text, as_user=members["admin"].persona)
    wait_condition(cluster, namespace, "externalconnection/sealed-vendor", "True", "Routed")
    secrets = cluster.kubectl("get", "secrets", "-n", namespace, "-o", "json").stdout
    assert sealed_canary not in secrets
    assert base64.b64encode(sealed_canary.encode()).decode() not in secrets


def test_odd_requests_get_a_clear_page_and_change_nothing(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"])
    # A notice only shows when this page signed it for this visitor: a link cannot add words.
    page = admin.open(
        f"/ui/namespaces/{namespace}/connections?notice=Session+expired:+paste+your+token+at+x"
        "&signed=00"
    )
    assert page.query_selector(".notice") is None
    # Names that are not Kubernetes names never reach a permission check or an API path.
    base = f"{stack.local.api_url}/ui/namespaces"
    for path in ("/%2E%2E/connections", f"/{namespace}/connections/%2E%2E", "/UPPER/connections"):
        answer = httpx.get(base + path, headers=members["admin"].headers(), timeout=20)
        assert answer.status_code == 404, path
        assert "not a Kubernetes name" in answer.text
    admin.open(f"/ui/namespaces/{namespace}/connections/open")
    huge = admin.post(f"/ui/namespaces/{namespace}/links", {"alias": "x" * 70_000})
    assert huge.status == 413
    assert huge.headers["content-security-policy"].startswith("default-src 'none'")
    for body in ("1" * 5000, "[" * 20_000):
        page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
        page.select_option("#test select[name=method]", "POST")
        page.fill("#test textarea[name=body]", body)
        admin.submit("#test button[type=submit]")
        assert page.inner_text("#refusal").startswith("body:")


def test_the_page_sends_a_strict_content_security_policy(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    admin = visit(members["admin"])
    answer = admin.page.request.get(f"{admin.base}/ui/namespaces/{namespace}/connections")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    # The page's one script is its own file: no inline script, no eval, nothing from elsewhere.
    [scripts] = [part.strip() for part in policy.split(";") if "script-src" in part]
    assert scripts == "script-src 'self'"
    html = admin.page.request.get(f"{admin.base}/ui/namespaces/{namespace}/connections").text()
    assert html.count("<script") == 1
    assert '<script src="/ui/static/page.js" defer></script>' in html
    assert answer.headers["cache-control"] == "no-store"
    [cookie] = admin.context.cookies()
    assert cookie["name"] == "__Host-gatehouse-session"
    assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"]) == (True, True, "Strict")


QUERY_SECRET = "query-value-3c9e-never-shown"


def linked_apps(cluster: Cluster, stack: Stack, namespace: str) -> dict[str, str]:
    """board and rival, each linking "open" as vendor: their app tokens."""
    apply(
        cluster,
        namespace,
        data_app("board", {"vendor": "open"}),
        data_app("rival", {"vendor": "open"}),
    )
    for app in ("board", "rival"):
        wait_condition(cluster, namespace, f"dataapp/{app}", "True", "Routed")
    return {
        app: app_token(cluster, namespace, f"dataapp-{app}-gatehouse") for app in ("board", "rival")
    }


def test_a_builder_sees_their_apps_fetches_scrubbed_and_not_another_apps(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    tokens = linked_apps(cluster, stack, namespace)
    for proxy in stack.proxies:
        path = f"/echo/orders?page=1&token={QUERY_SECRET}"
        assert fetch(proxy.url, tokens["board"], "vendor", path).status_code == 200
    assert fetch(stack.proxy, tokens["rival"], "vendor", "/echo/rival-only").status_code == 200
    assert fetch(stack.proxy, tokens["board"], "vendor", "/elsewhere").status_code == 403

    builder = visit(members["builder"])
    builder.secrets += [QUERY_SECRET, *tokens.values()]
    page = builder.open(f"/ui/namespaces/{namespace}/connections/open")
    page.click("#fields a:text('DataApp/board')")
    page.wait_for_load_state()
    builder.check()
    assert page.url.endswith(f"/ui/namespaces/{namespace}/dataapps/board/requests")
    assert page.inner_text("#tabs [aria-current]") == "Requests"
    shown = page.query_selector_all("#requests tbody tr")
    assert {row.get_attribute("data-app") for row in shown} == {"DataApp/board"}
    paths = [row.inner_text() for row in shown]
    assert sum("/echo/orders?page=*&token=*" in text for text in paths) == 2
    assert any("/elsewhere" in text and "path_not_allowed" in text for text in paths)
    assert not any("rival-only" in text for text in paths)
    page.screenshot(path=str(SCREENSHOTS / "app-requests.png"), full_page=True)

    # The connection's Requests tab has every app's, for whoever may see the connection.
    page = builder.open(f"/ui/namespaces/{namespace}/connections/open/requests")
    apps = {row.get_attribute("data-app") for row in page.query_selector_all("#requests tbody tr")}
    assert apps == {"DataApp/board", "DataApp/rival"}

    # A viewer may not edit the app: refused, with nothing of its requests.
    viewer = visit(members["viewer"])
    page = viewer.open(f"/ui/namespaces/{namespace}/dataapps/board/requests")
    assert "may not update dataapps/board" in page.inner_text("#refusal")
    assert "/echo/orders" not in page.content()


def test_an_admin_sees_the_usage_charts_move_after_a_burst_of_fetches(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    tokens = linked_apps(cluster, stack, namespace)
    admin = visit(members["admin"])
    chart = "#usage .usage[data-app='DataApp/board'] svg[aria-label={}]"

    def total(title: str) -> float:
        found = admin.page.query_selector(chart.format(title))
        return float(found.get_attribute("data-total") or 0) if found else 0.0

    assert fetch(stack.proxy, tokens["board"], "vendor", "/echo/warm").status_code == 200
    admin.open(f"/ui/namespaces/{namespace}/connections/open")
    before, errors_before = total("Requests"), total("Errors")
    assert before == 1
    for index in range(20):
        fetch(stack.proxies[index % 2].url, tokens["board"], "vendor", f"/echo/burst/{index}")
    for _ in range(5):
        fetch(stack.proxy, tokens["board"], "vendor", "/forbidden-path")
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    assert total("Requests") == before + 25
    assert total("Errors") == errors_before + 5
    assert page.query_selector(chart.format("p95") + " rect.bar") is not None
    assert "DataApp/rival" not in page.inner_text("#usage")  # it fetched nothing
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open?window=day")
    assert total("Requests") == before + 25
    page.screenshot(path=str(SCREENSHOTS / "connection-usage.png"), full_page=True)


# A newcomer's and a daily admin's page (issue 50 items 3 and 4): the wizard asks only what the
# chosen auth kind needs and checks each step as it is left, the connection's status turns Ready
# with no reload, the Requests tab filters and follows with trace ids, the Linked by tabs work by
# keyboard, and a refused form keeps what was typed.


def step_shown(page: Page) -> str:
    return page.inner_text("button.step[aria-current]")


def visible(page: Page, selector: str) -> bool:
    return page.is_visible(selector)


def test_the_wizard_names_a_wrong_field_on_its_own_step_and_asks_only_the_kinds_fields(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    may_write_secrets(cluster, namespace, "admin")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    # 1. The API: Next checks it with the model's rules, and names the field on this step.
    page.fill("input[name=display_name]", "Payments")
    page.fill("input[name=base_url]", "https://user:pw@example.com")
    page.fill("input[name=name]", "payments_api")
    admin.submit("#next")
    assert step_shown(page).startswith("1. API")
    assert page.inner_text("#step-api .field-error[data-field=baseURL]") == (
        "Base URL: baseURL must not contain credentials; reference a Secret in auth.secretRef"
    )
    assert page.input_value("input[name=display_name]") == "Payments"
    # Review lists every problem at once: the model's and the API server's (the name).
    admin.submit("button.step[value='go:review']")
    errors = page.inner_text("#errors")
    for named in ("Base URL: baseURL must not", "Resource name: Invalid value", "Who can link"):
        assert named in errors, errors
    assert "secretRef" not in errors.replace("reference a Secret in auth.secretRef", "")
    assert "(to fix)" in page.inner_text("button.step[value='go:api']")
    admin.submit("button.step[value='go:api']")
    # The resource's name, which the API server alone checks (its dry run, as the admin).
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    assert step_shown(page).startswith("1. API")
    said = page.inner_text("#step-api .field-error[data-field='metadata.name']")
    assert said.startswith('Resource name: Invalid value: "payments_api": a lowercase RFC 1123'), (
        said
    )
    assert said.endswith("[a-z0-9])?)*')"), said  # whole, not cut mid-word
    assert page.query_selector("#step-api .field-error[data-field=baseURL]") is None
    page.fill("input[name=name]", "payments")
    admin.submit("#next")
    # 2. Authentication: only the chosen kind's fields; no word on a secret not yet typed.
    assert step_shown(page).startswith("2. Authentication")
    assert "No secret entered" not in page.content()
    assert not visible(page, "#show-kind")  # the no-script button
    page.select_option("select[name=auth_type]", "oauth2ClientCredentials")
    assert visible(page, "input[name=token_url]")
    assert not visible(page, "input[name=api_key_name]")
    assert not visible(page, "input[name=basic_user]")
    page.select_option("select[name=auth_type]", "none")
    assert not visible(page, "input[name=secret]")
    assert not visible(page, "input[name=token_url]")
    page.select_option("select[name=auth_type]", "apiKey")
    assert visible(page, "input[name=api_key_name]")
    assert visible(page, "input[name=secret]")
    page.check("input[name=storage][value=secret]")
    page.fill("input[name=secret]", CANARY)
    admin.submit("#next")
    # The kind's own field, named beside the kind's fields; the secret typed is kept.
    assert step_shown(page).startswith("2. Authentication")
    assert page.inner_text(".auth-kind[data-kind=apiKey] .field-error") == (
        "Parameter name: required for an API key"
    )
    assert "A secret is entered" in page.inner_text("#secret-state")
    assert not visible(page, "input[name=token_url]")
    page.fill("input[name=api_key_name]", "X-API-Key")
    admin.submit("#next")
    # 3. Access: who may link it has no preselected value.
    assert step_shown(page).startswith("3. Access")
    admin.submit("#next")
    assert step_shown(page).startswith("3. Access")
    assert page.inner_text("#step-access .field-error[data-field=linkPolicy]") == (
        "Who can link it: one of AdminsOnly, Builders"
    )
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("#next")
    assert step_shown(page).startswith("4. Test")
    admin.submit("#next")
    assert "accepts this connection" in page.inner_text("#dry-run")
    assert get(cluster, namespace, "externalconnection/payments") is None


def test_without_script_the_wizard_shows_a_chosen_kinds_fields_on_request(
    cluster: Cluster, stack: Stack, namespace: str, browser: Browser
) -> None:
    members = project(cluster, stack, namespace)
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(15_000)
    try:
        admin = Visit(context, stack.local.api_url, [CANARY, members["admin"].token])
        page = admin.open("/ui/sign-in")
        page.fill("textarea[name=token]", members["admin"].token)
        admin.submit("button[type=submit]")
        page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
        admin.submit("button.step[value='go:auth']")
        shown = page.eval_on_selector_all(
            ".auth-kind:not([hidden])", "kinds => kinds.map(k => k.dataset.kind)"
        )
        chosen = page.input_value("select[name=auth_type]")
        assert shown == ([chosen] if chosen in ("apiKey", "basic") else [])
        page.select_option("select[name=auth_type]", "oauth2ClientCredentials")
        admin.submit("#show-kind")
        assert page.input_value("select[name=auth_type]") == "oauth2ClientCredentials"
        assert visible(page, "input[name=token_url]")
        assert not visible(page, "input[name=api_key_name]")
    finally:
        context.close()


def test_the_status_turns_ready_with_no_reload(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    # Created before its Secret: not ready, and the page says so until the Secret comes.
    apply(
        cluster,
        namespace,
        connection(
            "later",
            stack.upstream,
            {
                "type": "apiKey",
                "apiKey": {"name": "X-API-Key", "in": "header"},
                "secretRef": {"name": "later-credential", "key": "api-key"},
            },
        ),
    )
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/later")
    page.evaluate("() => { window.loadedOnce = true; }")
    assert not page.inner_text("#ready").startswith("Ready")
    apply(cluster, namespace, secret("later-credential", **{"api-key": CANARY}))
    wait_settled(cluster, namespace, "externalconnection/later")
    page.wait_for_function(
        "() => document.querySelector('#ready').textContent.startsWith('Ready')", timeout=30_000
    )
    assert page.inner_text("#secret").startswith("stored")
    assert page.evaluate("() => window.loadedOnce") is True  # the same page: no reload
    admin.check()

    # Right after Create, through the wizard: never "Secret: none" while it is being bound.
    may_write_secrets(cluster, namespace, "admin")
    page = admin.open(f"/ui/namespaces/{namespace}/new-connection")
    page.fill("input[name=display_name]", "Fresh")
    page.fill("input[name=base_url]", stack.upstream)
    admin.submit("#next")
    page.select_option("select[name=auth_type]", "bearer")
    page.check("input[name=storage][value=secret]")
    page.fill("input[name=secret]", CANARY)
    admin.submit("#next")
    page.check("input[name=link_policy][value=AdminsOnly]")
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.url.split("?")[0].endswith("/connections/fresh"), page.url
    page.evaluate("() => { window.loadedOnce = true; }")
    assert not page.inner_text("#secret").startswith("none")
    page.wait_for_function(
        "() => document.querySelector('#ready').textContent.startsWith('Ready')", timeout=30_000
    )
    assert page.inner_text("#secret").startswith("stored")
    assert page.evaluate("() => window.loadedOnce") is True


def test_the_requests_tab_filters_shows_trace_ids_and_follows(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    tokens = linked_apps(cluster, stack, namespace)
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent = f"00-{trace}-00f067aa0ba902b7-01"
    answer = fetch(
        stack.proxy, tokens["board"], "vendor", "/echo/a", headers={"traceparent": parent}
    )
    assert answer.status_code == 200
    assert fetch(stack.proxy, tokens["rival"], "vendor", "/echo/b").status_code == 200
    assert fetch(stack.proxy, tokens["board"], "vendor", "/elsewhere").status_code == 403
    admin = visit(members["admin"])
    admin.secrets += list(tokens.values())
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open/requests")

    def shown() -> list[tuple[str, str]]:
        return [
            (row.get_attribute("data-app") or "", row.inner_text())
            for row in page.query_selector_all("#requests tbody tr[data-app]")
        ]

    assert len(shown()) == 3
    assert page.inner_text(f"#requests tr[data-trace='{trace}'] td.trace") == trace
    # Filters: a form, so the filtered view is a link to share.
    page.select_option("#filters select[name=app]", "DataApp/rival")
    admin.submit("#filters button[type=submit]")
    assert [app for app, _ in shown()] == ["DataApp/rival"]
    assert "app=DataApp%2Frival" in page.url
    page.select_option("#filters select[name=app]", "")
    page.select_option("#filters select[name=status]", "4xx")
    admin.submit("#filters button[type=submit]")
    assert [(app, "/elsewhere" in text) for app, text in shown()] == [("DataApp/board", True)]
    page.select_option("#filters select[name=status]", "")
    page.fill("#filters input[name=path]", "/echo/")
    admin.submit("#filters button[type=submit]")
    assert sorted(app for app, _ in shown()) == ["DataApp/board", "DataApp/rival"]
    # Follow: a new request shows with no reload, within the filters.
    page.evaluate("() => { window.loadedOnce = true; }")
    page.check("#follow")
    assert fetch(stack.proxy, tokens["board"], "vendor", "/echo/followed").status_code == 200
    assert fetch(stack.proxy, tokens["board"], "vendor", "/not-echo").status_code == 403
    page.wait_for_function(
        "() => document.querySelector('#requests tbody').textContent.includes('/echo/followed')",
        timeout=20_000,
    )
    assert "/not-echo" not in page.inner_text("#requests tbody")
    assert page.evaluate("() => window.loadedOnce") is True
    admin.check()


def test_the_linked_by_tabs_are_tabs_by_keyboard(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    builder = visit(members["builder"])
    page = builder.open(f"/ui/namespaces/{namespace}/connections/open")
    tabs = "#linked-by [role=tablist] [role=tab]"
    assert page.eval_on_selector_all(tabs, "t => t.map(x => x.getAttribute('aria-selected'))") == [
        "true",
        "false",
    ]
    assert visible(page, "#linked-DataApp")
    assert not visible(page, "#linked-ChartType")
    page.focus("#tab-DataApp")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.id") == "tab-ChartType"
    assert page.get_attribute("#tab-ChartType", "aria-selected") == "true"
    assert visible(page, "#linked-ChartType")
    assert not visible(page, "#linked-DataApp")
    page.keyboard.press("Home")
    assert page.evaluate("() => document.activeElement.id") == "tab-DataApp"
    assert visible(page, "#linked-DataApp")
    page.keyboard.press("End")
    assert page.get_attribute("#tab-ChartType", "aria-selected") == "true"
    # Only the selected tab is in the Tab order (roving tabindex).
    assert page.get_attribute("#tab-DataApp", "tabindex") == "-1"


def test_a_refused_test_or_link_keeps_what_was_typed_and_says_why_on_the_same_page(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    members = project(cluster, stack, namespace)
    apply(cluster, namespace, connection("other", stack.upstream, {"type": "none"}))
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    page.select_option("#test select[name=method]", "POST")
    page.fill("#test input[name=path]", "/echo/typed")
    page.fill("#test textarea[name=body]", '{"a": 1,}')
    admin.submit("#test button[type=submit]")
    assert page.inner_text("#refusal").startswith("body: not JSON")
    assert page.input_value("#test select[name=method]") == "POST"
    assert page.input_value("#test input[name=path]") == "/echo/typed"
    assert page.input_value("#test textarea[name=body]") == '{"a": 1,}'
    assert page.inner_text("h1").startswith("Open vendor API")  # the connection's own page
    # A clashing alias: the app's "vendor" is another connection's; the alias typed stays.
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "DataApp",
            "metadata": {"name": "board"},
            "spec": {"connections": [{"alias": "vendor", "connection": "other"}]},
        },
    )
    page = admin.open(f"/ui/namespaces/{namespace}/connections/open")
    page.select_option("#link-form select[name=app]", "DataApp/board")
    page.fill("#link-form input[name=alias]", "vendor")
    admin.submit("#link-form button[type=submit]")
    assert "alias: 'vendor' is held by connection 'other'" in page.inner_text("#refusal")
    assert page.input_value("#link-form input[name=alias]") == "vendor"
    assert page.input_value("#link-form select[name=app]") == "DataApp/board"
    assert page.inner_text("h1").startswith("Open vendor API")
    # From the list, the connection typed stays too.
    page = admin.open(f"/ui/namespaces/{namespace}/connections")
    page.select_option("#link-form select[name=app]", "DataApp/board")
    page.fill("#link-form input[name=alias]", "vendor")
    page.fill("#link-form input[name=connection]", "open")
    admin.submit("#link-form button[type=submit]")
    assert "alias: 'vendor' is held by connection 'other'" in page.inner_text("#refusal")
    assert page.input_value("#link-form input[name=connection]") == "open"
    assert page.query_selector("#connections") is not None
    links = (get(cluster, namespace, "dataapp/board") or {})["spec"]["connections"]
    assert links == [{"alias": "vendor", "connection": "other"}]


def test_an_edit_saved_after_the_operator_wrote_the_status_is_no_conflict(
    cluster: Cluster, stack: Stack, namespace: str, visit: Any
) -> None:
    """The operator writes a connection's status after every change: an admin who opened Edit
    before that write saves without a 409 (the spec's generation is the one read); a change of
    the spec made meanwhile is still refused, not lost."""
    members = project(cluster, stack, namespace)
    apply(cluster, namespace, connection("plain", stack.upstream, {"type": "none"}))
    wait_settled(cluster, namespace, "externalconnection/plain")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/plain/edit")
    page.fill("input[name=display_name]", "Plain, edited")
    before = get(cluster, namespace, "externalconnection/plain") or {}
    has_secret = before["status"].get("hasSecret", False)
    patch = json.dumps({"status": {"hasSecret": not has_secret}})
    cluster.kubectl(
        "patch", "externalconnection/plain", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", patch,
    )  # fmt: skip
    after = get(cluster, namespace, "externalconnection/plain") or {}
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.query_selector("#errors") is None, page.inner_text("#errors")
    assert page.inner_text(".notice") == "Saved connection plain."
    saved = get(cluster, namespace, "externalconnection/plain") or {}
    assert saved["spec"]["displayName"] == "Plain, edited"

    # Someone else's change of the spec, meanwhile: refused, and theirs kept.
    page = admin.open(f"/ui/namespaces/{namespace}/connections/plain/edit")
    page.fill("input[name=display_name]", "Mine")
    cluster.kubectl(
        "patch", "externalconnection/plain", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"displayName": "Theirs"}}),
    )  # fmt: skip
    admin.submit("button.step[value='go:review']")
    admin.submit("#save")
    assert page.query_selector(".notice") is None
    assert page.inner_text("#errors")
    stored = get(cluster, namespace, "externalconnection/plain") or {}
    assert stored["spec"]["displayName"] == "Theirs"
