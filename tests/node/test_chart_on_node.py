"""Gatehouse as it ships: the image built from the Dockerfile and the chart, on a node with Pods.

Installed the way README, "Installing in a cluster", says, with default values plus only what
the in-cluster test upstreams need (http, and their two Service addresses); connections and apps
applied with kubectl; fetched from Pods through the proxy Service; the bundled store shared by
both proxies, and reached by no other Pod (the node enforces NetworkPolicies: kube-router's
controller); upgraded, a proxy killed and uninstalled under a running client. The tests run in
file order, one release through its life.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.sync_api import Browser

from gatehouse_contract.connecting import CALLBACK_PATH
from gatehouse_dev.binaries import ensure_registry
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import Server, free_port
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.api.crds import KINDS
from gatehouse_operator.keys import sign_in_codes
from tests.e2e.gatehouse_fixtures import project_members
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_sign_in import code_of
from tests.e2e.test_sign_in_browser import refused_again, signed_in
from tests.node import page, pods, store_checks
from tests.node.release import (
    API_KEY,
    AUTHZ_IP,
    CHART,
    CONNECTION,
    PAGE_URL,
    PROJECT,
    PROXY_URL,
    RELEASE,
    SYSTEM,
    TEST_UPSTREAM_VALUES,
    UPSTREAM_IP,
    helm,
    present_webhook_client,
    rollout,
)

pytestmark = pytest.mark.node


def proxy_pods(cluster: Cluster) -> dict[str, bool]:
    """Each proxy Pod that is not being deleted, and whether it is Ready."""
    listed = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=proxy", "-o", "json"
        ).stdout
    )
    return {
        pod["metadata"]["name"]: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod["status"].get("conditions", [])
        )
        for pod in listed["items"]
        if "deletionTimestamp" not in pod["metadata"]
    }


def secrets_used(spec: dict[str, Any]) -> set[str]:
    """The Secrets a Pod uses, as the Node authorizer counts them: what its kubelet may read."""
    used = {ref["name"] for ref in spec.get("imagePullSecrets", [])}
    for volume in spec.get("volumes", []):
        used.add(volume.get("secret", {}).get("secretName", ""))
        for source in volume.get("projected", {}).get("sources", []):
            used.add(source.get("secret", {}).get("name", ""))
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for env in container.get("env", []):
            used.add(env.get("valueFrom", {}).get("secretKeyRef", {}).get("name", ""))
        for env_from in container.get("envFrom", []):
            used.add(env_from.get("secretRef", {}).get("name", ""))
    return used - {""}


@dataclass
class Release:
    cluster: Cluster
    token_secret: str = ""


@pytest.fixture(scope="module")
def release(node: Cluster) -> Iterator[Release]:
    node.kubectl("create", "namespace", "upstream")
    pods.apply(node, pods.upstream("upstream", UPSTREAM_IP))
    pods.apply(node, pods.token_endpoint("upstream", AUTHZ_IP))
    node.kubectl("create", "namespace", PROJECT)
    yield Release(node)
    node.kubectl("delete", "namespace", "upstream", "--wait=false", check=False)


def test_helm_install_makes_the_operator_and_every_proxy_replica_ready(release: Release) -> None:
    cluster = release.cluster
    helm(
        cluster,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        SYSTEM,
        "--create-namespace",
        "--wait",
        "--timeout=5m",
        *TEST_UPSTREAM_VALUES,
        # Where the tests' Pods reach the page: the connect flow's links and redirect URI.
        "--set",
        f"operator.page.url={PAGE_URL}",
    )
    present_webhook_client(cluster)
    for component in ("operator", "webhook", "proxy", "store"):
        rollout(cluster, component)
    replicas = proxy_pods(cluster)
    assert len(replicas) == 2
    assert all(replicas.values()), replicas


def test_a_pod_fetches_through_the_proxy_service_with_the_key_injected(release: Release) -> None:
    cluster = release.cluster
    cluster.kubectl("apply", "-n", PROJECT, "-f", "-", stdin=CONNECTION)
    cluster.kubectl(
        "wait", "-n", PROJECT, "dataapp/dashboard", "--for=condition=Ready", "--timeout=60s"
    )
    release.token_secret = "dataapp-dashboard-gatehouse"
    pods.apply(
        cluster,
        pods.client(
            PROJECT, "fetch-once", url=PROXY_URL, token_secret=release.token_secret, seconds=1
        ),
    )
    result = pods.summary(cluster, PROJECT, "fetch-once", timeout=90)
    assert result.get("failed") == 0, pods.log_lines(cluster, PROJECT, "fetch-once")
    assert result["ok"] >= 1
    # The upstream echoes what it received; the proxy scrubs the key from the answer.
    assert result["last"]["received"] == {"path": "/v1/orders", "x-api-key": "[redacted]"}
    # The upstream Pod's own record: it received the key, which the app's Pod never held.
    upstream_log = cluster.kubectl("logs", "deployment/upstream", "-n", "upstream").stdout
    received = [json.loads(line) for line in upstream_log.splitlines()]
    assert {"path": "/v1/orders", "x-api-key": API_KEY} in received
    client_env = cluster.kubectl("get", "pod", "fetch-once", "-n", PROJECT, "-o", "json").stdout
    assert API_KEY not in client_env
    token = cluster.kubectl(
        "get", "secret", release.token_secret, "-n", PROJECT, "-o", "jsonpath={.data.token}"
    ).stdout
    assert API_KEY not in base64.b64decode(token).decode()


def test_both_proxies_count_in_the_bundled_store_and_oauth2_fetches(release: Release) -> None:
    """The store the chart bundles, with the password the operator made: both proxy Pods count
    with it; an OAuth 2.0 connection is Ready and fetches with one token for the fleet; its
    quota of 10 a minute admits 10 of 30 requests spread over both Pods."""
    cluster = release.cluster
    store_checks.check_fleet(
        cluster, system=SYSTEM, release=RELEASE, project=PROJECT, authz_namespace="upstream"
    )
    secret = json.loads(
        cluster.kubectl("get", "secret", f"{RELEASE}-store", "-n", SYSTEM, "-o", "json").stdout
    )
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gatehouse-operator"}
    password = base64.b64decode(secret["data"]["password"]).decode()
    # In no Pod's spec: the store writes it into its config from the mounted file.
    listed = cluster.kubectl("get", "pods", "-n", SYSTEM, "-o", "json").stdout
    assert password not in listed
    store = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=store", "-o", "json"
        ).stdout
    )["items"]
    assert len(store) == 1
    assert f"{RELEASE}-store" in secrets_used(store[0]["spec"])


SHARED_ACCOUNT = "ops"


def _shared_grant_connection(client_id: str, secret: str) -> list[dict[str, Any]]:
    """A connection to the authorization server's API whose one account, connected by an admin,
    serves every app (``credentialScope: shared``); an app linking it; and the admin, a
    ServiceAccount that may update the connection."""
    authz = "http://authz.upstream.svc.cluster.local"
    meta = {"namespace": PROJECT}
    rules = [
        {
            "apiGroups": ["gatehouse.dev"],
            "resources": ["externalconnections"],
            "verbs": ["get", "list", "update"],
        }
    ]
    subjects = [{"kind": "ServiceAccount", "name": "sheets-admin", "namespace": PROJECT}]
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sheets-admin"}
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "sheets-admin", **meta},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "sheets-admin", **meta},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "sheets-admin", **meta},
            "roleRef": role,
            "subjects": subjects,
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "sheets-client",
                "labels": {"gatehouse.dev/credential": "true"},
                **meta,
            },
            "stringData": {"secret": secret},
        },
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ExternalConnection",
            "metadata": {"name": "sheets", **meta},
            "spec": {
                "displayName": "Sheets",
                "baseURL": authz,
                "allowedPaths": ["/api"],
                "linkPolicy": "Builders",
                "auth": {
                    "type": "oauth2AuthorizationCode",
                    "oauth2AuthorizationCode": {
                        "authorizationURL": f"{authz}/authorize",
                        "tokenURL": f"{authz}/token",
                        "clientId": client_id,
                        "scopes": ["sheets.read"],
                        "credentialScope": "shared",
                    },
                    "secretRef": {"name": "sheets-client", "key": "secret"},
                },
            },
        },
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "DataApp",
            "metadata": {"name": "sheets-reader", **meta},
            "spec": {"connections": [{"alias": "sheets", "connection": "sheets"}]},
        },
    ]


def _fetched_as_shared(cluster: Cluster, name: str) -> dict[str, Any]:
    """Three fetches of the app's through the proxy Service: their statuses and the last answer."""
    url = f"http://{RELEASE}-proxy.{SYSTEM}.svc/v1/fetch/sheets/api/rows"
    pods.apply(
        cluster,
        pods.counting_client(
            PROJECT, name, url=url, token_secret="dataapp-sheets-reader-gatehouse", count=3
        ),
    )
    return pods.summary(cluster, PROJECT, name, timeout=90)


