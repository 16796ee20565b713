"""Credentials sealed to the operator, from ``gatehouse seal`` to the upstream's ears.

A user with no rights in Gatehouse's namespace but the chart's public read seals a value with
the CLI; the operator opens it for that one connection only, and a value copied, edited or sealed
elsewhere is refused with a condition that says which. After a rotation old values still open
and ``gatehouse reseal`` moves them to the new key. At the end nothing any ``get`` returns, and
no log, holds the plaintext.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography.x509.oid import ExtendedKeyUsageOID

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import NAMESPACE, RELEASE
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.keys.sealed_values import PublicSealingKeys, Scope, SealedValue, SealingKeys
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    app_token,
    apply,
    condition,
    connection,
    data_app,
    fetch,
    get,
    register_client,
    wait_condition,
)
from tests.e2e.test_upstream_tls import Vendor, mtls
from tests.e2e.test_upstream_tls import vendor as vendor

pytestmark = pytest.mark.e2e

CANARY = "sk_live_sealed_canary_7d2c91"
PUBLIC = ("--controller-namespace", NAMESPACE, "--controller-name", f"{RELEASE}-sealing-keys")
AUTH = {
    "type": "apiKey",
    "apiKey": {"name": "X-API-Key", "in": "header"},
    "secretRef": {"name": "vendor", "key": "api-key"},  # replaced by the sealed value
}


def gatehouse(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "gatehouse_operator.cli.gatehouse", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    assert CANARY not in done.stdout + done.stderr
    return done


def nobody(cluster: Cluster, namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig of a ServiceAccount bound to nothing: what any authenticated user has."""
    cluster.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    token = cluster.kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    return cluster.token_kubeconfig("nobody", token, tmp_path / "nobody.kubeconfig")


def sealed_file(
    kubeconfig: Path, stack: Stack, namespace: str, tmp_path: Path, *args: str
) -> tuple[Path, dict[str, Any]]:
    """The connection ``vendor`` written with a secretRef, then sealed by the CLI."""
    document = connection("vendor", stack.upstream, AUTH)
    document["metadata"]["namespace"] = namespace
    path = tmp_path / "vendor.yaml"
    path.write_text(yaml.safe_dump(document))
    done = gatehouse(kubeconfig, "seal", "-f", str(path), *args, stdin=CANARY + "\n")
    assert done.returncode == 0, done.stderr
    path.write_text(done.stdout)
    sealed: dict[str, Any] = yaml.safe_load(done.stdout)
    assert "secretRef" not in sealed["spec"]["auth"]
    return path, sealed


