"""The Helm chart installs on the real API server; its keyring survives upgrades; RBAC is tight."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio import config

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.pki import CertificateAuthority
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.access.webhook_clients import client_certificate_authority
from gatehouse_operator.access.webhook_server import shared_certificate
from gatehouse_operator.api import roles
from gatehouse_operator.api.crds import KINDS
from gatehouse_operator.keys.keyring_secret import KeyringSecret
from gatehouse_operator.keys.sealing_secret import SealingKeysSecret
from gatehouse_operator.keys.store_secret import StoreSecret
from gatehouse_operator.kube import Kube
from gatehouse_operator.settings import OperatorSettings, WebhookSettings
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.store.shares import ShareSettings

pytestmark = pytest.mark.e2e

CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"


@pytest.fixture(autouse=True)
def crds(cluster: Cluster, tmp_path: Path) -> None:
    LocalGatehouse(cluster, tmp_path).install_crds()


# The suite's cluster already has the CRDs and user roles (installed as `make up` does), and both
# are cluster-wide: a second owner would conflict.
IN_SHARED_CLUSTER = ("--set", "crds.enabled=false", "--set", "userRoles.create=false")


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


def _can(cluster: Cluster, subject: str, verb: str, resource: str, namespace: str = "") -> bool:
    """Whether ``subject`` may: in ``namespace``, or in every namespace when none is given."""
    where = ["-n", namespace] if namespace else ["-A"]
    done = cluster.kubectl("auth", "can-i", verb, resource, *where, f"--as={subject}", check=False)
    return done.stdout.strip() == "yes"


@pytest.fixture
def release(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A release name, uninstalled afterwards: its webhooks (failure policy Fail) would refuse
    every other test's apps, as no operator of its own runs here."""
    # All digits (and unique: ClusterRoles are cluster-wide): label values must be quoted.
    name = f"{int(namespace[-8:], 16) % 10**8:08d}"
    yield name
    subprocess.run(
        [str(cluster.binaries.helm), "uninstall", name, "-n", namespace, "--ignore-not-found"],
        env=cluster.env(),
        capture_output=True,
        timeout=120,
        check=False,
    )


def _resource_versions(
    cluster: Cluster, namespace: str, documents: list[dict[str, Any]]
) -> dict[str, str]:
    versions = {}
    for document in documents:
        kind, name = document["kind"], document["metadata"]["name"]
        live = json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
        versions[f"{kind}/{name}"] = live["metadata"].pop("resourceVersion")
        if kind == "PersistentVolumeClaim":
            # The API server writes a claim again at every apply, unchanged but for its
            # resourceVersion (kube-apiserver 1.36): what it holds must not change.
            versions[f"{kind}/{name}"] = json.dumps(live, sort_keys=True)
    return versions


