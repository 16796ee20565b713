"""The chart with an external store: a Redis that the platform team runs beside Gatehouse (here
a Deployment of its own, in a namespace of its own, outside the release, with its own password,
serving TLS alone with a certificate of its own CA), named by ``store.external.url`` (rediss://),
``store.external.passwordSecret`` and ``store.external.ca``. The checks are the bundled
store's: both proxies count with it, an OAuth 2.0 connection fetches with one token for the
fleet, and a quota admits its limit across both proxy Pods; and the chart runs no store of its own.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gatehouse_dev import pki
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.node.images import chart_store_reference
from gatehouse_dev.waiting import wait_for
from tests.node import pods, store_checks
from tests.node.release import (
    AUTHZ_IP,
    CHART,
    PROJECT,
    RELEASE,
    SYSTEM,
    TEST_UPSTREAM_VALUES,
    helm,
    present_webhook_client,
    rollout,
)

pytestmark = pytest.mark.node

OUTSIDE = "outside-store"
HOST = f"redis.{OUTSIDE}.svc.cluster.local"
CONFIG = "/etc/redis-outside"


def _gone(cluster: Cluster, namespace: str) -> bool:
    return cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0


def redis(namespace: str, password: str, tls: pki.KeyPair, ca: Path) -> list[dict[str, Any]]:
    """A Redis of the team's own: the node's store image (Debian's redis-server) with a config
    of its own, a password, TLS alone (no plain port) and no NetworkPolicy."""
    labels = {"app": "redis"}
    config = (
        f"bind * -::*\nport 0\ntls-port 6379\ntls-cert-file {CONFIG}/tls.crt\n"
        f"tls-key-file {CONFIG}/tls.key\ntls-ca-cert-file {CONFIG}/ca.crt\ntls-auth-clients no\n"
        f'dir /data\nsave ""\nappendonly no\nrequirepass {password}\n'
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "redis-config", "namespace": namespace},
            "stringData": {
                "redis.conf": config,
                "tls.crt": tls.cert_path.read_text(),
                "tls.key": tls.key_path.read_text(),
                "ca.crt": ca.read_text(),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "redis", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": pods.SECURITY,
                        "containers": [
                            {
                                "name": "redis",
                                "image": chart_store_reference(),
                                "imagePullPolicy": "Never",
                                "command": ["redis-server", f"{CONFIG}/redis.conf"],
                                "ports": [{"containerPort": 6379}],
                                "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
                                "volumeMounts": [
                                    {"name": "config", "mountPath": CONFIG},
                                    {"name": "data", "mountPath": "/data"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "config", "secret": {"secretName": "redis-config"}},
                            {"name": "data", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "redis", "namespace": namespace},
            "spec": {"selector": labels, "ports": [{"port": 6379, "targetPort": 6379}]},
        },
    ]


@pytest.fixture(scope="module")
def external(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # The namespaces the files before deleted (the authorization server's Service holds a fixed
    # address).
    for namespace in ("upstream", PROJECT, SYSTEM, OUTSIDE):
        wait_for(partial(_gone, node, namespace), timeout=120, interval=1, what=f"{namespace} gone")
    password = secrets.token_urlsafe(24)
    authority = pki.CertificateAuthority(tmp_path_factory.mktemp("store-ca"), "team-store-ca")
    tls = authority.issue("redis", "redis", hosts=(HOST, "127.0.0.1"))
    node.kubectl("create", "namespace", OUTSIDE)
    pods.apply(node, redis(OUTSIDE, password, tls, authority.cert_path))
    node.kubectl("create", "namespace", "upstream")
    pods.apply(node, pods.token_endpoint("upstream", AUTHZ_IP))
    node.kubectl("create", "namespace", PROJECT)
    node.kubectl("create", "namespace", SYSTEM)
    node.kubectl(
        "create",
        "secret",
        "generic",
        "store-auth",
        "-n",
        SYSTEM,
        f"--from-literal=token={password}",
    )
    node.kubectl(
        "create", "configmap", "store-ca", "-n", SYSTEM, f"--from-file=ca.crt={authority.cert_path}"
    )
    try:
        helm(
            node, "install", RELEASE, str(CHART), "-n", SYSTEM, "--wait", "--timeout=5m",
            *TEST_UPSTREAM_VALUES,
            "--set", f"store.external.url=rediss://{HOST}:6379/0",
            "--set", "store.external.passwordSecret.name=store-auth",
            "--set", "store.external.passwordSecret.key=token",
            "--set", "store.external.ca.configMap=store-ca",
        )  # fmt: skip
        present_webhook_client(node)
        for component in ("operator", "webhook", "proxy"):
            rollout(node, component)
        yield node
    finally:
        helm(node, "uninstall", RELEASE, "-n", SYSTEM, "--wait", "--timeout=3m")
        for namespace in (PROJECT, "upstream", SYSTEM, OUTSIDE):
            node.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_the_chart_runs_no_store_of_its_own(external: Cluster) -> None:
    deployments = json.loads(
        external.kubectl("get", "deployments", "-n", SYSTEM, "-o", "json").stdout
    )["items"]
    assert {item["metadata"]["name"] for item in deployments} == {
        f"{RELEASE}-{component}" for component in ("operator", "webhook", "proxy")
    }
    # The operator makes no password: the team's Secret is the one the proxies mount.
    made = external.kubectl("get", "secret", f"{RELEASE}-store", "-n", SYSTEM, check=False)
    assert made.returncode != 0


def test_both_proxies_count_in_the_external_store_and_oauth2_fetches(external: Cluster) -> None:
    store_checks.check_fleet(
        external, system=SYSTEM, release=RELEASE, project=PROJECT, authz_namespace="upstream"
    )
    # The counts are in the team's Redis (which speaks TLS alone, so the proxies trusted its CA):
    # its keys name the connection's uid.
    uid = external.kubectl(
        "get", "externalconnection", store_checks.CONNECTION, "-n", PROJECT,
        "-o", "jsonpath={.metadata.uid}",
    ).stdout  # fmt: skip
    password = external.kubectl(
        "get", "secret", "store-auth", "-n", SYSTEM, "-o", "jsonpath={.data.token}"
    ).stdout
    keys = external.kubectl(
        "exec", "-n", OUTSIDE, "deployment/redis", "--", "sh", "-c",
        f'REDISCLI_AUTH="$(echo {password} | base64 -d)" redis-cli --tls --cacert {CONFIG}/ca.crt'
        f' -h 127.0.0.1 --scan --pattern "*{uid}*"',
    ).stdout.split()  # fmt: skip
    assert keys, "no key of the connection in the external store"
