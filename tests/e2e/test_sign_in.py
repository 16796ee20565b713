"""Signing in from the command line, against the real API server, webhook and operator:
``gatehouse open`` as each project member's kubeconfig (a token one here; the CLI loads it as
kubectl does, so a certificate or exec plugin works alike), the link's code exchanged once for a
session that acts as that member, and every hostile case refused: a code read by another user,
reused, late, or spliced onto another user's request; a requester forged; too many requests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.api.sign_in_request import MAX_PENDING_PER_USER
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.web.session import COOKIE
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Member,
    apply,
    connection,
    get,
    project_members,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e
OPEN = [sys.executable, "-m", "gatehouse_operator.cli.gatehouse", "open", "--no-browser"]


def kubeconfig_of(cluster: Cluster, member: Member, folder: Path) -> Path:
    name = member.persona.name.rsplit(":", 1)[1]
    return cluster.token_kubeconfig(name, member.token, folder / f"{name}.kubeconfig")


def gatehouse_open(
    kubeconfig: Path, namespace: str, *args: str
) -> subprocess.CompletedProcess[str]:
    # The page URL comes from the operator's answer (the stack sets it), not the environment.
    env = {key: value for key, value in os.environ.items() if key != "GATEHOUSE_SERVER"}
    return subprocess.run(
        [*OPEN, "-n", namespace, "--timeout", "20", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "KUBECONFIG": str(kubeconfig)},
    )


def link_of(opened: subprocess.CompletedProcess[str]) -> str:
    assert opened.returncode == 0, opened.stderr
    link = opened.stdout.strip().splitlines()[-1]
    assert "/ui/sign-in/link#code=" in link
    return link


def code_of(link: str) -> str:
    return unquote(link.partition("#code=")[2])


def exchange(stack: Stack, code: str, confirm: str = "yes") -> httpx.Response:
    """The code posted as the link page's confirmation does (``confirm="yes"``: the click on
    "Sign in as ..."); without it, the page that names whose link it is."""
    return httpx.post(
        f"{stack.local.api_url}/ui/sign-in/code",
        data={"code": code, "confirm": confirm},
        timeout=10,
    )


def session_of(answer: httpx.Response) -> str:
    """The session cookie the exchange set (read from the header: the cookie is Secure, and
    this client would keep it only for https)."""
    assert answer.status_code == 303, answer.text
    found = re.search(rf"{re.escape(COOKIE)}=([^;]+)", answer.headers["set-cookie"])
    assert found is not None
    return found.group(1)


def as_session(stack: Stack, session: str, path: str) -> httpx.Response:
    return httpx.get(
        f"{stack.local.api_url}{path}", headers={"Cookie": f"{COOKIE}={session}"}, timeout=10
    )


def requests_in(cluster: Cluster, namespace: str) -> list[dict[str, object]]:
    found = cluster.kubectl("get", "signinrequests", "-n", namespace, "-o", "json").stdout
    items: list[dict[str, object]] = json.loads(found)["items"]
    return items


def project(cluster: Cluster, stack: Stack, namespace: str) -> dict[str, Member]:
    apply(cluster, namespace, secret("vendor", **{"api-key": "never-shown"}))
    apply(cluster, namespace, connection("vendor", stack.upstream, API_KEY_AUTH))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    return project_members(cluster, namespace)


def test_gatehouse_open_signs_in_as_the_kubeconfigs_user_once_and_acts_as_them(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    members = project(cluster, stack, namespace)
    admin = members["admin"]
    link = link_of(gatehouse_open(kubeconfig_of(cluster, admin, tmp_path), namespace))
    assert link.startswith(f"{stack.local.api_url}/ui/sign-in/link#code=")
    # The link's code first names whose link it is (someone else's would sign in as them) and
    # signs nobody in: the code is spent only by the click on "Sign in as ...".
    shown = exchange(stack, code_of(link), confirm="")
    assert shown.status_code == 200
    assert f"signs you in as <strong>{admin.persona.name}</strong>" in shown.text
    assert "set-cookie" not in shown.headers
    assert len(requests_in(cluster, namespace)) == 1
    first = exchange(stack, code_of(link))
    session = session_of(first)
    assert first.headers["location"] == "/ui/"
    home = as_session(stack, session, "/ui/")
    assert home.status_code == 200
    assert admin.persona.name in home.text
    # Used once: the request is gone, and the same code again is refused.
    assert requests_in(cluster, namespace) == []
    again = exchange(stack, code_of(link))
    assert again.status_code == 401
    assert "used already" in again.text
    assert "set-cookie" not in again.headers
    # The session acts as the admin, impersonated: the API server deletes their connection.
    edit = as_session(stack, session, f"/ui/namespaces/{namespace}/connections/vendor/edit")
    assert edit.status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', edit.text)
    assert csrf is not None
    deleted = httpx.post(
        f"{stack.local.api_url}/ui/namespaces/{namespace}/connections/vendor/delete",
        data={"csrf": csrf.group(1), "confirm": "vendor"},
        headers={"Cookie": f"{COOKIE}={session}"},
        timeout=10,
    )
    assert deleted.status_code == 303, deleted.text
    wait_for(
        lambda: get(cluster, namespace, "externalconnection/vendor") is None,
        timeout=10,
        what="the connection deleted as the admin",
    )


def test_a_code_for_another_users_request_is_refused_and_each_signs_in_as_themselves(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    members = project(cluster, stack, namespace)
    admins = code_of(
        link_of(gatehouse_open(kubeconfig_of(cluster, members["admin"], tmp_path), namespace))
    )
    viewers = code_of(
        link_of(gatehouse_open(kubeconfig_of(cluster, members["viewer"], tmp_path), namespace))
    )
    # The viewer's secret on the admin's request: to become the admin with their own code.
    viewer_namespace, _, viewer_secret = viewers.split(":")
    admin_request = admins.split(":")[1]
    spliced = exchange(stack, f"{viewer_namespace}:{admin_request}:{viewer_secret}")
    assert spliced.status_code == 401
    assert "does not match" in spliced.text
    # Each code still signs in as its own requester.
    viewer_home = as_session(stack, session_of(exchange(stack, viewers)), "/ui/")
    assert members["viewer"].persona.name in viewer_home.text
    assert members["admin"].persona.name not in viewer_home.text
    admin_home = as_session(stack, session_of(exchange(stack, admins)), "/ui/")
    assert members["admin"].persona.name in admin_home.text


def test_a_code_read_by_another_user_does_not_open(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    """The builder may get SignInRequests in the namespace, the admin's included: its sealed
    code opens only with the admin's command's key, and is itself no code."""
    members = project(cluster, stack, namespace)
    gatehouse_open(kubeconfig_of(cluster, members["admin"], tmp_path), namespace)
    [request] = requests_in(cluster, namespace)
    name = request["metadata"]["name"]  # type: ignore[index]
    read = cluster.kubectl(
        "get", "signinrequest", name, "-n", namespace, "-o", "json",
        as_user=members["builder"].persona,
    )  # fmt: skip
    seen = json.loads(read.stdout)
    sealed = seen["status"]["sealedCode"]
    builders_key, _ = sign_in_codes.new_key()
    with pytest.raises(sign_in_codes.CodeUnreadable):
        sign_in_codes.open_code(builders_key, sealed, namespace, name, seen["metadata"]["uid"])
    for attempt in (sealed, f"{namespace}:{name}:{sealed}", seen["status"]["codeDigest"]):
        refused = exchange(stack, attempt)
        assert refused.status_code == 401
        assert "set-cookie" not in refused.headers


def test_a_late_code_is_refused_and_its_request_swept(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    members = project(cluster, stack, namespace)
    code = code_of(
        link_of(gatehouse_open(kubeconfig_of(cluster, members["admin"], tmp_path), namespace))
    )
    name = code.split(":")[1]
    # As if its minute had passed: the status says when it ends.
    cluster.kubectl(
        "patch", "signinrequest", name, "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"expiresAt": "2020-01-01T00:00:00Z"}}),
    )  # fmt: skip
    late = exchange(stack, code)
    assert late.status_code == 401
    assert "set-cookie" not in late.headers
    # Expired, or already swept (the sweep runs every 10 s): refused either way.
    said = re.search(r'class="error" role="alert">([^<]+)<', late.text)
    assert said is not None
    assert said.group(1) in (sign_in_codes.LATE, sign_in_codes.USED_OR_UNKNOWN), said.group(1)
    wait_for(
        lambda: requests_in(cluster, namespace) == [],
        timeout=30,
        interval=0.5,
        what="the late SignInRequest swept",
    )


def test_a_forged_requester_is_refused_by_the_webhook(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project(cluster, stack, namespace)
    builder = members["builder"].persona
    _, public = sign_in_codes.new_key()

    def request(requester: Mapping[str, object]) -> str:
        return json.dumps(
            {
                "apiVersion": "gatehouse.dev/v1alpha1",
                "kind": "SignInRequest",
                "metadata": {"generateName": "forged-"},
                "spec": {"publicKey": public, "requester": requester},
            }
        )

    own_groups = [*builder.groups, "system:authenticated"]
    for forged, field in [
        ({"username": members["admin"].persona.name, "groups": own_groups}, "username"),
        ({"username": builder.name, "groups": [*own_groups, "system:masters"]}, "groups"),
    ]:
        refused = cluster.kubectl(
            "create", "-n", namespace, "-f", "-", stdin=request(forged), as_user=builder,
            check=False,
        )  # fmt: skip
        assert refused.returncode != 0
        assert f"spec.requester: {field} must be the requesting user's own" in refused.stderr
    assert requests_in(cluster, namespace) == []


def test_who_may_not_use_the_page_gets_no_code_and_nobody_piles_requests_up(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    members = project(cluster, stack, namespace)
    for name in ("nobody", "plain-viewer"):
        refused = gatehouse_open(kubeconfig_of(cluster, members[name], tmp_path), namespace)
        assert refused.returncode == 2
        assert f"you may not create signinrequests in namespace {namespace} (RBAC)" in (
            refused.stderr
        )
    builder = kubeconfig_of(cluster, members["builder"], tmp_path)
    for _ in range(MAX_PENDING_PER_USER):
        link_of(gatehouse_open(builder, namespace))
    over = gatehouse_open(builder, namespace)
    assert over.returncode == 2
    assert f"has {MAX_PENDING_PER_USER} sign-in requests waiting" in over.stderr
    assert len(requests_in(cluster, namespace)) == MAX_PENDING_PER_USER


def test_a_client_certificate_kubeconfig_signs_in_too(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The suite's own kubeconfig authenticates with a client certificate (the cluster's
    administrator, in system:masters): the command, the webhook and the page take it alike."""
    project(cluster, stack, namespace)
    who = json.loads(cluster.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    session = session_of(
        exchange(stack, code_of(link_of(gatehouse_open(cluster.kubeconfig, namespace))))
    )
    listed = as_session(stack, session, f"/ui/namespaces/{namespace}/connections")
    assert listed.status_code == 200
    assert who["username"] in listed.text
    assert "vendor" in listed.text