def test_the_render_is_the_same_every_time_and_reapplying_it_changes_nothing(
    cluster: Cluster, namespace: str, release: str
) -> None:
    """As a GitOps tool uses the chart: `helm template` on every sync, applied server-side."""
    render = ("template", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
    first = _helm(cluster, *render)
    assert _helm(cluster, *render) == first
    documents = [doc for doc in yaml.safe_load_all(first) if doc]
    # No key material at render time: the operator makes the keyring Secret when it starts.
    assert not [doc for doc in documents if doc["kind"] == "Secret"]
    manifests = first
    apply = ("apply", "--server-side", "--field-manager=gitops", "-n", namespace, "-f", "-")
    try:
        cluster.kubectl(*apply, stdin=manifests)
        # What the operator does at its start: the CA bundle is its field, never the render's.
        webhook = f"{release}-gatehouse-{namespace}"
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
        names = [hook["name"] for hook in next(
            doc for doc in documents if doc["kind"] == "ValidatingWebhookConfiguration"
        )["webhooks"]]  # fmt: skip
        patch = {"webhooks": [{"name": name, "clientConfig": {"caBundle": ca}} for name in names]}
        cluster.kubectl(
            "patch", "validatingwebhookconfiguration", webhook, "--type=strategic",
            "-p", json.dumps(patch),
        )  # fmt: skip
        before = _resource_versions(cluster, namespace, documents)
        cluster.kubectl(*apply, stdin=manifests)
        assert _resource_versions(cluster, namespace, documents) == before
        live = json.loads(
            cluster.kubectl("get", "validatingwebhookconfiguration", webhook, "-o", "json").stdout
        )
        assert {hook["clientConfig"].get("caBundle") for hook in live["webhooks"]} == {ca}
    finally:
        cluster.kubectl("delete", "-n", namespace, "-f", "-", "--wait=false", stdin=manifests)


def test_chart_installs_and_upgrades(cluster: Cluster, namespace: str, release: str) -> None:
    _helm(cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
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
    deployments = json.loads(
        cluster.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout
    )["items"]
    by_name = {item["metadata"]["name"]: item for item in deployments}
    proxy = by_name[f"{release}-gatehouse-proxy"]
    assert proxy["spec"]["replicas"] == 3
    # Elected replicas overlap safely; the webhook is a Deployment of its own, with replicas.
    operator = by_name[f"{release}-gatehouse-operator"]
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    webhook = by_name[f"{release}-gatehouse-webhook"]
    assert webhook["spec"]["replicas"] == 2
    # The bundled store: one Pod, never two at once (a second, empty store would split the
    # fleet's counts), and no disruption budget (one would block every drain).
    store = by_name[f"{release}-gatehouse-store"]
    assert store["spec"]["replicas"] == 1
    assert store["spec"]["strategy"] == {"type": "Recreate"}
    budgets = json.loads(
        cluster.kubectl("get", "poddisruptionbudgets", "-n", namespace, "-o", "json").stdout
    )["items"]
    assert {item["metadata"]["name"] for item in budgets} == {
        f"{release}-gatehouse-{component}" for component in ("operator", "webhook", "proxy")
    }
    container = proxy["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "metrics",
        "scheme": "HTTP",
    }


def test_chart_rbac_grants_what_the_operator_uses_and_nothing_to_the_proxy(
    cluster: Cluster, namespace: str, release: str
) -> None:
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
        ("create", "connectionsamples.gatehouse.dev"),
        ("delete", "connectionsamples.gatehouse.dev"),
        ("create", "tokenreviews.authentication.k8s.io"),
        ("create", "subjectaccessreviews.authorization.k8s.io"),
    ]:
        assert _can(cluster, operator, verb, resource), (verb, resource)
    # The webhook's configuration is the webhook's to fill in.
    configuration = f"validatingwebhookconfigurations/{release}-gatehouse-{namespace}"
    assert not _can(cluster, operator, "patch", configuration)
    assert not _can(cluster, operator, "delete", "externalconnections.gatehouse.dev")
    assert not _can(cluster, operator, "create", "pods")
    # No rule reaches ConfigMaps (kube-system's aws-auth included): RBAC cannot narrow one to
    # Gatehouse's own.
    for verb in ("get", "list", "create", "update", "patch", "delete"):
        assert not _can(cluster, operator, verb, "configmaps"), verb
    assert not _can(cluster, proxy, "get", "secrets")
    assert not _can(cluster, proxy, "list", "externalconnections.gatehouse.dev")

    # The sealing keys: a Secret of their own, and their public halves published in one
    # ConfigMap of the release's namespace that every authenticated user may read.
    keyring, public = f"secrets/{release}-gatehouse-keyring", f"{release}-gatehouse-sealing-keys"
    assert _can(cluster, operator, "get", f"secrets/{public}", namespace)
    assert _can(cluster, operator, "patch", f"configmaps/{public}", namespace)
    assert not _can(cluster, operator, "create", "configmaps", namespace)  # the chart's
    assert not _can(cluster, operator, "get", "configmaps/other", namespace)
    anyone = "system:serviceaccount:default:anyone"
    assert _can(cluster, anyone, "get", f"configmaps/{public}", namespace)
    assert not _can(cluster, anyone, "get", "configmaps/other", namespace)
    for reader in (anyone, proxy):
        assert not _can(cluster, reader, "get", f"secrets/{public}", namespace)
    assert not _can(cluster, proxy, "get", keyring, namespace)
    # The bundled store's password: the operator makes and reads it by name; nobody else.
    store = f"secrets/{release}-gatehouse-store"
    assert _can(cluster, operator, "get", store, namespace)
    assert not _can(cluster, proxy, "get", store, namespace)

    # The webhook reads what its checks need, and holds no Secret but its certificate's.
    webhook = f"system:serviceaccount:{namespace}:{release}-gatehouse-webhook"
    for verb, resource in [
        ("get", "externalconnections.gatehouse.dev"),
        ("list", "projectconfigs.gatehouse.dev"),
        ("create", "subjectaccessreviews.authorization.k8s.io"),
        ("patch", configuration),
        ("get", f"secrets/{release}-gatehouse-webhook-tls"),
        # The API server's client certificate, which it makes by default (R4-10).
        ("get", f"secrets/{release}-gatehouse-webhook-client"),
    ]:
        assert _can(cluster, webhook, verb, resource, namespace), (verb, resource)
    # Only the chart's own webhook configuration, and never one of its own making.
    assert not _can(cluster, webhook, "patch", "validatingwebhookconfigurations/other")
    assert not _can(cluster, webhook, "create", "validatingwebhookconfigurations")
    assert not _can(cluster, webhook, "get", f"secrets/{release}-gatehouse-keyring", namespace)
    for verb in ("list", "watch", "update"):
        assert not _can(cluster, webhook, verb, "secrets", namespace), verb
    assert not _can(cluster, webhook, "create", "secrets", "default")
    assert not _can(cluster, webhook, "update", "externalconnections.gatehouse.dev")


def test_the_operator_may_change_only_the_leader_label_of_a_pod(
    cluster: Cluster, namespace: str, release: str
) -> None:
    """RBAC lets the operator patch Pods in its namespace (it cannot name Pods that do not exist
    yet); the chart's ValidatingAdmissionPolicy holds it to the leader label."""
    _helm(cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "neighbour", "labels": {"app": "neighbour"}},
        "spec": {"containers": [{"name": "main", "image": "neighbour:1"}]},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    operator = f"--as=system:serviceaccount:{namespace}:{release}-gatehouse-operator"

    def patch(change: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "patch", "pod", "neighbour", "-n", namespace, "--type=merge",
            "-p", json.dumps(change), operator, check=False,
        )  # fmt: skip

    # The API server loads a new policy a moment after it is created: until a harmless change
    # is refused, it is not in force yet.
    probes = iter(range(1000))
    wait_for(
        lambda: (
            "may change only"
            in patch({"metadata": {"labels": {"probe": str(next(probes))}}}).stderr
        ),
        timeout=20,
        what="the chart's admission policy in force",
    )
    leader = {"metadata": {"labels": {"gatehouse.dev/leader": f"{release}-gatehouse-operator"}}}
    assert patch(leader).returncode == 0
    assert patch({"metadata": {"labels": {"gatehouse.dev/leader": None}}}).returncode == 0
    missing_owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "gone",
        "uid": "00000000-0000-0000-0000-000000000000",
    }
    for change in (
        {"spec": {"containers": [{"name": "main", "image": "attacker:1"}]}},
        {"metadata": {"labels": {"app": "elsewhere"}}},
        {"metadata": {"annotations": {"note": "x"}}},
        # A Pod that can never be deleted, and one the garbage collector deletes.
        {"metadata": {"finalizers": ["example.com/hold"]}},
        {"metadata": {"ownerReferences": [missing_owner]}},
    ):
        refused = patch(change)
        assert refused.returncode != 0, change
        assert "may change only a Pod's gatehouse.dev/leader label" in refused.stderr
    image = cluster.kubectl(
        "get", "pod", "neighbour", "-n", namespace, "-o", "jsonpath={.spec.containers[0].image}"
    ).stdout
    assert image == "neighbour:1"