def _store_pod(cluster: Cluster) -> tuple[str, bool]:
    """The store's Pod that is not being deleted, and whether it is Ready."""
    listed = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=store", "-o", "json"
        ).stdout
    )["items"]
    for pod in listed:
        if "deletionTimestamp" not in pod["metadata"]:
            conditions = pod["status"].get("conditions", [])
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return pod["metadata"]["name"], ready
    return "", False


def test_a_grant_is_kept_across_the_store_pod_being_deleted(release: Release) -> None:
    """Issue 49, keeping grants, with the chart as it ships: the bundled store keeps an
    append-only file on its claim (bound to one of the node's local volumes). A shared account
    connected the real way (the service API's link, the page, the authorization server's
    consent, the callback) serves the app; the store's Pod is deleted; once a new one is Ready
    and both proxies count with it again, the app is still served as that account, with no new
    authorization and no new token request. Between the two, for as long as a worker takes to
    notice that its pooled connections were closed (one probe, 0.5 s), a fetch may be 503
    ``connection_unavailable``: never 401, since the grant is not gone."""
    cluster = release.cluster
    claim = json.loads(
        cluster.kubectl("get", "pvc", f"{RELEASE}-store", "-n", SYSTEM, "-o", "json").stdout
    )
    assert claim["status"]["phase"] == "Bound", claim["status"]
    client_id, secret = store_checks.register_client(
        cluster, "upstream", redirect_uri=f"{PAGE_URL}{CALLBACK_PATH}"
    )
    pods.apply(cluster, _shared_grant_connection(client_id, secret))
    for resource in ("externalconnection/sheets", "dataapp/sheets-reader"):
        cluster.kubectl(
            "wait", "-n", PROJECT, resource, "--for=condition=Ready", "--timeout=90s", timeout=100
        )
    pods.apply(
        cluster,
        pods.shared_connect(
            PROJECT, "sheets-connect", page=PAGE_URL, connection="sheets", user=SHARED_ACCOUNT,
            service_account="sheets-admin",
        ),
    )  # fmt: skip
    connected = pods.summary(cluster, PROJECT, "sheets-connect", timeout=90)
    assert connected.get("ok") is True, connected
    assert connected["connected"] is True, connected
    assert connected["callback"] == f"{PAGE_URL}{CALLBACK_PATH}", connected
    before = _fetched_as_shared(cluster, "sheets-before")
    assert before["statuses"] == {"200": 3}, before
    assert before["last"]["user"] == SHARED_ACCOUNT, before
    stats = store_checks.authz_stats(cluster, "upstream")
    assert stats["authorizations"] >= 1, stats
    tokens = store_checks.token_requests(cluster, "upstream", client_id)
    assert tokens == 1, stats  # the code's exchange

    deleted, ready = _store_pod(cluster)
    assert ready, deleted
    started = time.monotonic()
    cluster.kubectl("delete", "pod", deleted, "-n", SYSTEM, "--timeout=60s", timeout=70)

    def replaced() -> bool:
        name, ready = _store_pod(cluster)
        return ready and name != deleted

    wait_for(replaced, timeout=120, interval=1, what="a new store Pod Ready")
    store_checks.wait_counting_shared(cluster, SYSTEM)
    back_in = time.monotonic() - started
    # A worker's first call on a connection the old store closed takes the store down for it
    # until its probe hears the new one (0.5 s): a fetch then is 503, the grant unreadable for
    # the moment, never 401 (the grant is not gone). Fetched again until served, bounded.
    fetched: list[dict[str, Any]] = []

    def served_again() -> dict[str, Any] | None:
        fetched.append(_fetched_as_shared(cluster, f"sheets-after-{len(fetched)}"))
        refusals = [json.loads(body)["error"] for body in fetched[-1]["refused"]]
        # A lost grant (the store emptied) is 401 viewer_authorization_required: fail at once.
        assert all(error["code"] == "connection_unavailable" for error in refusals), refusals
        return fetched[-1] if fetched[-1]["statuses"] == {"200": 3} else None

    after = wait_for(served_again, timeout=60, interval=0, what="the app served again")
    assert after["last"]["user"] == SHARED_ACCOUNT, after
    print(f"the store's Pod replaced in {back_in:.1f}s; then {len(fetched)} rounds of 3 fetches")
    # Kept, not made again: no new consent, no new code or refresh at the provider.
    again = store_checks.authz_stats(cluster, "upstream")
    assert again["authorizations"] == stats["authorizations"], again
    assert store_checks.token_requests(cluster, "upstream", client_id) == tokens, again
    names = ["sheets-connect", "sheets-before", *(f"sheets-after-{n}" for n in range(len(fetched)))]
    for name in names:
        cluster.kubectl("delete", "pod,configmap", name, "-n", PROJECT, "--wait=false")


