"""The release the node tests install: the chart, its test values, the project's connection,
and the helm and rollout commands they share."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gatehouse_dev import controlplane
from gatehouse_dev.cluster import Cluster

CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"
RELEASE = "gatehouse"
SYSTEM = "gatehouse-system"
PROJECT = "shop"
# Fixed addresses, so the installation opens exactly the upstream and the authorization server
# (the dev one: tokens and an API they open), not the cluster's Services.
UPSTREAM_IP = "10.96.200.200"
AUTHZ_IP = "10.96.200.201"
API_KEY = "sk_node_test_only_the_proxy_sees_this"
# What in-cluster http upstreams need; everything else is the chart's default.
TEST_UPSTREAM_VALUES = (
    "--set",
    "installation.allowHttpUpstreams=true",
    "--set",
    f"installation.allowedPrivateNetworks={{{UPSTREAM_IP}/32,{AUTHZ_IP}/32}}",
)
PROXY_URL = f"http://{RELEASE}-proxy.{SYSTEM}.svc/v1/fetch/vendor/v1/orders"
# The page as the tests' Pods reach it (operator.page.url): connect links and the redirect URI
# are made of it.
PAGE_URL = f"http://{RELEASE}-operator.{SYSTEM}.svc:8082"


def helm(cluster: Cluster, *args: str, timeout: float = 360) -> str:
    done = subprocess.run(
        [str(cluster.binaries.helm), *args],
        env=cluster.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def present_webhook_client(
    cluster: Cluster, release: str = RELEASE, namespace: str = SYSTEM, fullname: str = RELEASE
) -> None:
    """After an install as the chart ships (client authentication on, the webhook's own CA):
    the node's API server presents the client certificate the release's webhook made, as a
    cluster admin sets it up (NOTES.txt); until then every write the webhook checks is
    refused. ``fullname``: the chart's name for the release (``release`` alone when it holds
    "gatehouse")."""
    controlplane.present_webhook_client(cluster, namespace, f"{fullname}-webhook-client")


def rollout(cluster: Cluster, component: str) -> None:
    cluster.kubectl(
        "rollout",
        "status",
        f"deployment/{RELEASE}-{component}",
        "-n",
        SYSTEM,
        "--timeout=180s",
        timeout=190,
    )


CONNECTION = f"""
apiVersion: v1
kind: Secret
metadata: {{name: vendor-api, labels: {{gatehouse.dev/credential: "true"}}}}
stringData: {{api-key: {API_KEY}}}
---
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata: {{name: vendor-api}}
spec:
  displayName: Vendor API
  baseURL: http://upstream.upstream.svc.cluster.local
  allowedPaths: [/v1]
  linkPolicy: Builders
  # The clients below send 20 requests a second for a minute.
  limits: {{requestsPerMinute: 100000}}
  auth:
    type: apiKey
    apiKey: {{name: X-API-Key, in: header}}
    secretRef: {{name: vendor-api, key: api-key}}
---
apiVersion: gatehouse.dev/v1alpha1
kind: DataApp
metadata: {{name: dashboard}}
spec:
  connections: [{{alias: vendor, connection: vendor-api}}]
"""