def test_the_operator_and_the_webhook_write_only_the_secrets_they_make(
    cluster: Cluster, namespace: str, release: str, tmp_path: Path
) -> None:
    """RBAC lets the operator create, update and delete Secrets in every namespace it serves (it
    cannot name them before they exist, nor narrow by type or label); the chart's
    ValidatingAdmissionPolicy holds it, and the webhook, to the Secrets they make. The operator's
    and the webhook's own code, run as their ServiceAccounts, still write theirs."""
    _helm(cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER)
    project = f"{namespace}-p"
    cluster.kubectl("create", "namespace", project)
    accounts = {
        who: f"system:serviceaccount:{namespace}:{release}-gatehouse-{who}"
        for who in ("operator", "webhook")
    }

    def write(
        who: str, verb: str, where: str, document: dict[str, Any] | None = None, *args: str
    ) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            verb, *args, "-n", where, "--dry-run=server", f"--as={accounts[who]}",
            *(("-f", "-") if document else ()),
            stdin=json.dumps(document) if document else None, check=False,
        )  # fmt: skip

    probes = iter(range(1000))
    wait_for(
        lambda: (
            "may write only"
            in write("operator", "create", project, _secret(f"probe-{next(probes)}")).stderr
        ),
        timeout=20,
        what="the chart's admission policy in force",
    )
    try:
        operator, webhook = (f"{release}-gatehouse-{who}" for who in ("operator", "webhook"))
        _as_account(
            cluster, namespace, operator, tmp_path, _operator_writes(project, namespace, release)
        )
        _as_account(cluster, namespace, webhook, tmp_path, _webhook_writes(namespace, release))

        # Someone else's Secret with the name of an app's credential.
        admins = _secret("dataapp-mirror-gatehouse")
        cluster.kubectl("apply", "-n", project, "-f", "-", stdin=json.dumps(admins))
        mirror = {"kind": "DataApp", "name": "mirror", "uid": "u-3"}
        taken = _secret("dataapp-mirror-gatehouse", owner=mirror, labelled=True)
        app = {"kind": "DataApp", "name": "sales", "uid": "u-1"}
        credential = _secret("dataapp-sales-gatehouse", owner=app, labelled=True)
        assert write("operator", "create", project, credential).returncode == 0
        token = _secret("powerful-token", type_="kubernetes.io/service-account-token")
        token["metadata"]["annotations"] = {"kubernetes.io/service-account.name": "default"}
        refused = {
            "a kube-system account's token": write("operator", "create", "kube-system", token),
            "a ServiceAccount token in a project": write("operator", "create", project, token),
            "any other Secret": write("operator", "create", project, _secret("db-password")),
            "a credential named for another app": write(
                "operator", "create", project,
                _secret("dataapp-payroll-gatehouse", owner=app, labelled=True),
            ),
            "a credential without its labels": write(
                "operator", "create", project, _secret("dataapp-sales-gatehouse", owner=app)
            ),
            "a credential of another type": write(
                "operator", "create", project,
                _secret("dataapp-sales-gatehouse", owner=app, labelled=True, type_="example/x"),
            ),
            "the keyring's name outside the release": write(
                "operator", "create", project, _secret(f"{release}-gatehouse-keyring")
            ),
            "the store's password outside the release": write(
                "operator", "create", project, _secret(f"{release}-gatehouse-store")
            ),
            "the store's password rewritten": write(
                "operator", "patch", namespace, None, "secret", f"{release}-gatehouse-store",
                "--type=merge", "-p", json.dumps({"stringData": {"password": "chosen"}}),
            ),
            "another's Secret taken over": write(
                "operator", "patch", project, None, "secret", "dataapp-mirror-gatehouse",
                "--type=merge", "-p", json.dumps({"metadata": taken["metadata"]}),
            ),
            "another's Secret deleted": write(
                "operator", "delete", project, None, "secret", "dataapp-mirror-gatehouse"
            ),
            "the webhook: a ServiceAccount token": write("webhook", "create", namespace, token),
            "the webhook: its certificate's name, not TLS": write(
                "webhook", "create", namespace, _secret(f"{release}-gatehouse-webhook-tls")
            ),
            "the webhook: its client certificate's name, not TLS": write(
                "webhook", "create", namespace, _secret(f"{release}-gatehouse-webhook-client")
            ),
            "the webhook: another TLS Secret": write(
                "webhook", "create", namespace, _secret("other-tls", type_="kubernetes.io/tls")
            ),
        }  # fmt: skip
        for what, done in refused.items():
            assert done.returncode != 0, what
            assert "may write only" in done.stderr or "may only create" in done.stderr, (
                what,
                done.stderr,
            )
    finally:
        cluster.kubectl("delete", "namespace", project, "--wait=false")