def _knock(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """What a Pod that is no proxy gets from the store's port."""
    pods.apply(cluster, pods.knock(namespace, name, f"{RELEASE}-store.{SYSTEM}.svc", 6379))
    answer = pods.summary(cluster, namespace, name, timeout=90)
    cluster.kubectl("delete", "pod,configmap", name, "-n", namespace, "--wait=false")
    return answer


def test_a_pod_that_is_not_a_proxy_cannot_reach_the_store(release: Release) -> None:
    """The store's NetworkPolicy, enforced on the node (kube-router's controller): a Pod of the
    release's namespace that is no proxy, and an app's Pod, get no connection to its port while
    both proxies count with it. The policy is what stops them: without it the same Pod
    connects, and then the password is the only lock (NOAUTH)."""
    cluster = release.cluster
    for namespace, name in ((SYSTEM, "knock-neighbour"), (PROJECT, "knock-app")):
        answer = _knock(cluster, namespace, name)
        assert answer.get("connected") is False, (name, answer)
    assert len(store_checks.wait_counting_shared(cluster, SYSTEM)) == 2
    cluster.kubectl("delete", f"networkpolicy/{RELEASE}-store", "-n", SYSTEM)
    try:
        answer = _knock(cluster, SYSTEM, "knock-unguarded")
    finally:
        # The release puts it back, as its own.
        helm(
            cluster, "upgrade", RELEASE, str(CHART), "-n", SYSTEM, "--reuse-values", "--wait",
            "--timeout=5m",
        )  # fmt: skip
    cluster.kubectl("get", f"networkpolicy/{RELEASE}-store", "-n", SYSTEM)
    assert answer.get("connected") is True, answer
    assert answer["reply"].startswith("-NOAUTH"), answer


def _link_review(namespace: str, connection: str) -> dict[str, Any]:
    """What a stranger would send the link-policy webhook: may nobody link ``connection``?"""
    app = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "DataApp",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {"connections": [{"alias": "x", "connection": connection}]},
    }
    resource = {"group": "gatehouse.dev", "version": "v1alpha1"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {**resource, "kind": "DataApp"},
            "resource": {**resource, "resource": "dataapps"},
            "requestKind": {**resource, "kind": "DataApp"},
            "requestResource": {**resource, "resource": "dataapps"},
            "name": "probe",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "nobody-at-all", "groups": ["system:authenticated"]},
            "object": app,
            "oldObject": None,
            "dryRun": True,
        },
    }


