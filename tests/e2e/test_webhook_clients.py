"""Who the admission webhook answers: the API server, which presents its client certificate, and
no one else. A review posted straight to the webhook's port would otherwise tell anyone who can
reach it whether a connection exists in any namespace, its link policy, and whether any user may
read any Secret (its checks run SubjectAccessReviews for the user the review names)."""

from __future__ import annotations

import base64
import ssl
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    apply,
    connection,
    data_app,
    project_members,
    secret,
)

pytestmark = pytest.mark.e2e


def forged_review(namespace: str, linked: str) -> dict[str, Any]:
    """An AdmissionReview for a DataApp linking ``linked``, as a stranger would write one."""
    app = data_app("probe", {"x": linked})
    app["metadata"]["namespace"] = namespace
    resource = {"group": "gatehouse.dev", "version": "v1alpha1"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
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
            "options": None,
        },
    }


def client_tls(certificate: tuple[Path, Path] | None) -> ssl.SSLContext:
    """TLS that trusts any server (a stranger does not care), presenting ``certificate`` (its
    file and its key's) if any."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if certificate is not None:
        context.load_cert_chain(*certificate)
    return context


def admin_certificate(cluster: Cluster, folder: Path) -> tuple[Path, Path]:
    """The cluster administrator's client certificate: signed by the cluster's CA, which is not
    the one the webhook trusts for its callers."""
    user = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]
    certificate, key = folder / "admin.crt", folder / "admin.key"
    certificate.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    return certificate, key


def test_the_webhook_answers_the_api_server_and_no_one_else(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    if cluster.webhook_client_ca is None:
        pytest.skip("a cluster of the user's: its API server presents no client certificate")
    apply(cluster, namespace, secret("vendor", **{"api-key": "k"}))
    apply(
        cluster,
        namespace,
        connection("locked", stack.upstream, API_KEY_AUTH, linkPolicy="AdminsOnly"),
    )
    url = f"https://127.0.0.1:{stack.local.webhook_port}/link-policy"
    review = forged_review(namespace, "locked")
    # No client certificate, or one of another CA: refused in the TLS handshake, nothing read.
    for certificate in (None, admin_certificate(cluster, tmp_path)):
        with pytest.raises(httpx.TransportError):
            httpx.post(url, json=review, verify=client_tls(certificate), timeout=10)
    # The same review with the API server's own certificate (the control plane's files; in a
    # cluster they are the API server's alone) is answered: the port was right, the caller not.
    folder = cluster.webhook_client_ca.parent
    presented = (folder / "apiserver.crt", folder / "apiserver.key")
    answer = httpx.post(url, json=review, verify=client_tls(presented), timeout=10)
    assert answer.status_code == 200
    assert answer.json()["response"]["allowed"] is False

    # The API server's calls are answered: a builder's link is still refused by the webhook.
    members = project_members(cluster, namespace)
    done = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        as_user=members["builder"].persona,
        stdin=yaml.safe_dump(data_app("probe", {"x": "locked"})),
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert 'admission webhook "link-policy.gatehouse.dev" denied the request' in done.stderr