def _secret(
    name: str,
    *,
    owner: dict[str, str] | None = None,
    labelled: bool = False,
    type_: str = "Opaque",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if owner:
        metadata["ownerReferences"] = [
            {"apiVersion": "gatehouse.dev/v1alpha1", "controller": True, **owner}
        ]
    if labelled and owner:
        metadata["labels"] = {
            "gatehouse.dev/credential": "true",
            "gatehouse.dev/credential-for": f"{owner['kind']}.{owner['name']}",
        }
    data = {"tls.crt": "eA==", "tls.key": "eA=="} if type_ == "kubernetes.io/tls" else {}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": type_, "data": data}


def _as_account(
    cluster: Cluster,
    namespace: str,
    account: str,
    tmp_path: Path,
    writes: Callable[[Kube], Awaitable[None]],
) -> None:
    """Runs ``writes`` with a Kube client authenticated as the ServiceAccount ``account``."""
    token = cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    kubeconfig = cluster.token_kubeconfig(account, token, tmp_path / f"{account}.kubeconfig")

    async def run() -> None:
        api = await config.new_client_from_config(config_file=str(kubeconfig))
        try:
            await writes(Kube.of(api))
        finally:
            await api.close()

    asyncio.run(run())


def _operator_writes(
    project: str, namespace: str, release: str
) -> Callable[[Kube], Awaitable[None]]:
    """An app's credential made, then made again for a later app of the same name, deleted;
    the keyring, the sealing keys and the bundled store's password made at a first start."""

    async def writes(kube: Kube) -> None:
        first = {"kind": "DataApp", "name": "sales", "uid": "u-1"}
        later = {**first, "uid": "u-2"}
        issued = await kube.tokens.app_token(project, "dataapp-sales-gatehouse", first)
        assert await kube.tokens.app_token(project, "dataapp-sales-gatehouse", first) == issued
        assert await kube.tokens.app_token(project, "dataapp-sales-gatehouse", later) != issued
        await kube.tokens.delete_credential_secret(project, "dataapp-sales-gatehouse", later)
        assert await kube.secrets.secret(project, "dataapp-sales-gatehouse") is None
        keyring = KeyringSecret(namespace, f"{release}-gatehouse-keyring", create=True)
        await keyring.load(kube)
        sealing = SealingKeysSecret(
            namespace, f"{release}-gatehouse-sealing-keys", create=True, published=None
        )
        await sealing.refresh(kube)
        assert sealing.sealing_keys() is not None
        store = StoreSecret(namespace, f"{release}-gatehouse-store")
        await store.ensure(kube)
        assert (await kube.secrets.secret_data(namespace, store.name) or {}).get("password")

    return writes


def _webhook_writes(namespace: str, release: str) -> Callable[[Kube], Awaitable[None]]:
    async def writes(kube: Kube) -> None:
        ref = f"{namespace}/{release}-gatehouse-webhook-tls"
        configuration = f"{release}-gatehouse-{namespace}"
        certificate, _ = await shared_certificate(kube, ref, ["webhook.example"], configuration)
        assert certificate
        clients = f"{namespace}/{release}-gatehouse-webhook-client"
        assert await client_certificate_authority(kube, clients)

    return writes


def test_watch_namespaces_narrows_the_rights_to_those_namespaces(
    cluster: Cluster, namespace: str, release: str
) -> None:
    """With operator.watchNamespaces, Roles in those namespaces replace the cluster-wide rules:
    no Secret, no Gatehouse resource of any other namespace is reachable, and the webhook is
    asked only about the watched ones."""
    project = f"{namespace}-p"
    cluster.kubectl("create", "namespace", project)
    try:
        _helm(
            cluster, "install", release, str(CHART), "-n", namespace, *IN_SHARED_CLUSTER,
            "--set", f"operator.watchNamespaces={{{project}}}",
        )  # fmt: skip
        operator = f"system:serviceaccount:{namespace}:{release}-gatehouse-operator"
        webhook = f"system:serviceaccount:{namespace}:{release}-gatehouse-webhook"
        wait_for(
            lambda: _can(cluster, operator, "get", "secrets", project),
            timeout=10,
            what="the chart's RBAC to take effect",
        )
        for verb, resource in [
            ("watch", "secrets"),
            ("create", "secrets"),
            ("watch", "externalconnections.gatehouse.dev"),
            ("patch", "dataapps.gatehouse.dev/status"),
            ("create", "connectionsamples.gatehouse.dev"),
            ("create", "events"),
        ]:
            assert _can(cluster, operator, verb, resource, project), (verb, resource)
            assert not _can(cluster, operator, verb, resource, "default"), (verb, resource)
            assert not _can(cluster, operator, verb, resource), (verb, resource)  # all namespaces
        # What is cluster-wide by nature, and the release namespace's own.
        assert _can(cluster, operator, "create", "tokenreviews.authentication.k8s.io")
        assert _can(cluster, operator, "get", f"secrets/{release}-gatehouse-keyring", namespace)
        sealing = f"secrets/{release}-gatehouse-sealing-keys"
        assert _can(cluster, operator, "get", sealing, namespace)
        assert _can(cluster, operator, "get", f"secrets/{release}-gatehouse-store", namespace)
        assert _can(cluster, operator, "create", "secrets", namespace)
        assert not _can(cluster, operator, "get", "secrets/other", namespace)
        assert not _can(cluster, operator, "list", "namespaces")
        assert _can(cluster, webhook, "get", "externalconnections.gatehouse.dev", project)
        assert not _can(cluster, webhook, "get", "externalconnections.gatehouse.dev", "default")
        configuration = json.loads(
            cluster.kubectl(
                "get", "validatingwebhookconfiguration", f"{release}-gatehouse-{namespace}",
                "-o", "json",
            ).stdout
        )  # fmt: skip
        for hook in configuration["webhooks"]:
            assert hook["namespaceSelector"] == {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [project]}
                ]
            }
    finally:
        cluster.kubectl("delete", "namespace", project, "--wait=false")