def test_as_the_chart_ships_only_the_api_server_reaches_the_webhook(release: Release) -> None:
    """R4-10: client authentication is on by default. The webhook made the API server's client
    certificate at its first start and trusts it alone; once the node's API server presents it
    (present_webhook_client, as NOTES.txt tells a cluster admin), writes are checked, while a
    Pod that posts a review to the webhook's Service gets no answer, and the webhook's log says
    which caller it refused and what to do."""
    cluster = release.cluster
    made = json.loads(
        cluster.kubectl(
            "get", "secret", f"{RELEASE}-webhook-client", "-n", SYSTEM, "-o", "json"
        ).stdout
    )
    assert made["type"] == "kubernetes.io/tls"
    assert set(made["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    assert "ownerReferences" not in made["metadata"]  # helm uninstall keeps it
    url = f"https://{RELEASE}-webhook.{SYSTEM}.svc:9443/link-policy"
    review = _link_review(PROJECT, "vendor-api")
    pods.apply(cluster, pods.forged_review(PROJECT, "forged-closed", url, review))
    refused = pods.summary(cluster, PROJECT, "forged-closed", timeout=90)
    assert refused["ok"] is False, refused
    logs = cluster.kubectl(
        "logs", "-n", SYSTEM, "-l", "app.kubernetes.io/component=webhook", "--tail=-1"
    ).stdout
    assert "refused a caller in the TLS handshake: it presented no client certificate" in logs

    # Through the API server, which presents the certificate: the webhook still decides.
    test = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ConnectionTest",
        "metadata": {"name": "post-probe"},
        "spec": {"connection": "vendor-api", "method": "POST", "path": "/v1/orders"},
    }
    done = cluster.kubectl(
        "create", "--dry-run=server", "-n", PROJECT, "-f", "-",
        stdin=yaml.safe_dump(test), check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert 'admission webhook "connection-test.gatehouse.dev" denied the request' in done.stderr
    assert "spec.method: POST is not one of the connection's allowedMethods" in done.stderr


def test_a_value_sealed_with_the_cli_opens_in_the_operator_alone(
    release: Release, tmp_path: Path
) -> None:
    """The chart as installed: the operator made its sealing keys and published the public
    ones for any user; a value sealed with ``gatehouse seal`` (chart defaults, no options)
    makes a connection Ready; no Pod uses the sealing keys' Secret."""
    cluster = release.cluster
    connection = yaml.safe_load_all(CONNECTION)
    document = next(doc for doc in connection if doc["kind"] == "ExternalConnection")
    document["metadata"] = {"name": "sealed-api", "namespace": PROJECT}
    source = tmp_path / "sealed-api.yaml"
    source.write_text(yaml.safe_dump(document))
    sealed = subprocess.run(
        [sys.executable, "-m", "gatehouse_operator.cli.gatehouse", "seal", "-f", str(source)],
        input=API_KEY,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )
    assert sealed.returncode == 0, sealed.stderr
    assert API_KEY not in sealed.stdout
    cluster.kubectl("apply", "-f", "-", stdin=sealed.stdout)
    cluster.kubectl(
        "wait", "-n", PROJECT, "externalconnection/sealed-api", "--for=condition=Ready",
        "--timeout=60s",
    )  # fmt: skip
    # Made by the operator, and used by no Pod: no kubelet may read it.
    cluster.kubectl("get", "secret", f"{RELEASE}-sealing-keys", "-n", SYSTEM)
    listed = json.loads(cluster.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    used = set().union(*(secrets_used(pod["spec"]) for pod in listed))
    assert f"{RELEASE}-keyring" in used  # the proxies'
    assert f"{RELEASE}-sealing-keys" not in used
    cluster.kubectl("delete", "externalconnection", "sealed-api", "-n", PROJECT)


def test_the_operator_pod_serves_the_connections_page(release: Release) -> None:
    """Its templates and styles ship in the image and load on a read-only root filesystem."""
    cluster = release.cluster
    api = f"http://{RELEASE}-operator.{SYSTEM}.svc:8082"
    urls = [f"{api}/ui/sign-in", f"{api}/ui/static/page.css"]
    pods.apply(cluster, pods.page_reader(PROJECT, "page-once", urls))
    result = pods.summary(cluster, PROJECT, "page-once", timeout=90)
    sign_in, style = (result["pages"][url] for url in urls)
    assert sign_in[0] == 200, sign_in
    assert '<textarea name="token"' in sign_in[1]
    assert style[0] == 200, style
    assert "--accent" in style[1]


def test_gatehouse_open_signs_a_browser_in_through_the_port_forward_the_notes_name(
    release: Release, browser: Browser, tmp_path: Path
) -> None:
    """Issue 50, signing in with the chart as it ships, the way its NOTES say: the operator's
    Service port-forwarded, ``gatehouse open --server`` as a project member's kubeconfig (a
    SignInRequest admitted by the webhook Pod, which the API server calls with its client
    certificate; the code sealed to the command's key), and the link opened in Chromium: signed
    in as that member, once. A code read by another member, spliced onto another member's
    request, reused or late signs nobody in."""
    cluster = release.cluster
    notes = helm(cluster, "status", RELEASE, "-n", SYSTEM)
    assert f"kubectl -n {SYSTEM} port-forward {page.OPERATOR_SERVICE} 8082" in notes, notes
    assert "gatehouse open -n <project namespace> --server http://localhost:8082" in notes, notes
    members = project_members(cluster, PROJECT)
    admin, builder = members["admin"], members["builder"]

    def kubeconfig(member: str) -> Path:
        return cluster.token_kubeconfig(
            member, members[member].token, tmp_path / f"{member}.kubeconfig"
        )

    with page.forwarded(cluster, tmp_path) as url:
        link = page.gatehouse_open(kubeconfig("admin"), PROJECT, url)
        context = browser.new_context()
        context.set_default_timeout(15_000)
        try:
            tab = signed_in(context, link, admin.persona.name)
            tab.goto(f"{url}/ui/namespaces/{PROJECT}/connections")
            assert "vendor-api" in tab.inner_text("#connections")
            refused_again(context, link)
        finally:
            context.close()

        def refused(code: str) -> str:
            answer = httpx.post(
                f"{url}/ui/sign-in/code", data={"code": code, "confirm": "yes"}, timeout=10
            )
            assert answer.status_code == 401, answer.text
            assert "set-cookie" not in answer.headers
            said = re.search(r'class="error" role="alert">([^<]+)<', answer.text)
            assert said is not None, answer.text
            return said.group(1)

        # The builder may read the admin's SignInRequest: its sealed code is no code.
        admins = code_of(page.gatehouse_open(kubeconfig("admin"), PROJECT, url))
        name = admins.split(":")[1]
        seen = json.loads(
            cluster.kubectl(
                "get", "signinrequest", name, "-n", PROJECT, "-o", "json", as_user=builder.persona
            ).stdout
        )
        assert refused(f"{PROJECT}:{name}:{seen['status']['sealedCode']}")
        # The builder's own secret on the admin's request: to become the admin.
        builders = code_of(page.gatehouse_open(kubeconfig("builder"), PROJECT, url))
        assert "does not match" in refused(f"{PROJECT}:{name}:{builders.rsplit(':', 1)[1]}")
        # Late: as if its minute had passed.
        cluster.kubectl(
            "patch", "signinrequest", name, "-n", PROJECT, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"expiresAt": "2020-01-01T00:00:00Z"}}),
        )  # fmt: skip
        assert refused(admins) in (sign_in_codes.LATE, sign_in_codes.USED_OR_UNKNOWN)
        # Each code that is its own still signs in as its own requester, once.
        own = httpx.post(
            f"{url}/ui/sign-in/code", data={"code": builders, "confirm": "yes"}, timeout=10
        )
        assert own.status_code == 303, own.text
        assert "used already" in refused(builders)
    # No log of the operator or webhook Pods holds a code's secret.
    logs = "".join(
        cluster.kubectl(
            "logs", "-n", SYSTEM, "-l", f"app.kubernetes.io/component={component}",
            "--all-containers", "--tail=-1",
        ).stdout
        for component in ("operator", "webhook")
    )  # fmt: skip
    for code in (code_of(link), admins, builders):
        assert code.rsplit(":", 1)[1] not in logs


