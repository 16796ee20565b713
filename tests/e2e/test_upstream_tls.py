"""A connection's own TLS through the operator (issue 52): a client certificate from a
``kubernetes.io/tls`` Secret and a private CA, to a vendor on 127.0.0.1 that requires a client
certificate from a test CA and serves one from a private CA.

The vendor is the dev upstream's mTLS listener (gatehouse_dev.upstream ``--tls-port``), its echo
recording the certificate each request presented. Accepted with the right certificate; refused
without one, or with a misnamed host; an expired one is not Ready; a certificate rotated by
updating its Secret while fetches run on 2 replicas x 2 workers fails none, and later fetches
present the new one. The key is in no status, Event or log of the operator.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from playwright.sync_api import Browser

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import Endpoint
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
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
    started_fleet,
    wait_condition,
)
from tests.e2e.test_connections_page import browser as browser
from tests.e2e.test_connections_page import playwright as playwright
from tests.e2e.test_connections_page import visit as visit

pytestmark = pytest.mark.e2e

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
NONE: dict[str, Any] = {"type": "none"}
WATCHED = {"gatehouse.dev/credential": "true"}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class TestCa:
    """A CA made here, issuing certificates for the tests."""

    __test__ = False

    def __init__(self, common_name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - DAY)
            .not_valid_after(NOW + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self,
        common_name: str,
        usage: x509.ObjectIdentifier,
        *,
        ip: str = "",
        not_before: datetime.datetime = NOW - DAY,
        not_after: datetime.datetime = NOW + 20 * DAY,
    ) -> tuple[bytes, bytes, int]:
        """A certificate (then this CA's), its key, and its serial."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if ip:
            names = [x509.IPAddress(ipaddress.ip_address(ip))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        chain = _pem(certificate) + _pem(self.certificate)
        return chain, _key_pem(key), certificate.serial_number


@dataclass
class Vendor:
    """The mTLS vendor: its URL, the private CA its certificate chains to, the CA its clients'
    certificates must chain to."""

    endpoint: Endpoint
    server_ca: TestCa
    client_ca: TestCa

    @property
    def url(self) -> str:
        return self.endpoint.tls_url

    def received(self, reply: httpx.Response) -> dict[str, Any]:
        assert reply.status_code == 200, reply.text
        return self.received_id(reply.json()["id"])

    def received_id(self, request_id: str) -> dict[str, Any]:
        """What the vendor received for the echo ``request_id``, asked of it directly."""
        record = httpx.get(f"{self.endpoint.url}/_received/{request_id}", timeout=5)
        return dict(record.json())


@pytest.fixture(scope="module")
def vendor(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vendor]:
    folder = tmp_path_factory.mktemp("mtls-vendor")
    server_ca, client_ca = TestCa("vendor private CA"), TestCa("vendor client CA")
    chain, key, _ = server_ca.issue("vendor", ExtendedKeyUsageOID.SERVER_AUTH, ip="127.0.0.1")
    files = {"cert": chain, "key": key, "client_ca": _pem(client_ca.certificate)}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    endpoint = stack.local.start_upstream(tls={name: folder / name for name in files})
    try:
        yield Vendor(endpoint, server_ca, client_ca)
    finally:
        endpoint.server.stop()
        stack.local.servers.remove(endpoint.server)


def tls_secret(name: str, chain: bytes, key: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "labels": dict(WATCHED)},
        "stringData": {"tls.crt": chain.decode(), "tls.key": key.decode()},
    }


def mtls(vendor: Vendor, secret: str | None, **tls: Any) -> dict[str, Any]:
    """spec.tls: the Secret's certificate (if any), the vendor's private CA alone."""
    given: dict[str, Any] = {
        "caBundle": _pem(vendor.server_ca.certificate).decode(),
        "systemRoots": False,
        **tls,
    }
    if secret is not None:
        given["clientCertificate"] = {"secretRef": {"name": secret}}
    return given


def linked(cluster: Cluster, namespace: str, *connections: dict[str, Any]) -> str:
    links = {c["metadata"]["name"]: c["metadata"]["name"] for c in connections}
    apply(cluster, namespace, *connections, data_app("sales", links))
    wait_condition(cluster, namespace, "dataapp/sales", "True")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def test_the_schema_refuses_each_tls_rule_naming_it(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    cases = [
        ({"clientCertificate": {}}, "https://a.example", "tls.clientCertificate needs exactly one"),
        ({"systemRoots": False}, "https://a.example", "tls.systemRoots may be false only with"),
        (
            {"caBundle": pem, "caBundleRef": {"name": "ca"}},
            "https://a.example",
            "tls.caBundle and tls.caBundleRef: at most one",
        ),
        ({"caBundle": "nope"}, "https://a.example", "tls.caBundle must hold PEM certificates"),
        ({}, "http://a.example", "tls needs an https:// baseURL"),
    ]
    for tls, base_url, said in cases:
        document = connection("bad", base_url, NONE, tls=tls)
        done = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(document), check=False
        )
        assert done.returncode != 0, tls
        assert said in done.stderr, done.stderr


def test_a_client_certificate_and_a_private_ca_reach_the_vendor(
    cluster: Cluster, stack: Stack, vendor: Vendor, namespace: str
) -> None:
    chain, key, serial = vendor.client_ca.issue("shop-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", chain, key))
    accepted = connection("vendor", vendor.url, NONE, tls=mtls(vendor, "client"))
    without = connection("bare", vendor.url, NONE, tls=mtls(vendor, None))
    misnamed = connection(
        "misnamed",
        vendor.url.replace("127.0.0.1", "localhost"),
        NONE,
        tls=mtls(vendor, "client"),
    )
    token = linked(cluster, namespace, accepted, without, misnamed)
    for name in ("vendor", "bare", "misnamed"):
        wait_condition(cluster, namespace, f"externalconnection/{name}", "True", "Routed")
    ready = condition(cluster, namespace, "externalconnection/vendor", "UpstreamTLSReady")
    assert ready["reason"] == "TLSConfigured", ready
    assert "CN=shop-client" in ready["message"]
    status = (get(cluster, namespace, "externalconnection/vendor") or {})["status"]
    assert status["clientCertificate"]["subject"] == "CN=shop-client"

    seen = vendor.received(fetch(stack.proxy, token, "vendor", "/echo/accepted"))
    assert seen["clientCertificate"]["subject"] == "commonName=shop-client"
    assert int(seen["clientCertificate"]["serial"], 16) == serial

    refused = fetch(stack.proxy, token, "bare", "/echo/without")
    assert refused.status_code == 502, refused.text
    assert refused.json()["error"]["code"] == "client_certificate_refused", refused.text
    misnamed_reply = fetch(stack.proxy, token, "misnamed", "/echo/misnamed")
    assert misnamed_reply.status_code == 502, misnamed_reply.text
    assert misnamed_reply.json()["error"]["code"] == "upstream_certificate_untrusted"

    # Expired: not Ready, said so; the proxy answers 503 rather than present it.
    old_chain, old_key, _ = vendor.client_ca.issue(
        "shop-client", ExtendedKeyUsageOID.CLIENT_AUTH, not_after=NOW - DAY / 2
    )
    apply(cluster, namespace, tls_secret("client", old_chain, old_key))
    expired = wait_condition(
        cluster, namespace, "externalconnection/vendor", "False", "ClientCertificateExpired"
    )
    assert "expired at" in expired["message"]
    wait_for(
        lambda: fetch(stack.proxy, token, "vendor", "/echo/expired").status_code == 503,
        timeout=10,
        interval=0.2,
        what="the expired certificate's connection answered 503",
    )