def test_chart_ships_the_generated_user_roles(cluster: Cluster) -> None:
    rendered = yaml.safe_load_all(_helm(cluster, "template", "gh", str(CHART)))
    shipped = [doc for doc in rendered if doc and doc["kind"] == "ClusterRole"]
    by_name = {doc["metadata"]["name"]: doc for doc in shipped}
    for role in (r.model_dump(by_alias=True) for r in roles.roles()):
        shipped_role = by_name[role["metadata"]["name"]]
        # As generated, with the release's labels besides its own.
        labels = shipped_role["metadata"].pop("labels")
        assert labels.items() >= role["metadata"].pop("labels").items()
        assert labels["app.kubernetes.io/instance"] == "gh"
        assert shipped_role == role
    # Kubernetes' edit can read every Secret: a builder may be kept out of it.
    apart = _render(cluster, "--set", "userRoles.aggregateBuilderToEdit=false")
    builder = _named(apart, "ClusterRole", roles.BUILDER_ROLE)
    assert "rbac.authorization.k8s.io/aggregate-to-edit" not in builder["metadata"]["labels"]
    assert builder["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gatehouse"
    assert builder["rules"] == by_name[roles.BUILDER_ROLE]["rules"]
    admin = _named(apart, "ClusterRole", roles.ADMIN_ROLE)
    assert admin["rules"] == by_name[roles.ADMIN_ROLE]["rules"]
    assert "rbac.authorization.k8s.io/aggregate-to-admin" in admin["metadata"]["labels"]


def _proxy_settings(
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    files: dict[str, str],
    *values: str,
) -> ProxySettings:
    """What the proxy makes of the chart's render: its environment, with each file a mounted
    volume holds (``files``: the volume's name, the file's text) where the kubelet would put it."""
    proxy = _named(_render(cluster, *values), "Deployment", "gh-gatehouse-proxy")
    container = proxy["spec"]["template"]["spec"]["containers"][0]
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    for item in container["env"]:
        if "value" not in item:
            continue
        value = item["value"]
        for path, volume in mounts.items():
            if value.startswith(path + "/"):
                local = tmp_path / volume / value.removeprefix(path + "/")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(files.get(volume, ""))
                value = str(local)
        monkeypatch.setenv(item["name"], value)
    return ProxySettings.from_env()


def test_the_proxy_reads_every_setting_the_chart_gives_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _proxy_settings(
        cluster, monkeypatch, tmp_path, {"store-password": "made-by-the-operator\n"},
        "--set", "proxy.requestReadTimeoutSeconds=7",
        "--set", "installation.allowHttpUpstreams=true",
        "--set", "installation.allowedPrivateNetworks={10.20.0.0/16}",
        "--set", "proxy.maxTokenChars=4096",
        "--set", "store.namespaceShare.bytes=2097152",
        "--set", "store.namespaceShare.keys=4096",
        "--set-json", "store.reserve=0.3",
    )  # fmt: skip
    assert settings.request_read_timeout_seconds == 7
    assert settings.max_token_chars == 4096
    assert settings.shares == ShareSettings(
        namespace_bytes=2097152, namespace_keys=4096, reserve=0.3
    )
    assert settings.allow_http is True
    assert settings.allowed_private_networks == ("10.20.0.0/16",)
    assert settings.operator_url.startswith("https://gh-gatehouse-operator.")
    # The bundled store, by its Service's name, with the password of the Secret mounted.
    assert settings.store is not None
    assert settings.store.url == "redis://gh-gatehouse-store.default.svc:6379/0"
    assert settings.store.password == "made-by-the-operator"
    assert settings.store.ca_file is None
    assert settings.store.deadline_seconds == 0.05


def test_the_proxy_reads_an_external_store_or_none(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    external = _proxy_settings(
        cluster, monkeypatch, tmp_path, {"store-password": "theirs", "store-ca": "PEM"},
        "--set", "store.external.url=rediss://valkey.example:6380/2",
        "--set", "store.external.passwordSecret.name=valkey-auth",
        "--set", "store.external.passwordSecret.key=token",
        "--set", "store.external.ca.secret=valkey-ca",
        "--set-json", "store.deadlineSeconds=0.2",
    )  # fmt: skip
    assert external.store is not None
    assert external.store.url == "rediss://valkey.example:6380/2"
    assert external.store.password == "theirs"
    assert external.store.ca_file is not None
    assert external.store.ca_file.read_text() == "PEM"
    assert external.store.deadline_seconds == 0.2
    for name in ("GATEHOUSE_STORE_URL", "GATEHOUSE_STORE_PASSWORD_FILE", "GATEHOUSE_STORE_CA_FILE"):
        monkeypatch.delenv(name)
    none = _proxy_settings(cluster, monkeypatch, tmp_path, {}, "--set", "store.enabled=false")
    assert none.store is None


def test_the_operator_reads_the_page_setting_the_chart_gives_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for given, expected in (([], False), (["--set", "operator.page.readOnly=true"], True)):
        operator = _named(_render(cluster, *given), "Deployment", "gh-gatehouse-operator")
        for item in operator["spec"]["template"]["spec"]["containers"][0]["env"]:
            if "value" in item:
                monkeypatch.setenv(item["name"], item["value"])
        assert OperatorSettings.from_env().web_read_only is expected


def _render(cluster: Cluster, *values: str) -> list[dict[str, Any]]:
    documents = yaml.safe_load_all(_helm(cluster, "template", "gh", str(CHART), *values))
    return [doc for doc in documents if doc]


def _named(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_the_example_values_lint_strictly_and_render(cluster: Cluster, environment: str) -> None:
    values = str(CHART / "examples" / f"values-{environment}.yaml")
    _helm(cluster, "lint", "--strict", str(CHART), "-f", values)
    documents = _render(cluster, "-f", values)
    proxy = _named(documents, "Deployment", "gh-gatehouse-proxy")
    args = proxy["spec"]["template"]["spec"]["containers"][0]["args"]
    kinds = {doc["kind"] for doc in documents}
    if environment == "dev":
        assert proxy["spec"]["replicas"] == 1
        assert "PodDisruptionBudget" not in kinds  # one replica each: a budget would block drains
    else:
        assert "--log-format=json" in args
        assert {"PodDisruptionBudget", "NetworkPolicy"} <= kinds
    if environment == "prod":
        # Each component's image pinned by digest: the proxy's, and the operator's (webhook too).
        digest = "@sha256:" + "0" * 64
        for component, image in [
            ("proxy", "proxy"),
            ("operator", "operator"),
            ("webhook", "operator"),
        ]:
            deployment = _named(documents, "Deployment", f"gh-gatehouse-{component}")
            found = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            assert found == f"ghcr.io/gatehouse-dev/gatehouse-{image}{digest}", component
        store = _named(documents, "Deployment", "gh-gatehouse-store")
        found = store["spec"]["template"]["spec"]["containers"][0]["image"]
        assert found == f"docker.io/valkey/valkey{digest}"
        assert "PersistentVolumeClaim" in kinds
        assert "ServiceMonitor" in kinds
        assert not [doc for doc in documents if doc["kind"] == "Secret"]


def test_a_misspelt_or_mistyped_value_fails_the_install(cluster: Cluster) -> None:
    for value, problem in [
        ("proxy.replicaz=3", "additional properties 'replicaz' not allowed"),
        ("proxy.replicas=two", "got string, want integer"),
        ("logFormat=yaml", "logFormat"),
        # Inside the Kubernetes objects the chart passes through, too.
        (
            "securityContext.readOnlyRootFileSystem=true",
            "at '/securityContext': additional properties 'readOnlyRootFileSystem' not allowed",
        ),
        ("proxy.probes.liveness.periodSecond=3", "'periodSecond' not allowed"),
        # The operator's rights are never bound to the namespace's default account.
        (
            "operator.serviceAccount.create=false",
            "operator.serviceAccount.name is required when operator.serviceAccount.create is",
        ),
        # Alerts that select no series would never fire.
        ("prometheus.prometheusRule.enabled=true", "needs prometheus.serviceMonitor.enabled"),
        # A webhook told to check its callers by two CAs at once. (Neither is no longer a
        # mistake: the webhook makes the CA and the API server's certificate, R4-10.)
        (
            "webhook.clientAuthentication.caBundle=pem,"
            "webhook.clientAuthentication.existingSecret=callers-ca",
            "webhook.clientAuthentication: set caBundle or existingSecret, not both",
        ),
        (
            "networkPolicy.webhookFrom[0].ipblock.cidr=10.0.0.2/32",
            "additional properties 'ipblock' not allowed",
        ),
        # The store: a URL the proxy could not use, a size Redis would not read, and values
        # that contradict each other.
        ("store.external.url=http://valkey:6379", "/store/external/url"),
        ("store.maxMemory=lots", "/store/maxMemory"),
        (
            "store.external.url=redis://valkey:6379,store.external.ca.configMap=ca",
            "store.external.ca needs a rediss:// URL",
        ),
        (
            "store.enabled=false,store.external.url=redis://valkey:6379",
            "store.external.url is set but store.enabled is false",
        ),
        (
            "store.external.passwordSecret.name=mine",
            "store.external.passwordSecret and store.external.ca need store.external.url",
        ),
    ]:
        done = subprocess.run(
            [str(cluster.binaries.helm), "template", "gh", str(CHART), "--set", value],
            env=cluster.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode != 0, value
        assert problem in done.stderr, done.stderr


def test_values_reach_the_pods(cluster: Cluster) -> None:
    documents = _render(
        cluster,
        "--set", "imagePullSecrets[0].name=registry",
        "--set", "proxy.extraEnv[0].name=HTTPS_PROXY",
        "--set", "proxy.extraEnv[0].value=http://egress:3128",
        "--set", "securityContext.readOnlyRootFilesystem=false",
        "--set", "crds.keep=false",
    )  # fmt: skip
    pod = _named(documents, "Deployment", "gh-gatehouse-proxy")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    container = pod["containers"][0]
    assert {"name": "HTTPS_PROXY", "value": "http://egress:3128"} in container["env"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert "--metrics-port=9090" in container["args"]
    spread = pod["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    crds = [doc for doc in documents if doc["kind"] == "CustomResourceDefinition"]
    assert len(crds) == len(KINDS)
    assert not any("annotations" in crd["metadata"] for crd in crds)


def test_the_usual_knobs_reach_the_objects(cluster: Cluster) -> None:
    """What a platform team expects of a chart: names, labels, its own ServiceAccount, extra
    arguments and volumes, probe timing, monitoring, and a subchart's globals."""
    documents = _render(
        cluster,
        "--set", "global.team=data",
        "--set", "fullnameOverride=edge",
        "--set", "commonLabels.team=data",
        "--set", "revisionHistoryLimit=3",
        "--set", "proxy.serviceAccount.create=false",
        "--set", "proxy.serviceAccount.name=platform-proxy",
        "--set", "operator.serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=x@p.iam",
        "--set", "operator.extraArgs[0]=--verbose",
        "--set", "webhook.extraVolumes[0].name=extra",
        "--set", "webhook.extraVolumes[0].emptyDir.medium=Memory",
        "--set", "webhook.extraVolumeMounts[0].name=extra",
        "--set", "webhook.extraVolumeMounts[0].mountPath=/extra",
        "--set", "proxy.probes.readiness.failureThreshold=6",
        "--set", "prometheus.serviceMonitor.enabled=true",
        "--set", "prometheus.serviceMonitor.scrapeTimeout=5s",
        "--set", "prometheus.prometheusRule.enabled=true",
    )  # fmt: skip
    assert all(doc["metadata"]["labels"]["team"] == "data" for doc in documents), [
        doc["metadata"]["name"] for doc in documents if "team" not in doc["metadata"]["labels"]
    ]

    def of(kind: str) -> dict[str, dict[str, Any]]:
        return {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == kind}

    deployments = of("Deployment")
    assert set(deployments) == {"edge-operator", "edge-webhook", "edge-proxy", "edge-store"}
    for deployment in deployments.values():
        assert deployment["spec"]["revisionHistoryLimit"] == 3
        pod = deployment["spec"]["template"]["spec"]
        assert pod["enableServiceLinks"] is False
        assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "data"
    proxy = deployments["edge-proxy"]["spec"]["template"]["spec"]
    assert proxy["serviceAccountName"] == "platform-proxy"
    assert proxy["containers"][0]["readinessProbe"]["failureThreshold"] == 6
    accounts = of("ServiceAccount")
    assert set(accounts) == {"edge-operator", "edge-webhook"}  # the proxy's is the user's
    assert accounts["edge-operator"]["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "x@p.iam"
    }
    operator = deployments["edge-operator"]["spec"]["template"]["spec"]["containers"][0]
    assert operator["args"][-1] == "--verbose"
    webhook = deployments["edge-webhook"]["spec"]["template"]["spec"]
    assert {"name": "extra", "emptyDir": {"medium": "Memory"}} in webhook["volumes"]
    assert {"name": "extra", "mountPath": "/extra"} in webhook["containers"][0]["volumeMounts"]
    monitor = _named(documents, "ServiceMonitor", "edge-proxy")
    assert monitor["spec"]["endpoints"][0]["scrapeTimeout"] == "5s"
    rules = _named(documents, "PrometheusRule", "edge")["spec"]["groups"][0]["rules"]
    assert "GatehouseProxyTableFeedDown" in {rule["alert"] for rule in rules}
    alone = next(rule for rule in rules if rule["alert"] == "GatehouseProxyCountingAlone")
    assert alone["expr"] == 'gatehouse_proxy_store_up{job="edge-proxy-metrics"} == 0'
    assert "store.lastError" in alone["annotations"]["description"]
    assert 'job="edge-proxy-metrics"' in rules[0]["expr"]


def test_client_authentication_reaches_the_webhook(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CA bundle given lands where the webhook reads it, with the names it accepts; a new
    bundle rolls its Pods; a Secret of the user's serves instead; off, nothing of it renders."""
    bundles = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        bundles.append(CertificateAuthority(tmp_path / name, f"{name}-webhook-callers").cert_path)
    enabled = ("--set", "webhook.clientAuthentication.enabled=true")
    names = ("--set", "webhook.clientAuthentication.allowedNames={kube-apiserver,apiserver-2}")

    def render(bundle: Path) -> list[dict[str, Any]]:
        given = ("--set-file", f"webhook.clientAuthentication.caBundle={bundle}")
        return _render(cluster, *enabled, *given, *names)

    documents = render(bundles[0])
    mounted = _named(documents, "ConfigMap", "gh-gatehouse-webhook-client-ca")["data"]["ca.crt"]
    assert mounted == bundles[0].read_text()
    template = _named(documents, "Deployment", "gh-gatehouse-webhook")["spec"]["template"]
    container = template["spec"]["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    mount = next(item for item in container["volumeMounts"] if item["name"] == "client-ca")
    assert env["GATEHOUSE_WEBHOOK_CLIENT_CA_FILE"] == f"{mount['mountPath']}/ca.crt"
    volume = next(item for item in template["spec"]["volumes"] if item["name"] == "client-ca")
    assert volume["configMap"] == {"name": "gh-gatehouse-webhook-client-ca"}
    # What the webhook makes of it, the ConfigMap's key read where the kubelet would mount it.
    (tmp_path / "ca.crt").write_text(mounted)
    env["GATEHOUSE_WEBHOOK_CLIENT_CA_FILE"] = str(tmp_path / "ca.crt")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = WebhookSettings.from_env()
    assert settings.client_ca_file == tmp_path / "ca.crt"
    assert settings.client_names == ("kube-apiserver", "apiserver-2")

    def rolled_by(documents: list[dict[str, Any]]) -> str:
        pod = _named(documents, "Deployment", "gh-gatehouse-webhook")["spec"]["template"]
        return str(pod["metadata"]["annotations"]["gatehouse.dev/client-ca-sha256"])

    assert rolled_by(documents) != rolled_by(render(bundles[1]))

    secret = _render(
        cluster, *enabled, "--set", "webhook.clientAuthentication.existingSecret=apiserver-ca"
    )
    pod = _named(secret, "Deployment", "gh-gatehouse-webhook")["spec"]["template"]["spec"]
    volume = next(item for item in pod["volumes"] if item["name"] == "client-ca")
    assert volume["secret"]["secretName"] == "apiserver-ca"
    assert not [doc for doc in secret if doc["kind"] == "ConfigMap" and "client-ca" in str(doc)]

    # By default the webhook's own CA (tests/chart/test_webhook_client_auth.py); off, nothing.
    default = _named(_render(cluster), "Deployment", "gh-gatehouse-webhook")
    shipped = json.dumps(default["spec"]["template"]["spec"]["containers"][0]["env"])
    assert "GATEHOUSE_WEBHOOK_CLIENT_SECRET" in shipped
    off = ("--set", "webhook.clientAuthentication.enabled=false")
    off_env = _named(_render(cluster, *off), "Deployment", "gh-gatehouse-webhook")
    assert "CLIENT" not in json.dumps(off_env["spec"]["template"]["spec"]["containers"][0]["env"])


def test_the_webhook_network_policy_admits_the_peers_listed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """By default the webhook's port is open to all (the API server is no Pod); listed peers
    (the API server's addresses) are the only ones admitted, as the API server accepts them."""

    def webhook_policy(*values: str) -> dict[str, Any]:
        documents = _render(cluster, "--set", "networkPolicy.enabled=true", *values)
        return _named(documents, "NetworkPolicy", "gh-gatehouse-webhook")

    assert webhook_policy()["spec"]["ingress"] == [{"ports": [{"port": "webhook"}]}]
    peers = [
        {"ipBlock": {"cidr": "172.16.0.2/32"}},
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.244.0.0/16"]}},
    ]
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"networkPolicy": {"webhookFrom": peers}}))
    policy = webhook_policy("-f", str(values))
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "webhook"}], "from": peers}]
    cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(policy)
    )