def test_a_killed_proxy_pod_leaves_the_service_answering(release: Release) -> None:
    cluster = release.cluster
    pods.apply(
        cluster,
        pods.client(
            PROJECT, "under-kill", url=PROXY_URL, token_secret=release.token_secret, seconds=30
        ),
    )
    pods.wait_started(cluster, PROJECT, "under-kill")
    time.sleep(3)  # the client runs against both replicas first
    victim = sorted(proxy_pods(cluster))[0]
    killed_at = time.time()
    cluster.kubectl("delete", "pod", victim, "-n", SYSTEM, "--grace-period=0", "--force")
    result = pods.summary(cluster, PROJECT, "under-kill", timeout=120)
    failures = [
        line for line in pods.log_lines(cluster, PROJECT, "under-kill") if "failure" in line
    ]
    # Requests in flight on the killed Pod may fail; the Service answers again at once.
    assert result["ok"] > 100, result
    assert all(line["at"] - killed_at < 5 for line in failures), failures
    rollout(cluster, "proxy")
    replicas = proxy_pods(cluster)
    assert victim not in replicas
    assert len(replicas) == 2
    assert all(replicas.values()), replicas


def test_helm_upgrade_rolls_the_proxies_with_no_failed_request(release: Release) -> None:
    cluster = release.cluster
    before = set(proxy_pods(cluster))
    pods.apply(
        cluster,
        pods.client(
            PROJECT, "under-upgrade", url=PROXY_URL, token_secret=release.token_secret, seconds=75
        ),
    )
    pods.wait_started(cluster, PROJECT, "under-upgrade")
    # Settings the proxies read at start: the upgrade replaces every replica, with Pods of two
    # workers each (ready only when both hold the table, through the supervisor's /readyz).
    helm(
        cluster,
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        SYSTEM,
        "--reuse-values",
        "--set",
        "proxy.requestReadTimeoutSeconds=16",
        "--set",
        "proxy.workers=2",
        "--set",
        "proxy.resources.limits.memory=512Mi",
        "--wait",
        "--timeout=5m",
    )
    rollout(cluster, "proxy")
    after = set(proxy_pods(cluster))
    assert not before & after, "the upgrade did not replace the proxies"
    for pod in after:
        # The Pod's readiness, spoken for by its supervisor: both workers hold the table.
        ready = json.loads(
            cluster.kubectl(
                "get", "--raw", f"/api/v1/namespaces/{SYSTEM}/pods/{pod}:9090/proxy/readyz"
            ).stdout
        )
        assert [worker["ready"] for worker in ready["workers"]] == [True, True], ready
    result = pods.summary(cluster, PROJECT, "under-upgrade", timeout=150)
    failures = [
        line for line in pods.log_lines(cluster, PROJECT, "under-upgrade") if "failure" in line
    ]
    assert result.get("failed") == 0, failures
    assert result["ok"] > 300, result