def test_a_certificate_rotated_under_load_fails_no_fetch(
    cluster: Cluster,
    stack: Stack,
    vendor: Vendor,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    first = vendor.client_ca.issue("shop-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    second = vendor.client_ca.issue("shop-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", *first[:2]))
    # A quota that lets every fetch through: the load is the rotation's, not the limits'.
    limits = {"requestsPerMinute": 100_000}
    vendor_connection = connection(
        "vendor", vendor.url, NONE, tls=mtls(vendor, "client"), limits=limits
    )
    token = linked(cluster, namespace, vendor_connection)
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    count, concurrency = 300, 8

    with started_fleet(stack.local, tmp_path_factory.mktemp("mtls-store")) as fleet:
        urls = fleet.urls

        async def load() -> list[tuple[int, str]]:
            limits = httpx.Limits(max_connections=concurrency)
            async with httpx.AsyncClient(timeout=30, limits=limits) as client:
                gate = asyncio.Semaphore(concurrency)
                third = asyncio.Event()
                finished = 0

                async def one(index: int) -> tuple[int, str]:
                    nonlocal finished
                    async with gate:
                        reply = await client.get(
                            f"{urls[index % 2]}/v1/fetch/vendor/echo/{index}",
                            headers={"Authorization": f"Bearer {token}"},
                        )
                    finished += 1
                    if finished == count // 3:
                        third.set()
                    if reply.status_code != 200:
                        return reply.status_code, reply.text[:200]
                    return 200, reply.json()["id"]

                async def rotate() -> None:
                    # A third of the fetches done, the rest in flight or still to come.
                    await third.wait()
                    await asyncio.to_thread(
                        apply, cluster, namespace, tls_secret("client", *second[:2])
                    )

                rotation = asyncio.ensure_future(rotate())
                done = await asyncio.gather(*(one(index) for index in range(count)))
                await rotation
                return list(done)

        results = asyncio.run(load())
        failed = [result for result in results if result[0] != 200]
        assert failed == [], failed[:5]
        # Both certificates were presented during the run (one run: 186 the first, 114 the
        # second): the rotation came while it ran.
        serials = [
            int(vendor.received_id(request_id)["clientCertificate"]["serial"], 16)
            for _, request_id in results
        ]
        presented = set(serials)
        assert presented == {first[2], second[2]}

        def presents_the_new_one() -> bool:
            serials = set()
            for index in range(8):
                reply = httpx.get(
                    f"{urls[index % 2]}/v1/fetch/vendor/echo/after",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=10,
                )
                serials.add(int(vendor.received(reply)["clientCertificate"]["serial"], 16))
            return serials == {second[2]}

        wait_for(presents_the_new_one, timeout=20, interval=0.5, what="the new certificate")


def test_the_key_is_in_no_status_event_or_log(
    cluster: Cluster, stack: Stack, vendor: Vendor, namespace: str
) -> None:
    chain, key, _ = vendor.client_ca.issue("leak-canary", ExtendedKeyUsageOID.CLIENT_AUTH)
    other_chain, _, _ = vendor.client_ca.issue("other", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", chain, key))
    linked(cluster, namespace, connection("vendor", vendor.url, NONE, tls=mtls(vendor, "client")))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    # A refusal too: its message and Event name the Secret and the rule, never the key.
    apply(cluster, namespace, tls_secret("client", other_chain, key))
    wait_condition(cluster, namespace, "externalconnection/vendor", "False", "ClientKeyMismatch")
    body = "".join(key.decode().splitlines()[1:-1])
    forms = [body[:40], body[-40:], "PRIVATE KEY"]
    connections = cluster.kubectl("get", "externalconnections", "-n", namespace, "-o", "json")
    events = cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    status = json.dumps([c.get("status") for c in json.loads(connections.stdout)["items"]])
    logs = "".join(
        path.read_text(errors="replace")
        for path in stack.local.workdir.rglob("*.log")
        if path.name.startswith(("operator", "webhook", "proxy"))
    )
    assert "ClientKeyMismatch" in events
    for form in forms:
        assert form not in status
        assert form not in events
        assert form not in logs


def test_naming_a_tls_secret_needs_the_right_to_read_it(
    cluster: Cluster, stack: Stack, vendor: Vendor, namespace: str
) -> None:
    """gatehouse-admin holds no Secret rights: the admission webhook asks for get on each Secret
    spec.tls names, as for auth.secretRef."""
    chain, key, _ = vendor.client_ca.issue("shop-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", chain, key))
    admin = project_members(cluster, namespace)["admin"]
    document = connection("vendor", vendor.url, NONE, tls=mtls(vendor, "client"))

    def as_admin(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            *args, "-n", namespace, as_user=admin.persona, stdin=stdin, check=False
        )

    refused = as_admin("apply", "-f", "-", stdin=yaml.safe_dump(document))
    assert refused.returncode != 0
    assert "spec.tls.clientCertificate.secretRef:" in refused.stderr
    assert "may not get Secret 'client'" in refused.stderr
    apply(cluster, namespace, document)  # as the cluster's administrator
    moved = as_admin(
        "patch", "externalconnection", "vendor", "--type=merge",
        "-p", '{"spec":{"baseURL":"https://attacker.test"}}',
    )  # fmt: skip
    assert moved.returncode != 0
    assert "spec.baseURL:" in moved.stderr
    assert "may not get Secret 'client'" in moved.stderr
    edited = as_admin(
        "patch", "externalconnection", "vendor", "--type=merge",
        "-p", '{"spec":{"instructions":"still mine"}}',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    # A CA bundle's key moved to another key of its Secret (cert-manager's holds tls.key beside
    # ca.crt) is another value of a Secret the requester may not read.
    apply(cluster, namespace, tls_secret("issuer", chain, key))
    trusting = connection("trusting", vendor.url, NONE, tls={"caBundleRef": {"name": "issuer"}})
    apply(cluster, namespace, trusting)
    rekeyed = as_admin(
        "patch", "externalconnection", "trusting", "--type=merge",
        "-p", '{"spec":{"tls":{"caBundleRef":{"name":"issuer","key":"tls.key"}}}}',
    )  # fmt: skip
    assert rekeyed.returncode != 0
    assert "spec.tls.caBundleRef:" in rekeyed.stderr
    assert "may not get Secret 'issuer'" in rekeyed.stderr
    grant(cluster, namespace, "admin", "get", "secrets", "client")
    admitted = as_admin("apply", "-f", "-", stdin=yaml.safe_dump(renamed(document, "copy")))
    assert admitted.returncode == 0, admitted.stderr


def renamed(document: dict[str, Any], name: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(document))
    copy["metadata"]["name"] = name
    return copy


def test_a_draft_and_a_connection_test_present_the_certificate(
    cluster: Cluster, stack: Stack, vendor: Vendor, namespace: str
) -> None:
    """A draft's test compiles its spec.tls as a saved connection's (its certificate encrypted
    for that test alone); a saved connection's ConnectionTest uses its route's."""
    chain, key, serial = vendor.client_ca.issue("draft-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", chain, key))
    members = project_members(cluster, namespace)
    grant(cluster, namespace, "admin", "get", "secrets", "client")
    spec = connection("draft", vendor.url, NONE, tls=mtls(vendor, "client"))["spec"]
    draft = {"name": "draft", "spec": spec, "request": {"method": "GET", "path": "/echo/draft"}}
    answer = httpx.post(
        f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connection-drafts/tests",
        json=draft,
        headers=members["admin"].headers(),
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["passed"], outcome
    echoed = json.loads(outcome["response"]["body"])
    assert int(vendor.received_id(echoed["id"])["clientCertificate"]["serial"], 16) == serial
    # An expired one is refused before anything is sent, with the operator's reason.
    old_chain, old_key, _ = vendor.client_ca.issue(
        "draft-client", ExtendedKeyUsageOID.CLIENT_AUTH, not_after=NOW - DAY / 2
    )
    apply(cluster, namespace, tls_secret("client", old_chain, old_key))
    refused = httpx.post(
        f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connection-drafts/tests",
        json=draft,
        headers=members["admin"].headers(),
        timeout=60,
    ).json()
    assert (refused["passed"], refused["reason"]) == (False, "ClientCertificateExpired"), refused

    apply(cluster, namespace, tls_secret("client", chain, key))
    apply(cluster, namespace, connection("saved", vendor.url, NONE, tls=mtls(vendor, "client")))
    wait_condition(cluster, namespace, "externalconnection/saved", "True", "Routed")
    apply(cluster, namespace, connection_test("try-saved", "saved", path="/echo/saved"))
    test = finished(cluster, namespace, "try-saved")
    passed = {c["type"]: c for c in test["status"]["conditions"]}["Passed"]
    assert passed["status"] == "True", passed


def test_the_page_shows_the_certificate_never_its_key_and_the_wizard_edits_it(
    browser: Browser,
    visit: Any,
    cluster: Cluster,
    stack: Stack,
    vendor: Vendor,
    namespace: str,
) -> None:
    chain, key, _ = vendor.client_ca.issue("page-client", ExtendedKeyUsageOID.CLIENT_AUTH)
    apply(cluster, namespace, tls_secret("client", chain, key))
    members = project_members(cluster, namespace)
    apply(cluster, namespace, connection("vendor", vendor.url, NONE, tls=mtls(vendor, "client")))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    admin = visit(members["admin"])
    page = admin.open(f"/ui/namespaces/{namespace}/connections/vendor")
    settings = page.inner_text("#tls-settings")
    for shown in ("Secret client (kubernetes.io/tls)", "CN=page-client", "CN=vendor client CA"):
        assert shown in settings, settings
    assert "1 certificate, in the spec" in settings
    assert "not trusted: the CA bundle alone" in settings
    assert "PRIVATE KEY" not in page.content()
    edit = admin.open(f"/ui/namespaces/{namespace}/connections/vendor/edit")
    assert edit.input_value("input[name=tls_secret]") == "client"
    assert edit.is_checked("input[name=tls_only_bundle]")
    assert "BEGIN CERTIFICATE" in edit.input_value("textarea[name=tls_ca_bundle]")