def test_the_bundled_store_is_hardened_and_admits_only_the_proxies(
    cluster: Cluster, namespace: str
) -> None:
    """One Pod of the image named, as the other Pods run (non-root, read-only, no capabilities),
    its password in no argument and no environment variable, its data on a claim (an emptyDir
    with persistence off); a NetworkPolicy, rendered although networkPolicy.enabled is off,
    admits the release's proxies to its port and nothing else, and lets it reach nothing. The
    API server accepts all of it."""
    documents = _render(cluster, "-n", namespace)
    store = _named(documents, "Deployment", "gh-gatehouse-store")
    pod = store["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "docker.io/valkey/valkey:9.0.8-trixie"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "env" not in container
    assert "envFrom" not in container
    script = container["args"][0]
    assert "requirepass" in script
    assert "password=$(cat /etc/gatehouse/store-password/" in script
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["password"]["secret"]["secretName"] == "gh-gatehouse-store"
    assert volumes["auth"]["emptyDir"]["medium"] == "Memory"
    # As it ships: an append-only file on a claim, its files the server's group's.
    assert volumes["data"] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": "gh-gatehouse-store"},
    }
    assert pod["securityContext"]["fsGroup"] == 65532
    assert store["spec"]["strategy"] == {"type": "Recreate"}  # one Pod on the RWO volume
    claim = _named(documents, "PersistentVolumeClaim", "gh-gatehouse-store")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in claim["spec"]  # the cluster's default
    config = _named(documents, "ConfigMap", "gh-gatehouse-store")["data"]["store.conf"]
    for line in ('save ""', "appendonly yes", "maxmemory 64mb", "maxmemory-policy noeviction"):
        assert line in config.splitlines(), line
    assert "include /run/gatehouse-store/auth.conf" in config
    policy = _named(documents, "NetworkPolicy", "gh-gatehouse-store")["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "store"
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    proxies = {"app.kubernetes.io/instance": "gh", "app.kubernetes.io/component": "proxy"}
    assert policy["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": proxies}}], "ports": [{"port": 6379}]}
    ]
    assert "egress" not in policy  # none allowed
    # The other NetworkPolicies stay off unless asked for.
    assert {doc["metadata"]["name"] for doc in documents if doc["kind"] == "NetworkPolicy"} == {
        "gh-gatehouse-store"
    }
    # With the proxies' egress closed, the bundled store stays open to them.
    closed = _render(
        cluster, "-n", namespace, "--set", "networkPolicy.enabled=true",
        "--set", "networkPolicy.proxyEgress[0].to[0].ipBlock.cidr=0.0.0.0/0",
    )  # fmt: skip
    egress = _named(closed, "NetworkPolicy", "gh-gatehouse-proxy")["spec"]["egress"]
    assert {
        "to": [
            {"podSelector": {"matchLabels": {**proxies, "app.kubernetes.io/component": "store"}}}
        ],
        "ports": [{"port": 6379}],
    } in egress
    # Persistence off: nothing on disk, no claim.
    emptied = _render(cluster, "-n", namespace, "--set", "store.persistence.enabled=false")
    emptied_pod = _named(emptied, "Deployment", "gh-gatehouse-store")["spec"]["template"]["spec"]
    assert {"name": "data", "emptyDir": {}} in emptied_pod["volumes"]
    assert "fsGroup" not in emptied_pod["securityContext"]
    emptied_config = _named(emptied, "ConfigMap", "gh-gatehouse-store")["data"]["store.conf"]
    assert "appendonly no" in emptied_config.splitlines()
    assert not [doc for doc in emptied if doc["kind"] == "PersistentVolumeClaim"]
    objects = [doc for doc in documents if "store" in doc["metadata"]["name"]]
    cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump_all(objects),
    )  # fmt: skip