def test_helm_uninstall_leaves_nothing_and_project_namespaces_delete(release: Release) -> None:
    cluster = release.cluster
    helm(cluster, "uninstall", RELEASE, "-n", SYSTEM, "--wait", "--timeout=3m")
    cluster.kubectl("delete", "namespace", PROJECT, "--wait=false")

    def gone(kind: str, name: str) -> bool:
        return cluster.kubectl("get", kind, name, check=False).returncode != 0

    wait_for(lambda: gone("namespace", PROJECT), timeout=90, interval=1, what="shop deleted")
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        names = cluster.kubectl("get", kind, "-o", "name").stdout
        assert "gatehouse" not in names, names
    for kind in ("clusterroles", "clusterrolebindings"):
        owned = cluster.kubectl(
            "get", kind, "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "name"
        ).stdout
        assert owned == "", owned
    # The Pods finish their graceful stop (preStop sleep, in-flight requests) and go.
    wait_for(
        lambda: not cluster.kubectl("get", "pods", "-n", SYSTEM, "-o", "name").stdout.strip(),
        timeout=90,
        interval=1,
        what="the release's Pods gone",
    )
    # Kept by design (crds.keep): deleting a CRD would delete every resource of its kind.
    kept = cluster.kubectl("get", "crd", "-o", "name").stdout.split()
    assert len([name for name in kept if name.endswith(".gatehouse.dev")]) == len(KINDS), kept
    # What stays, by design: the keyring and the sealing keys the operator made (what was
    # sealed with them must stay readable if the release comes back, and the sealing keys open
    # values in Git), the store's password (the operator's too: a reinstall reuses it), and the
    # API server's client certificate the webhook made (the control plane's copy of it must
    # hold for a reinstall). Nothing else of the release.
    left = cluster.kubectl(
        "get", "all,secrets,configmaps,serviceaccounts,roles,rolebindings,pvc", "-n", SYSTEM,
        "-o", "name",
    ).stdout.split()  # fmt: skip
    assert [name for name in left if "gatehouse" in name] == [
        f"secret/{RELEASE}-keyring",
        f"secret/{RELEASE}-sealing-keys",
        f"secret/{RELEASE}-store",
        f"secret/{RELEASE}-webhook-client",
    ], left
    cluster.kubectl("delete", "namespace", SYSTEM, "--wait=false")
    wait_for(lambda: gone("namespace", SYSTEM), timeout=90, interval=1, what="release deleted")


