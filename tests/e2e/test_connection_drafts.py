"""Test this draft: a connection that is not saved, tried through a real proxy replica with each
auth type, checked by the API server as the caller, and leaving nothing behind."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Member,
    apply,
    connection,
    get,
    grant_secrets,
    project_members,
    register_client,
    secret,
    token_requests,
    wait_condition,
)

pytestmark = pytest.mark.e2e

SECRET = "sk-draft-0123456789abcdef"
SCOPE = "https://www.googleapis.com/auth/bigquery"
# Each auth type as the wizard writes it: the Secret it would create, named after the connection.
AUTHS: dict[str, dict[str, Any]] = {
    "none": {"type": "none"},
    "api-key-header": {**API_KEY_AUTH, "secretRef": {"name": "draft-credential", "key": "token"}},
    "api-key-query": {
        "type": "apiKey",
        "apiKey": {"name": "appid", "in": "query"},
        "secretRef": {"name": "draft-credential", "key": "token"},
    },
    "bearer": {"type": "bearer", "secretRef": {"name": "draft-credential", "key": "token"}},
    "google": {
        "type": "googleServiceAccount",
        "googleServiceAccount": {"scopes": [SCOPE]},
        "secretRef": {"name": "draft-credential", "key": "key.json"},
    },
}


def draft_spec(stack: Stack, auth: dict[str, Any], **spec: Any) -> dict[str, Any]:
    document: dict[str, Any] = connection("draft", stack.upstream, auth, **spec)["spec"]
    return document


def try_draft(
    stack: Stack, namespace: str, member: Member, draft: dict[str, Any]
) -> httpx.Response:
    return httpx.post(
        f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connection-drafts/tests",
        json=draft,
        headers=member.headers(),
        timeout=60,
    )


def nothing_kept(cluster: Cluster, namespace: str) -> None:
    for kind in ("externalconnections", "connectiontests", "secrets", "connectionsamples"):
        names = cluster.kubectl(
            "get", kind, "-n", namespace, "-o", "jsonpath={.items[*].metadata.name}"
        ).stdout.split()
        assert not [name for name in names if "draft" in name], (kind, names)


@pytest.mark.parametrize("auth_name", sorted(AUTHS))
def test_a_draft_is_tried_through_the_proxy_with_each_auth_type(
    cluster: Cluster, stack: Stack, namespace: str, auth_name: str
) -> None:
    members = project_members(cluster, namespace)
    grant_secrets(cluster, namespace, "admin", "get")
    auth = AUTHS[auth_name]
    value = stack.service_account_key.decode() if auth_name == "google" else SECRET
    draft = {
        "name": "draft",
        "spec": draft_spec(stack, auth, allowedPaths=["/echo"]),
        "request": {"method": "GET", "path": "/echo/ping?q=1"},
        **({"secret": value} if auth_name != "none" else {}),
    }
    answer = try_draft(stack, namespace, members["admin"], draft)
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["passed"], outcome
    assert outcome["response"]["statusCode"] == 200
    echoed = json.loads(outcome["response"]["body"])
    assert echoed["path"] == "/echo/ping"
    seen = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    received = seen["headers"]
    sent = {
        "none": "authorization" not in received and "x-api-key" not in received,
        "api-key-header": received.get("x-api-key") == SECRET,
        "api-key-query": seen["query"] == f"q=1&appid={SECRET}",
        "bearer": received.get("authorization") == f"Bearer {SECRET}",
        # A real token exchange: the token endpoint verified the key's signed assertion.
        "google": received.get("authorization", "").startswith("Bearer "),
    }
    assert sent[auth_name], seen
    if auth_name == "google":
        token = received["authorization"].removeprefix("Bearer ")
        info = httpx.get(f"{stack.token_endpoint}/tokeninfo", params={"access_token": token})
        assert info.json()["scope"] == SCOPE
    if auth_name != "none":
        assert value.strip() not in answer.text
        assert SECRET not in answer.text
    nothing_kept(cluster, namespace)


def test_a_draft_is_held_to_the_rules_of_a_saved_connection(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project_members(cluster, namespace)
    admin = members["admin"]
    base = {"name": "draft", "secret": SECRET, "request": {"path": "/echo"}}
    pinned = draft_spec(stack, AUTHS["bearer"], allowedPaths=["/echo"])

    # A connection naming a Secret is for those who may read it, as its apply would be (the
    # dry run goes through the same admission), with or without a secret of the draft's own.
    for draft in (base, {**base, "secret": None}):
        refused = try_draft(stack, namespace, admin, {**draft, "spec": pinned})
        assert refused.status_code == 403, refused.text
        assert "may not get Secret 'draft-credential'" in refused.json()["error"]["message"]
    grant_secrets(cluster, namespace, "admin", "get")

    # The proxy's rules: paths, methods and redirects, as for an app's fetch.
    for request, reason in (
        ({"path": "/status/204"}, "PathNotAllowed"),
        ({"method": "POST", "path": "/echo"}, "MethodNotAllowed"),
    ):
        outcome = try_draft(stack, namespace, admin, {**base, "spec": pinned, "request": request})
        assert outcome.status_code == 200, outcome.text
        assert (outcome.json()["passed"], outcome.json()["reason"]) == (False, reason)
    redirected = try_draft(
        stack,
        namespace,
        admin,
        {**base, "spec": draft_spec(stack, AUTHS["bearer"]), "request": {"path": "/redirect"}},
    ).json()
    assert (redirected["passed"], redirected["reason"]) == (False, "UpstreamRedirect")
    # What the API answered is shown, the redirect never followed (the reference shows it too).
    assert redirected["response"]["statusCode"] == 302
    assert redirected["response"]["location"] == "http://127.0.0.1:9/elsewhere"
    assert "a redirect to http://127.0.0.1:9/elsewhere" in redirected["message"]
    large = try_draft(
        stack,
        namespace,
        admin,
        {
            **base,
            "spec": draft_spec(stack, AUTHS["bearer"]),
            "request": {"path": "/big?bytes=2000000"},
        },
    ).json()
    assert (large["passed"], large["reason"]) == (False, "ResponseTooLarge")
    assert large["response"]["statusCode"] == 200
    assert large["response"]["truncated"] is True
    assert large["response"]["sizeBytes"] == 2_000_000
    assert large["response"]["body"].startswith("xxxx")

    # The API server's rules, as the caller: the schema's CEL rule names the field.
    bad = {**base, "spec": {**pinned, "baseURL": "https://user:pw@example.com"}}
    refused = try_draft(stack, namespace, admin, bad)
    assert refused.status_code == 422, refused.text
    assert "baseURL must not contain credentials" in refused.json()["error"]["message"]
    # A GET with a body, refused as ConnectionTest admission refuses it, naming the field.
    bodied = {**base, "spec": pinned, "request": {"path": "/echo", "body": {"q": 1}}}
    refused = try_draft(stack, namespace, admin, bodied)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"] == (
        "request.body: Value error, a GET test cannot have a body"
    )
    # RBAC, as the caller: only those who could create the connection may try it.
    for who in ("builder", "viewer", "nobody"):
        answer = try_draft(stack, namespace, members[who], {**base, "spec": pinned})
        assert answer.status_code == 403, (who, answer.text)
    # A secret that is not one: the credential's own check, before anything is sent.
    broken = {**base, "spec": pinned, "secret": "two\nlines"}
    assert try_draft(stack, namespace, admin, broken).json()["reason"] == "InvalidSecretValue"
    # No secret given: the stored Secret it names is used, by those who may read it.
    keyless = {**base, "spec": pinned, "secret": None}
    missing = try_draft(stack, namespace, admin, keyless).json()
    assert (missing["passed"], missing["reason"]) == (False, "SecretNotFound")
    nothing_kept(cluster, namespace)


def test_an_edit_is_tried_with_the_stored_secret_before_it_is_saved(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project_members(cluster, namespace)
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}))
    apply(cluster, namespace, connection("vendor", stack.upstream, API_KEY_AUTH))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    before = get(cluster, namespace, "externalconnection/vendor") or {}
    edited = {**before["spec"], "allowedPaths": ["/echo/v2"]}
    draft = {"name": "vendor", "replaces": True, "spec": edited, "request": {"path": "/echo/v2"}}
    outcome = try_draft(stack, namespace, members["admin"], draft).json()
    assert outcome["passed"], outcome
    echoed = json.loads(outcome["response"]["body"])
    assert echoed["headers"]["x-api-key"] == "[redacted]"
    seen = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    assert seen["headers"]["x-api-key"] == SECRET
    after = get(cluster, namespace, "externalconnection/vendor") or {}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # The stored Secret goes only where it went: an edit that moves it to another host is the
    # reader's alone, for a draft as for the apply.
    moved = {**draft, "spec": {**edited, "baseURL": "https://attacker.test"}}
    refused = try_draft(stack, namespace, members["admin"], moved)
    assert refused.status_code == 403, refused.text
    assert "denied the request: spec.baseURL: " in refused.json()["error"]["message"]
    # A new name as an edit is 404; an existing name as a new connection is 409 (for a caller
    # who may read its Secret: admission, which comes first, would refuse others).
    grant_secrets(cluster, namespace, "admin", "get")
    for name, replaces, status in (("absent", True, 404), ("vendor", False, 409)):
        answer = try_draft(
            stack, namespace, members["admin"], {**draft, "name": name, "replaces": replaces}
        )
        assert answer.status_code == status, answer.text


def test_an_oauth2_draft_mints_a_token_with_its_secret_and_shows_the_providers_error_scrubbed(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The wizard's draft test of an OAuth 2.0 connection: the draft's client secret mints a
    token at the dev authorization server, and what a provider says of a bad one is shown,
    the secret scrubbed from it even when the provider echoes it."""
    members = project_members(cluster, namespace)
    grant_secrets(cluster, namespace, "admin", "get")
    client_id, client_secret = f"draft-{namespace}", "cs_draft_" + SECRET
    register_client(stack.token_endpoint, client_id, client_secret, "body")

    def draft(token_path: str, value: str) -> dict[str, Any]:
        auth = {
            "type": "oauth2ClientCredentials",
            "oauth2ClientCredentials": {
                "tokenURL": f"{stack.token_endpoint}{token_path}",
                "clientId": client_id,
                "scopes": ["crm.read"],
                "clientAuthentication": "body",
            },
            "secretRef": {"name": "draft-credential", "key": "token"},
        }
        spec = connection("draft", stack.token_endpoint, auth)["spec"]
        return {"name": "draft", "spec": spec, "secret": value, "request": {"path": "/api/x"}}

    answer = try_draft(stack, namespace, members["admin"], draft("/token", client_secret))
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["passed"], outcome
    seen = json.loads(outcome["response"]["body"])
    assert (seen["client"], seen["scope"]) == (client_id, "crm.read")
    assert seen["headers"]["authorization"].endswith("[redacted]")  # the minted token
    assert "ya29." not in answer.text
    assert token_requests(stack.token_endpoint, client_id) == 1

    wrong = try_draft(stack, namespace, members["admin"], draft("/token", "cs_wrong")).json()
    assert not wrong["passed"]
    assert "invalid_client" in wrong["message"]
    assert "unknown client or wrong secret" in wrong["message"]
    # A provider that puts what it was sent in its error_description.
    echoed = try_draft(stack, namespace, members["admin"], draft("/hostile/echo", client_secret))
    assert not echoed.json()["passed"]
    assert "invalid_client: bad credentials" in echoed.json()["message"]
    assert "[redacted]" in echoed.json()["message"]
    for text in (answer.text, echoed.text):
        assert client_secret not in text
    nothing_kept(cluster, namespace)