def test_without_a_store_or_with_an_external_one_the_chart_runs_none(cluster: Cluster) -> None:
    """No Deployment, Service, NetworkPolicy or Secret of a store; the operator makes no
    password and may write none; no alert without a store to count in."""
    for values in (
        ("--set", "store.enabled=false"),
        ("--set", "store.external.url=redis://valkey.data.svc:6379/0"),
    ):
        documents = _render(
            cluster, *values, "--set", "prometheus.serviceMonitor.enabled=true",
            "--set", "prometheus.prometheusRule.enabled=true",
        )  # fmt: skip
        assert not [doc for doc in documents if "gatehouse-store" in doc["metadata"]["name"]]
        operator = _named(documents, "Deployment", "gh-gatehouse-operator")
        env = operator["spec"]["template"]["spec"]["containers"][0]["env"]
        assert "GATEHOUSE_STORE_SECRET" not in {item["name"] for item in env}
        policy = _named(documents, "ValidatingAdmissionPolicy", "gh-gatehouse-default-secrets")
        assert "gh-gatehouse-store" not in json.dumps(policy)
        rules = _named(documents, "PrometheusRule", "gh-gatehouse")["spec"]["groups"][0]["rules"]
        alerts = {rule["alert"] for rule in rules}
        assert ("GatehouseProxyCountingAlone" in alerts) is ("store.enabled=false" not in values)
