"""The Helm chart installs on the real API server; its keyring survives upgrades; RBAC is tight."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.api import roles
from gatehouse_proxy.sealing import Keyring
from gatehouse_proxy.settings import ProxySettings

pytestmark = pytest.mark.e2e

CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"


@pytest.fixture(autouse=True)
def crds(cluster: Cluster, tmp_path: Path) -> None:
    LocalGatehouse(cluster, tmp_path).install_crds()


# The suite's cluster already has the CRDs and user roles (installed as `make up` does), and both
# are cluster-wide: a second owner would conflict.
IN_SHARED_CLUSTER = ("--skip-crds", "--set", "userRoles.create=false")


def _helm(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(
        [str(cluster.binaries.helm), *args],
        env=cluster.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _keyring(cluster: Cluster, namespace: str, release: str) -> str:
    secret = json.loads(
        cluster.kubectl(
            "get", "secret", f"{release}-gatehouse-keyring", "-n", namespace, "-o", "json"
        ).stdout
    )
    return base64.b64decode(secret["data"]["keyring.json"]).decode()


def _can(cluster: Cluster, subject: str, verb: str, resource: str) -> bool:
    done = cluster.kubectl("auth", "can-i", verb, resource, "-A", f"--as={subject}", check=False)
    return done.stdout.strip() == "yes"


def test_chart_installs_and_keeps_its_keyring(cluster: Cluster, namespace: str) -> None:
    # All digits (and unique: ClusterRoles are cluster-wide): label values must be quoted.
    release = f"{int(namespace[-8:], 16) % 10**8:08d}"
    _helm(cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
    first = _keyring(cluster, namespace, release)
    assert len(Keyring.parse(first).key_ids) == 1
    _helm(
        cluster,
        "upgrade",
        release,
        str(CHART),
        "-n",
        namespace,
        *IN_SHARED_CLUSTER,
        "--set",
        "proxy.replicas=3",
    )
    assert _keyring(cluster, namespace, release) == first

    deployments = json.loads(
        cluster.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout
    )["items"]
    by_name = {item["metadata"]["name"]: item for item in deployments}
    proxy = by_name[f"{release}-gatehouse-proxy"]
    assert proxy["spec"]["replicas"] == 3
    operator = by_name[f"{release}-gatehouse-operator"]
    assert operator["spec"]["strategy"]["type"] == "Recreate"
    container = proxy["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_chart_rbac_grants_what_the_operator_uses_and_nothing_to_the_proxy(
    cluster: Cluster, namespace: str
) -> None:
    release = namespace[-8:]
    _helm(cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
    operator = f"system:serviceaccount:{namespace}:{release}-gatehouse-operator"
    proxy = f"system:serviceaccount:{namespace}:{release}-gatehouse-proxy"
    # The authorizer sees a new ClusterRoleBinding a moment after it is created.
    wait_for(
        lambda: _can(cluster, operator, "list", "externalconnections.gatehouse.dev"),
        timeout=10,
        what="the chart's RBAC to take effect",
    )
    for verb, resource in [
        ("watch", "externalconnections.gatehouse.dev"),
        ("patch", "externalconnections.gatehouse.dev/status"),
        ("patch", "dataapps.gatehouse.dev/status"),
        ("patch", "charttypes.gatehouse.dev"),
        ("create", "secrets"),
        ("watch", "secrets"),
        ("create", "events"),
        ("list", "customresourcedefinitions.apiextensions.k8s.io"),
        ("create", "connectiontests.gatehouse.dev"),
        ("patch", "projectconfigs.gatehouse.dev/status"),
        ("delete", "connectiontests.gatehouse.dev"),
        ("update", "configmaps"),
        ("create", "tokenreviews.authentication.k8s.io"),
        ("create", "subjectaccessreviews.authorization.k8s.io"),
        ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
    ]:
        assert _can(cluster, operator, verb, resource), (verb, resource)
    assert not _can(cluster, operator, "delete", "externalconnections.gatehouse.dev")
    assert not _can(cluster, operator, "create", "pods")
    assert not _can(cluster, proxy, "get", "secrets")
    assert not _can(cluster, proxy, "list", "externalconnections.gatehouse.dev")


def test_chart_ships_the_generated_user_roles(cluster: Cluster) -> None:
    rendered = yaml.safe_load_all(_helm(cluster, "template", "gh", str(CHART)))
    shipped = [doc for doc in rendered if doc and doc["kind"] == "ClusterRole"]
    by_name = {doc["metadata"]["name"]: doc for doc in shipped}
    for role in roles.roles():
        assert by_name[role["metadata"]["name"]] == role


def test_the_proxy_reads_every_setting_the_chart_gives_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = yaml.safe_load_all(
        _helm(
            cluster,
            "template",
            "gh",
            str(CHART),
            "--set",
            "proxy.requestReadTimeoutSeconds=7",
            "--set",
            "installation.allowHttpUpstreams=true",
            "--set",
            "installation.allowedPrivateNetworks={10.20.0.0/16}",
        )
    )
    proxy = next(
        doc
        for doc in rendered
        if doc and doc["metadata"]["name"] == "gh-gatehouse-proxy" and doc["kind"] == "Deployment"
    )
    env = {
        item["name"]: item["value"]
        for item in proxy["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = ProxySettings.from_env()
    assert settings.request_read_timeout_seconds == 7
    assert settings.allow_http is True
    assert settings.allowed_private_networks == ("10.20.0.0/16",)
    assert settings.operator_url.startswith("http://gh-gatehouse-operator.")