@pytest.fixture
def chart_registry(tmp_path: Path, release: Release) -> Iterator[str]:
    """A real OCI registry on 127.0.0.1 (CNCF distribution's) holding the packaged chart, pushed
    as docs/operating/releases.md, "Releases: the images and the chart", pushes it:
    ``oci://HOST:PORT/charts``."""
    cluster = release.cluster
    server = Server(
        "registry",
        [str(ensure_registry()), f"127.0.0.1:{free_port()}", str(tmp_path / "blobs")],
        tmp_path / "registry.log",
    )
    address = server.argv[1]
    server.start(detached=False)
    try:
        server.wait_until(lambda: _answers(f"http://{address}/v2/"), timeout=30)
        helm(cluster, "package", str(CHART), "--destination", str(tmp_path))
        (package,) = tmp_path.glob("gatehouse-*.tgz")
        helm(cluster, "push", str(package), f"oci://{address}/charts", "--plain-http")
        yield f"oci://{address}/charts"
    finally:
        server.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (a fixed local URL)
            return bool(answer.status == 200)
    except OSError:
        return False


def test_an_umbrella_chart_with_gatehouse_as_a_dependency_installs(
    release: Release, tmp_path: Path, chart_registry: str
) -> None:
    """A platform team's own chart that depends on Gatehouse's package in an OCI registry, with
    globals of its own (Helm passes them to every subchart) and a second release's names."""
    cluster = release.cluster
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    umbrella = tmp_path / "platform"
    umbrella.mkdir()
    (umbrella / "Chart.yaml").write_text(
        "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n"
        f"  - {{name: gatehouse, version: '{version}', repository: '{chart_registry}'}}\n"
    )
    (umbrella / "values.yaml").write_text(
        "global: {team: data, imageRegistry: ''}\n"
        "gatehouse:\n"
        # The earlier release kept its CRDs (crds.keep), owned by it: this one leaves them be.
        "  crds: {enabled: false}\n"
        "  commonLabels: {team: data}\n"
        "  operator: {replicas: 1}\n"
        "  webhook: {replicas: 1}\n"
        "  proxy: {replicas: 1}\n"
    )
    helm(cluster, "dependency", "build", str(umbrella), "--plain-http")
    namespace = "platform-system"
    helm(
        cluster, "install", "platform", str(umbrella), "-n", namespace, "--create-namespace",
        "--wait", "--timeout=5m",
    )  # fmt: skip
    present_webhook_client(cluster, "platform", namespace, fullname="platform-gatehouse")
    try:
        for component in ("operator", "webhook", "proxy", "store"):
            cluster.kubectl(
                "rollout", "status", f"deployment/platform-gatehouse-{component}", "-n",
                namespace, "--timeout=180s", timeout=190,
            )  # fmt: skip
        labelled = cluster.kubectl(
            "get", "deployments", "-n", namespace, "-l", "team=data", "-o", "name"
        ).stdout.split()
        assert len(labelled) == 4, labelled
    finally:
        helm(cluster, "uninstall", "platform", "-n", namespace, "--wait", "--timeout=3m")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
