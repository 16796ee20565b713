"""What the node tests check of the shared store, whichever it is (the chart's own or an external
one): every proxy Pod counts with the fleet, and an OAuth 2.0 connection with a quota is Ready,
fetches with one token for the whole fleet, and admits its limit whichever Pod the requests
reach."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.node import pods

# The connection's limit a minute; the client sends three times as many, within seconds.
QUOTA = 10
CONNECTION = "crm"
APP = "crm-reader"
SAMPLE = re.compile(r"^(?P<name>\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
# A worker whose store did not answer within its deadline (a new TLS connection on a busy node
# can take longer) counts that request alone and admits at most its share: the e2e bound.
COUNTED_ALONE_AT_MOST = 2
LABEL = re.compile(r'(\w+)="([^"]*)"')


def proxy_pods(cluster: Cluster, namespace: str) -> list[str]:
    listed = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=proxy",
            "-o", "json",
        ).stdout
    )  # fmt: skip
    return sorted(
        pod["metadata"]["name"]
        for pod in listed["items"]
        if "deletionTimestamp" not in pod["metadata"]
    )


def _pod_path(namespace: str, pod: str, path: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{pod}:9090/proxy/{path}"


def readiness(cluster: Cluster, namespace: str, pod: str) -> dict[str, Any]:
    """The Pod's /readyz (on its metrics port), through the API server."""
    done = cluster.kubectl("get", "--raw", _pod_path(namespace, pod, "readyz"), check=False)
    answer: dict[str, Any] = json.loads(done.stdout) if done.stdout.startswith("{") else {}
    return answer


def wait_counting_shared(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """Every proxy Pod's store, once each counts with the fleet (the store may still be
    starting, or the proxies' probe waiting its turn)."""

    def stores() -> dict[str, dict[str, Any]] | None:
        found = {
            pod: readiness(cluster, namespace, pod).get("store", {})
            for pod in proxy_pods(cluster, namespace)
        }
        shared = all(store.get("counting") == "shared" for store in found.values())
        return found if found and shared else None

    return wait_for(stores, timeout=90, interval=1, what="every proxy counting with the store")


def _service_path(namespace: str, path: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/authz:http/proxy/{path}"


def register_client(
    cluster: Cluster, authz_namespace: str, redirect_uri: str = ""
) -> tuple[str, str]:
    """A client of the authorization server (basic authentication, hour-long tokens; with
    ``redirect_uri``, for the authorization code too)."""
    client_id = f"node-{secrets.token_hex(4)}"
    secret = "cs_" + secrets.token_urlsafe(24)
    body: dict[str, Any] = {"id": client_id, "secret": secret, "method": "basic", "lifetime": 3600}
    if redirect_uri:
        body["redirectUris"] = [redirect_uri]
    cluster.kubectl(
        "create", "--raw", _service_path(authz_namespace, "clients"), "-f", "-",
        stdin=json.dumps(body),
    )  # fmt: skip
    return client_id, secret


def authz_stats(cluster: Cluster, authz_namespace: str) -> dict[str, Any]:
    """What the authorization server counted: token requests (per client too), authorizations
    and its grants."""
    stats: dict[str, Any] = json.loads(
        cluster.kubectl("get", "--raw", _service_path(authz_namespace, "stats")).stdout
    )
    return stats


def token_requests(cluster: Cluster, authz_namespace: str, client_id: str) -> int:
    return int(authz_stats(cluster, authz_namespace)["clients"].get(client_id, 0))


def oauth2_connection(client_id: str, secret: str, authz_namespace: str) -> str:
    """A connection to the authorization server's API with its client's credentials and a quota
    of QUOTA a minute, and an app linking it."""
    authz = f"http://authz.{authz_namespace}.svc.cluster.local"
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "crm-client", "labels": {"gatehouse.dev/credential": "true"}},
            "stringData": {"secret": secret},
        },
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ExternalConnection",
            "metadata": {"name": CONNECTION},
            "spec": {
                "displayName": "CRM",
                "baseURL": authz,
                "allowedPaths": ["/api"],
                "linkPolicy": "Builders",
                "limits": {"requestsPerMinute": QUOTA},
                "auth": {
                    "type": "oauth2ClientCredentials",
                    "oauth2ClientCredentials": {
                        "tokenURL": f"{authz}/token",
                        "clientId": client_id,
                        "scopes": ["crm.read"],
                        "clientAuthentication": "basic",
                    },
                    "secretRef": {"name": "crm-client", "key": "secret"},
                },
            },
        },
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "DataApp",
            "metadata": {"name": APP},
            "spec": {"connections": [{"alias": "crm", "connection": CONNECTION}]},
        },
    ]
    return yaml.safe_dump_all(documents)


def connection_total(cluster: Cluster, namespace: str, pod: str, project: str, metric: str) -> int:
    """One proxy Pod's ``metric`` for the connection, summed over its other labels, by its own
    metrics."""
    text = cluster.kubectl("get", "--raw", _pod_path(namespace, pod, "metrics")).stdout
    total = 0
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None or match.group("name") != metric:
            continue
        labels = dict(LABEL.findall(match.group("labels")))
        if labels.get("namespace") == project and labels.get("connection") == CONNECTION:
            total += int(float(match.group("value")))
    return total


def check_fleet(
    cluster: Cluster, *, system: str, release: str, project: str, authz_namespace: str
) -> None:
    """The checks, with the connection made in ``project``; the authorization server runs in
    ``authz_namespace``."""
    stores = wait_counting_shared(cluster, system)
    assert len(stores) == 2, stores
    client_id, secret = register_client(cluster, authz_namespace)
    cluster.kubectl(
        "apply",
        "-n",
        project,
        "-f",
        "-",
        stdin=oauth2_connection(client_id, secret, authz_namespace),
    )
    for resource in (f"externalconnection/{CONNECTION}", f"dataapp/{APP}"):
        cluster.kubectl(
            "wait", "-n", project, resource, "--for=condition=Ready", "--timeout=90s", timeout=100
        )
    url = f"http://{release}-proxy.{system}.svc/v1/fetch/crm/api/orders"
    pods.apply(
        cluster,
        pods.counting_client(
            project, "quota-client", url=url, token_secret=f"dataapp-{APP}-gatehouse",
            count=3 * QUOTA,
        ),
    )  # fmt: skip
    result = pods.summary(cluster, project, "quota-client", timeout=120)
    served = {
        pod: connection_total(cluster, system, pod, project, "gatehouse_proxy_requests_total")
        for pod in stores
    }
    alone = sum(
        connection_total(cluster, system, pod, project, "gatehouse_proxy_quota_counted_alone_total")
        for pod in stores
    )
    # The limit of the minute, whichever Pod each request reached, the rest refused; a request
    # counted alone may add one (its worker's share is below one request).
    statuses = result.get("statuses", {})
    assert sum(statuses.values()) == 3 * QUOTA, result
    assert alone <= COUNTED_ALONE_AT_MOST, (alone, result)
    assert QUOTA <= statuses.get("200", 0) <= QUOTA + alone, (alone, result)
    assert statuses.get("429", 0) == 3 * QUOTA - statuses.get("200", 0), result
    # The token reached the API; the app's credential did not.
    assert result["last"]["client"] == client_id
    assert result["last"]["scope"] == "crm.read"
    # One token for the fleet, and both Pods answered some of the requests.
    assert token_requests(cluster, authz_namespace, client_id) == 1
    assert all(served.values()), served
    assert sum(served.values()) == 3 * QUOTA, served