def linked(cluster: Cluster, namespace: str, document: dict[str, Any]) -> str:
    apply(cluster, namespace, document, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def key_received(stack: Stack, token: str) -> str:
    reply = fetch(stack.proxy, token, "vendor", "/echo/")
    assert reply.status_code == 200, reply.text
    assert CANARY not in reply.text  # the echo is scrubbed on its way back
    seen = httpx.get(f"{stack.upstream}/_received/{reply.json()['id']}", timeout=5).json()
    return str(seen["headers"]["x-api-key"])


def renamed(document: dict[str, Any], **metadata: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(document))
    copy["metadata"].update(metadata)
    return copy


def test_a_sealed_credential_is_injected_and_opens_for_its_connection_only(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    # Published as the operator starts: at once on the very first run of the suite.
    wait_for(
        lambda: get(cluster, NAMESPACE, f"configmap/{RELEASE}-sealing-keys"),
        timeout=10,
        interval=0.2,
        what="the published sealing keys",
    )
    user = nobody(cluster, namespace, tmp_path)
    _, sealed = sealed_file(user, stack, namespace, tmp_path, *PUBLIC)
    token = linked(cluster, namespace, sealed)
    assert key_received(stack, token) == CANARY
    ready = condition(cluster, namespace, "externalconnection/vendor", "CredentialReady")
    assert ready["reason"] == "CredentialEncrypted"

    # The same value under another name, in another namespace, or sent to another host.
    apply(cluster, namespace, renamed(sealed, name="copy"))
    refused = wait_condition(
        cluster, namespace, "externalconnection/copy", "False", "SealedForAnotherConnection"
    )
    assert refused["message"].startswith("auth.sealedSecret is sealed for ")
    other = f"{namespace}-b"
    cluster.kubectl("create", "namespace", other)
    try:
        apply(cluster, other, renamed(sealed, namespace=other))
        wait_condition(
            cluster, other, "externalconnection/vendor", "False", "SealedForAnotherConnection"
        )
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
    moved = renamed(sealed, name="moved")
    moved["spec"]["baseURL"] = stack.upstream.replace("127.0.0.1", "localhost")
    apply(cluster, namespace, moved)
    wait_condition(
        cluster, namespace, "externalconnection/moved", "False", "SealedForAnotherConnection"
    )

    # Altered: a value sealed for "tampered" with this installation's key, its last
    # characters changed.
    published = get(cluster, NAMESPACE, f"configmap/{RELEASE}-sealing-keys") or {}
    keys = PublicSealingKeys.parse(published["data"]["sealing-keys.json"])
    origin = SealedValue.parse(sealed["spec"]["auth"]["sealedSecret"]).scope.origin
    text = keys.seal(b"x", Scope(namespace, "tampered", origin))
    tampered = renamed(sealed, name="tampered")
    tail = "AAAA" if text[-4:] != "AAAA" else "BBBB"
    tampered["spec"]["auth"]["sealedSecret"] = text[:-4] + tail
    apply(cluster, namespace, tampered)
    wait_condition(cluster, namespace, "externalconnection/tampered", "False", "SealedValueCorrupt")

    # Sealed to another installation's key.
    foreign = renamed(sealed, name="foreign")
    scope = Scope(namespace, "foreign", origin)
    foreign["spec"]["auth"]["sealedSecret"] = SealingKeys.generate().public().seal(b"x", scope)
    apply(cluster, namespace, foreign)
    wait_condition(cluster, namespace, "externalconnection/foreign", "False", "SealedKeyUnknown")
    # The route that was Ready stayed Ready throughout.
    assert key_received(stack, token) == CANARY


def test_exactly_one_of_secret_ref_and_sealed_secret(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    both = connection("both", stack.upstream, {**AUTH, "sealedSecret": "gh1.e30.AAAA"})
    done = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(both), check=False
    )
    assert done.returncode != 0
    assert "exactly one of auth.secretRef and auth.sealedSecret" in done.stderr


def test_sealing_offline_with_the_published_keys(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    user = nobody(cluster, namespace, tmp_path)
    public = gatehouse(user, "sealing-key", "public", *PUBLIC)
    assert public.returncode == 0, public.stderr
    cert = tmp_path / "keys.json"
    cert.write_text(public.stdout)
    # No cluster at all: the kubeconfig points nowhere.
    _, sealed = sealed_file(tmp_path / "absent", stack, namespace, tmp_path, "--cert", str(cert))
    token = linked(cluster, namespace, sealed)
    assert key_received(stack, token) == CANARY


def test_after_a_rotation_old_values_open_and_reseal_moves_them(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    path, sealed = sealed_file(cluster.kubeconfig, stack, namespace, tmp_path, *PUBLIC)
    token = linked(cluster, namespace, sealed)
    old_key = SealedValue.parse(sealed["spec"]["auth"]["sealedSecret"]).key
    rotated = stack.local.write_sealing_keys(
        SealingKeys.parse(stack.local.sealing_keys_file.read_bytes()).rotated()
    )

    def published() -> bool:
        found = get(cluster, NAMESPACE, f"configmap/{RELEASE}-sealing-keys") or {}
        return bool(found.get("data", {}).get("active") == rotated.active)

    wait_for(published, timeout=15, interval=0.2, what="the new public key")

    def offered() -> str:
        body = get(cluster, namespace, "externalconnection/vendor") or {}
        return str(body.get("status", {}).get("resealedSecret", ""))

    wait_for(offered, timeout=15, interval=0.2, what="status.resealedSecret")
    assert key_received(stack, token) == CANARY  # the old value still opens

    done = gatehouse(cluster.kubeconfig, "reseal", "-f", str(path), "-w", *PUBLIC)
    assert done.returncode == 0, done.stderr
    assert f"{namespace}/vendor: resealed" in done.stderr
    resealed = yaml.safe_load(path.read_text())
    value = resealed["spec"]["auth"]["sealedSecret"]
    assert SealedValue.parse(value).key == rotated.active != old_key
    apply(cluster, namespace, resealed)
    wait_for(lambda: offered() == "", timeout=15, interval=0.2, what="resealedSecret cleared")
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    assert key_received(stack, token) == CANARY
    again = gatehouse(cluster.kubeconfig, "reseal", "-f", str(path), *PUBLIC)
    assert f"{namespace}/vendor: current" in again.stderr

    # An offer whoever may write the status planted, sealed for another connection: refused,
    # and the file left as it was.
    planted = rotated.public().seal(b"chosen", Scope(namespace, "other", stack.upstream))
    status = json.dumps({"status": {"resealedSecret": planted}})
    cluster.kubectl(
        "patch", "externalconnection", "vendor", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", status,
    )  # fmt: skip
    before = path.read_text()
    refused = gatehouse(cluster.kubeconfig, "reseal", "-f", str(path), "-w", *PUBLIC)
    assert refused.returncode == 2
    assert f"{namespace}/vendor: status.resealedSecret is sealed for {namespace}/other" in (
        refused.stderr
    )
    assert path.read_text() == before


def test_a_sealed_client_certificate_is_resealed_and_still_presented_once_the_old_key_retires(
    cluster: Cluster, stack: Stack, vendor: Vendor, namespace: str, tmp_path: Path
) -> None:
    """A client certificate sealed by the CLI is offered resealed after a rotation
    (status.resealedClientCertificate); gatehouse reseal writes it into the file, and once the
    old key is retired the vendor still receives the certificate, while the value sealed with
    the old key (from Git history) no longer opens."""
    chain, key, serial = vendor.client_ca.issue("shop-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    (tmp_path / "client.crt").write_bytes(chain)
    (tmp_path / "client.key").write_bytes(key)
    document = connection("vendor", vendor.url, {"type": "none"}, tls=mtls(vendor, None))
    document["metadata"]["namespace"] = namespace
    path = tmp_path / "vendor.yaml"
    path.write_text(yaml.safe_dump(document))
    certificate = (
        "--tls-cert",
        str(tmp_path / "client.crt"),
        "--tls-key",
        str(tmp_path / "client.key"),
    )
    done = gatehouse(cluster.kubeconfig, "seal", "-f", str(path), *certificate, *PUBLIC)
    assert done.returncode == 0, done.stderr
    path.write_text(done.stdout)
    sealed: dict[str, Any] = yaml.safe_load(done.stdout)
    old_key = SealedValue.parse(sealed["spec"]["tls"]["clientCertificate"]["sealed"]).key
    token = linked(cluster, namespace, sealed)

    def presented() -> int:
        seen = vendor.received(fetch(stack.proxy, token, "vendor", "/echo/sealed"))
        return int(seen["clientCertificate"]["serial"], 16)

    assert presented() == serial
    secret_line = key.decode().splitlines()[1]  # of the private key's base64
    assert secret_line not in json.dumps(get(cluster, namespace, "externalconnection/vendor"))
    rotated = stack.local.write_sealing_keys(
        SealingKeys.parse(stack.local.sealing_keys_file.read_bytes()).rotated()
    )

    def offered() -> str:
        body = get(cluster, namespace, "externalconnection/vendor") or {}
        return str(body.get("status", {}).get("resealedClientCertificate", ""))

    def offered_with_the_rotated_key() -> bool:
        # An offer made before the rotation (sealed with the key active then, if the value was
        # sealed with an older one) is not the one asked for: reseal refuses it, rightly.
        offer = offered()
        return bool(offer) and SealedValue.parse(offer).key == rotated.active

    wait_for(
        offered_with_the_rotated_key,
        timeout=15,
        interval=0.2,
        what="status.resealedClientCertificate with the rotated key",
    )
    done = gatehouse(cluster.kubeconfig, "reseal", "-f", str(path), "-w", *PUBLIC)
    assert done.returncode == 0, done.stderr
    assert f"{namespace}/vendor: spec.tls.clientCertificate.sealed resealed" in done.stderr
    resealed = yaml.safe_load(path.read_text())
    value = resealed["spec"]["tls"]["clientCertificate"]["sealed"]
    assert SealedValue.parse(value).key == rotated.active != old_key
    apply(cluster, namespace, resealed)
    wait_for(lambda: offered() == "", timeout=15, interval=0.2, what="the offer taken in")
    assert secret_line not in json.dumps(get(cluster, namespace, "externalconnection/vendor"))

    stack.local.write_sealing_keys(rotated.without(old_key))
    wait_for(
        lambda: old_key not in str(get(cluster, NAMESPACE, f"configmap/{RELEASE}-sealing-keys")),
        timeout=15,
        interval=0.2,
        what="the old key retired",
    )
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    assert presented() == serial
    apply(cluster, namespace, sealed)  # the value of Git history, sealed with the retired key
    wait_condition(cluster, namespace, "externalconnection/vendor", "False", "SealedKeyUnknown")
    unknown = condition(cluster, namespace, "externalconnection/vendor", "UpstreamTLSReady")
    assert unknown["reason"] == "SealedKeyUnknown"
    assert old_key in unknown["message"]


def test_a_sealed_client_secret_mints_tokens_and_opens_for_its_token_url_only(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    """An OAuth 2.0 client secret sealed by the CLI from the connection's file: bound to its
    token URL and client id as well, so the same value under another tokenURL (a host or path
    of the editor's choosing) does not open."""
    client_id, client_secret = f"sealed-{namespace}", f"{CANARY}-client"
    register_client(stack.token_endpoint, client_id, client_secret, "basic")
    token_url = f"{stack.token_endpoint}/token"
    auth = {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {"tokenURL": token_url, "clientId": client_id},
        "secretRef": {"name": "crm", "key": "secret"},  # replaced by the sealed value
    }
    document = connection("crm", stack.token_endpoint, auth)
    document["metadata"]["namespace"] = namespace
    path = tmp_path / "crm.yaml"
    path.write_text(yaml.safe_dump(document))
    done = gatehouse(cluster.kubeconfig, "seal", "-f", str(path), *PUBLIC, stdin=client_secret)
    assert done.returncode == 0, done.stderr
    assert f"(token URL {token_url}, client {client_id})" in done.stderr
    sealed: dict[str, Any] = yaml.safe_load(done.stdout)
    scope = SealedValue.parse(sealed["spec"]["auth"]["sealedSecret"]).scope
    assert (scope.token_url, scope.client_id) == (token_url, client_id)

    apply(cluster, namespace, sealed, data_app("sales", {"crm": "crm"}))
    wait_condition(cluster, namespace, "externalconnection/crm", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    reply = fetch(stack.proxy, token, "crm", "/api/orders")
    assert reply.status_code == 200, reply.text
    assert reply.json()["client"] == client_id  # a token minted with the opened secret
    assert client_secret not in reply.text

    # The same value, the token URL moved to another path of the same host.
    moved = renamed(sealed)
    moved["spec"]["auth"]["oauth2ClientCredentials"]["tokenURL"] = (
        f"{stack.token_endpoint}/hostile/echo"
    )
    apply(cluster, namespace, moved)
    refused = wait_condition(
        cluster, namespace, "externalconnection/crm", "False", "SealedForAnotherConnection"
    )
    assert f"(token URL {token_url}, client {client_id})" in refused["message"]
    assert (
        f"(token URL {stack.token_endpoint}/hostile/echo, client {client_id})"
        in (refused["message"])
    )
    assert client_secret not in json.dumps(refused)


def test_no_object_event_status_or_log_holds_the_plaintext(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    """The canary scan: run after the tests above (file order) sealed, opened, refused and
    resealed CANARY; then everything readable is searched, as text and as base64."""
    _, sealed = sealed_file(cluster.kubeconfig, stack, namespace, tmp_path, *PUBLIC)
    token = linked(cluster, namespace, sealed)
    assert key_received(stack, token) == CANARY
    forms = [CANARY, base64.b64encode(CANARY.encode()).decode()]
    kinds = "secrets,configmaps,events,externalconnections,dataapps,charttypes,connectiontests"
    everything = cluster.kubectl(
        "get", f"{kinds},connectionsamples,projectconfigs", "-A", "-o", "json"
    ).stdout
    # Every process's log but the upstream's: it is the third party the value is meant for.
    logs = "".join(
        path.read_text(errors="replace")
        for path in stack.local.workdir.rglob("*.log")
        if not path.name.startswith("upstream")
    )
    for form in forms:
        assert form not in everything
        assert form not in logs
