"""``spec.tls`` (issue 52): a connection's client certificate and private CAs. The model's rules
name the field; a certificate and key are checked as a TLS client uses them (they parse, the key
is the first certificate's, it is current, sizes bounded) and encrypted for the proxies; every
refusal is a condition with a typed reason that never holds key material; who may name a TLS
Secret is held to the rule of auth.secretRef. The API server is a stand-in here;
tests/e2e/test_upstream_tls.py has the real one, a real proxy and a TLS upstream."""

from __future__ import annotations

import asyncio
import base64
import datetime
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from pydantic import ValidationError

from gatehouse_contract.routes import UpstreamTls
from gatehouse_operator.access.secret_use import tls_secrets_to_read
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.meta import Kind, spec_error
from gatehouse_operator.api.stored import StoredConnectionSpec
from gatehouse_operator.cli import gatehouse as cli
from gatehouse_operator.controllers import external_connections
from gatehouse_operator.keys.client_certificates import (
    check_ca_bundle,
    check_client_certificate,
    split_sealed,
)
from gatehouse_operator.keys.credentials import CredentialProblem
from gatehouse_operator.keys.sealed_values import (
    SEALING_KEYS_FILE,
    TLS_CLIENT_CERTIFICATE,
    Scope,
    SealedValue,
    SealedValueProblem,
    SealingKeys,
)
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table.rollout import Routed
from gatehouse_operator.wiring.controller import assemble
from tests.operator.kube_fakes import kube_of
from tests.operator.test_missed_deletions import StaticKeyring

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
ORIGIN = "https://api.example.com"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issued(
    key: PrivateKey,
    common_name: str = "shop-client",
    *,
    not_before: datetime.datetime = NOW - DAY,
    not_after: datetime.datetime = NOW + 90 * DAY,
) -> bytes:
    """A certificate for ``key`` signed by a throwaway CA, then the CA's (a chain of two)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test-ca"))
        .issuer_name(_name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - 2 * DAY)
        .not_valid_after(NOW + 365 * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(ca_key, hashes.SHA256())
    )
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (leaf, ca))


def _check(chain: bytes, key: bytes) -> Any:
    return check_client_certificate(chain, key, "tls.crt", "tls.key", NOW)


@pytest.mark.parametrize(
    "key",
    [
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP384R1()),
        rsa.generate_private_key(65537, 2048),
        ed25519.Ed25519PrivateKey.generate(),
    ],
    ids=["P-256", "P-384", "RSA-2048", "Ed25519"],
)
def test_a_client_certificate_and_its_key_pass_re_encoded(key: PrivateKey) -> None:
    chain = issued(key)
    checked = _check(b"# a comment before\n" + chain, _pem_key(key))
    assert checked.subject == "CN=shop-client"
    assert checked.issuer == "CN=test-ca"
    assert checked.pem.startswith(b"-----BEGIN CERTIFICATE-----")  # the comment is gone
    assert checked.pem.count(b"BEGIN CERTIFICATE") == 2
    assert checked.pem.endswith(b"-----END PRIVATE KEY-----\n")


def _reason(chain: bytes, key: bytes) -> tuple[str, str]:
    with pytest.raises(CredentialProblem) as caught:
        _check(chain, key)
    return caught.value.reason, caught.value.message


def test_each_bad_certificate_or_key_is_a_typed_reason_without_key_material() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    chain, pem = issued(key), _pem_key(key)
    other = _pem_key(ec.generate_private_key(ec.SECP256R1()))
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    cases = {
        "not PEM": ((b"hello", pem), "InvalidClientCertificate", "tls.crt is not PEM"),
        "nine": ((chain * 5, pem), "InvalidClientCertificate", "holds 10 certificates"),
        "a key": ((chain, b"nope"), "InvalidClientKey", "tls.key is not a PEM private key"),
        "encrypted": ((chain, encrypted), "InvalidClientKey", "encrypted with a passphrase"),
        "another": ((chain, other), "ClientKeyMismatch", "not the private key of the first"),
        "expired": (
            (issued(key, not_before=NOW - 9 * DAY, not_after=NOW - DAY), pem),
            "ClientCertificateExpired",
            "expired at",
        ),
        "early": (
            (issued(key, not_before=NOW + DAY), pem),
            "InvalidClientCertificate",
            "not valid before",
        ),
    }
    for name, ((given_chain, given_key), reason, said) in cases.items():
        found, message = _reason(given_chain, given_key)
        assert (found, said in message) == (reason, True), (name, message)
        assert "PRIVATE" not in message, name
        assert "MII" not in message, name


def test_only_allowed_key_kinds_and_sizes_pass() -> None:
    small = rsa.generate_private_key(65537, 1024)  # noqa: S505 (refused: the point)
    assert _reason(issued(small), _pem_key(small))[1] == (
        "tls.key is a 1,024-bit RSA key; 2,048 to 4,096 bits are allowed"
    )
    p521 = ec.generate_private_key(ec.SECP521R1())
    assert _reason(issued(p521), _pem_key(p521))[1] == (
        "tls.key is an EC key on secp521r1; P-256 and P-384 are allowed"
    )
    assert _reason(b"x" * 40_000, b"")[1].startswith("tls.crt is 40,000 bytes")


def test_expiry_is_told_as_cert_manager_renews_with_a_third_left() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    fresh = _check(issued(key, not_after=NOW + 60 * DAY), _pem_key(key))
    verdict = fresh.expiry_verdict(NOW)
    assert (verdict.type, verdict.status, verdict.reason) == (
        "ClientCertificateCurrent",
        "True",
        "ClientCertificateCurrent",
    )
    late = _check(
        issued(key, not_before=NOW - 80 * DAY, not_after=NOW + 10 * DAY), _pem_key(key)
    ).expiry_verdict(NOW)
    assert (late.status, late.reason) == ("False", "ClientCertificateExpiringSoon")
    assert "expires at" in late.message
    assert "in 9 days" in late.message


def test_a_sealed_value_is_split_into_its_chain_and_its_one_key() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    chain, pem = issued(key), _pem_key(key)
    assert split_sealed(chain + pem, "sealed") == (chain, pem)
    assert split_sealed(pem + chain, "sealed") == (chain, pem)
    with pytest.raises(CredentialProblem, match="it holds 2 private keys"):
        split_sealed(chain + pem + pem, "sealed")
    with pytest.raises(CredentialProblem, match="it holds 0 private keys"):
        split_sealed(chain, "sealed")


def test_a_ca_bundle_is_one_or_more_pem_certificates() -> None:
    chain = issued(ec.generate_private_key(ec.SECP256R1()))
    bundle, count = check_ca_bundle(b"CA one\n" + chain, "tls.caBundle")
    assert (count, bundle.count("BEGIN CERTIFICATE"), bundle.startswith("-----BEGIN")) == (
        2,
        2,
        True,
    )
    with pytest.raises(CredentialProblem) as caught:
        check_ca_bundle(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", "x")
    assert caught.value.reason == "InvalidCABundle"


def _spec(tls: Any, base_url: str = ORIGIN) -> dict[str, Any]:
    return {
        "displayName": "Vendor",
        "baseURL": base_url,
        "linkPolicy": "Builders",
        "auth": {"type": "none"},
        "tls": tls,
    }


@pytest.mark.parametrize(
    ("tls", "base_url", "said"),
    [
        ({"clientCertificate": {}}, ORIGIN, "tls.clientCertificate needs exactly one of"),
        (
            {"clientCertificate": {"secretRef": {"name": "c"}, "sealed": "gh1.a.b"}},
            ORIGIN,
            "tls.clientCertificate needs exactly one of",
        ),
        (
            {"caBundle": "-----BEGIN CERTIFICATE-----", "caBundleRef": {"name": "ca"}},
            ORIGIN,
            "tls.caBundle and tls.caBundleRef: at most one",
        ),
        ({"systemRoots": False}, ORIGIN, "tls.systemRoots may be false only with tls.caBundle"),
        ({"caBundle": "hello"}, ORIGIN, "tls.caBundle must hold PEM certificates"),
        ({}, "http://api.example.com", "tls needs an https:// baseURL"),
    ],
)
def test_each_tls_rule_is_refused_naming_the_field(tls: Any, base_url: str, said: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ExternalConnectionSpec.model_validate(_spec(tls, base_url))
    assert said in spec_error(caught.value)


def test_the_crds_rules_say_the_same() -> None:
    """The schema's CEL carries each message (the API server's refusals: e2e)."""
    schema = ExternalConnectionSpec.model_json_schema(by_alias=True)
    text = str(schema)
    for said in (
        "tls.clientCertificate needs exactly one of",
        "tls.caBundle and tls.caBundleRef: at most one",
        "tls.systemRoots may be false only with",
        "tls needs an https:// baseURL",
    ):
        assert said in text


def test_naming_a_tls_secret_needs_the_right_to_read_it() -> None:
    def spec(base_url: str = ORIGIN, **tls: Any) -> StoredConnectionSpec:
        return StoredConnectionSpec.model_validate(_spec(tls, base_url))

    with_both = spec(
        clientCertificate={"secretRef": {"name": "client"}}, caBundleRef={"name": "ca"}
    )
    assert tls_secrets_to_read(None, with_both) == [
        ("client", "spec.tls.clientCertificate.secretRef"),
        ("ca", "spec.tls.caBundleRef"),
    ]
    assert tls_secrets_to_read(with_both, with_both) == []
    moved = spec("https://elsewhere.example", **(with_both.tls or {}))
    assert tls_secrets_to_read(with_both, moved) == [
        ("client", "spec.baseURL"),
        ("ca", "spec.baseURL"),
    ]
    other = spec(clientCertificate={"secretRef": {"name": "other"}})
    assert tls_secrets_to_read(with_both, other) == [
        ("other", "spec.tls.clientCertificate.secretRef")
    ]
    assert tls_secrets_to_read(None, spec(caBundle="-----BEGIN CERTIFICATE-----")) == []


class TlsSecretsApi:
    """Serves Secrets by name and records statuses and Events."""

    def __init__(self, secrets: dict[str, tuple[str, dict[str, bytes]]]) -> None:
        self.secrets = secrets
        self.statuses: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []

    async def secret(self, namespace: str, name: str) -> Any:
        if name not in self.secrets:
            return None
        type_, data = self.secrets[name]
        encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
        labels = {"gatehouse.dev/credential": "true"}
        return SimpleNamespace(type=type_, data=encoded, metadata=SimpleNamespace(labels=labels))

    async def patch_status(
        self, kind: Kind, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        self.statuses.append(status)

    async def post_event(
        self, kind: Kind, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        self.events.append((type_, reason, message))


def _connection(tls: Any) -> dict[str, Any]:
    return {
        "kind": "ExternalConnection",
        "metadata": {"namespace": "shop", "name": "vendor", "uid": "u1", "generation": 1},
        "spec": _spec(tls),
    }


def test_a_tls_secret_is_compiled_into_the_route_and_its_problems_into_conditions(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    chain, pem = issued(key), _pem_key(key)
    api = TlsSecretsApi(
        {
            "client": ("kubernetes.io/tls", {"tls.crt": chain, "tls.key": pem}),
            "opaque": ("Opaque", {"tls.crt": chain, "tls.key": pem}),
            "ca": ("Opaque", {"ca.crt": chain}),
        }
    )
    keys = SealingKeys.generate()
    (tmp_path / SEALING_KEYS_FILE).write_text(keys.dump())
    settings = OperatorSettings(keyring_file=tmp_path / "keyring.json")
    keyring = StaticKeyring()
    runtime = assemble(settings, kube_of(api), keyring)
    routed: list[Routed] = []

    async def waits_for_the_proxies(entry: Routed) -> None:
        routed.append(entry)

    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)

    def reconcile(tls: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        written, waiting = len(api.statuses), len(routed)
        asyncio.run(external_connections.reconcile(runtime, resource_of(_connection(tls))))
        if len(routed) > waiting:
            entry = routed[-1]
            fields = entry.extra.model_dump(by_alias=True, exclude_unset=True, mode="json")
            return fields, {verdict.type: asdict(verdict) for verdict in entry.verdicts}
        assert len(api.statuses) > written
        return api.statuses[-1], {c["type"]: c for c in api.statuses[-1]["conditions"]}

    status, found = reconcile(
        {"clientCertificate": {"secretRef": {"name": "client"}}, "caBundleRef": {"name": "ca"}}
    )
    assert found["UpstreamTLSReady"]["reason"] == "TLSConfigured"
    assert "CN=shop-client" in found["UpstreamTLSReady"]["message"]
    assert "2 CA certificates of tls and the system's roots" in found["UpstreamTLSReady"]["message"]
    assert found["ClientCertificateCurrent"]["status"] == "True"
    assert status["clientCertificate"]["subject"] == "CN=shop-client"
    route = runtime.routes.connection("shop/vendor")
    assert route is not None
    assert route.tls is not None
    assert route.tls.client_certificate
    opened = keyring.keyring.decrypt(
        route.tls.client_certificate, UpstreamTls.context("u1", ORIGIN)
    )
    assert opened.startswith(chain)
    assert opened.endswith(pem)
    assert route.tls.ca_bundle.count("BEGIN CERTIFICATE") == 2
    first = route.tls.fingerprint
    reconcile(
        {"clientCertificate": {"secretRef": {"name": "client"}}, "caBundleRef": {"name": "ca"}}
    )
    after = runtime.routes.connection("shop/vendor")
    assert after is not None
    assert after.tls is not None
    assert after.tls.fingerprint == first  # not encrypted again: the proxies keep their context
    # Nor checked again (a signature, for RSA up to milliseconds, per reconcile and resync);
    # the clock is still asked: an unchanged certificate that expired is refused.
    from gatehouse_operator.connections import upstream_tls

    def no_second_check(*_: Any) -> Any:
        raise AssertionError("an unchanged pair was checked again")

    monkeypatch.setattr(upstream_tls, "checked_pair", no_second_check)
    both = {"clientCertificate": {"secretRef": {"name": "client"}}, "caBundleRef": {"name": "ca"}}
    assert reconcile(both)[1]["UpstreamTLSReady"]["reason"] == "TLSConfigured"
    later = datetime.datetime.now(datetime.UTC) + 100 * DAY

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return later

    monkeypatch.setattr(datetime, "datetime", Later)
    assert reconcile(both)[1]["UpstreamTLSReady"]["reason"] == "ClientCertificateExpired"
    monkeypatch.undo()
    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)

    sealed = keys.public().seal(
        chain + pem, Scope("shop", "vendor", ORIGIN, use=TLS_CLIENT_CERTIFICATE)
    )
    _, found = reconcile({"clientCertificate": {"sealed": sealed}})
    assert found["UpstreamTLSReady"]["reason"] == "TLSConfigured"
    # The auth secret's sealing does not open as a certificate, nor the other way round.
    as_auth = keys.public().seal(chain + pem, Scope("shop", "vendor", ORIGIN))
    _, found = reconcile({"clientCertificate": {"sealed": as_auth}})
    assert found["UpstreamTLSReady"]["reason"] == "SealedForAnotherConnection"
    assert found["UpstreamTLSReady"]["message"].startswith("tls.clientCertificate.sealed is")

    failing: list[tuple[dict[str, Any], str]] = [
        ({"clientCertificate": {"secretRef": {"name": "missing"}}}, "SecretNotFound"),
        ({"clientCertificate": {"secretRef": {"name": "opaque"}}}, "SecretWrongType"),
        ({"caBundleRef": {"name": "ca", "key": "other"}}, "SecretKeyNotFound"),
    ]
    for tls, reason in failing:
        status, found = reconcile(tls)
        assert found["UpstreamTLSReady"]["reason"] == reason
        assert found["Ready"]["reason"] == reason
        route = runtime.routes.connection("shop/vendor")
        assert route is not None
        assert route.unavailable
        assert route.tls is None
        if "clientCertificate" in tls:
            assert status["clientCertificate"] is None  # cleared: no certificate in use
    said = " ".join(str(s) for s in api.statuses) + " ".join(map(str, api.events))
    assert "PRIVATE KEY" not in said
    assert pem.decode().splitlines()[1] not in said


def test_gatehouse_seal_seals_a_client_certificate_for_that_use_alone(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = SealingKeys.generate()
    cert = tmp_path / "keys.json"
    cert.write_text(keys.public().dump())
    key = ec.generate_private_key(ec.SECP256R1())
    chain, pem = issued(key), _pem_key(key)
    (tmp_path / "client.pem").write_bytes(chain)
    (tmp_path / "client.key").write_bytes(pem)
    source = tmp_path / "vendor.yaml"
    source.write_text(
        "apiVersion: gatehouse.dev/v1alpha1\nkind: ExternalConnection\n"
        "metadata: {name: vendor, namespace: shop}\n"
        "spec:\n  displayName: Vendor  # kept\n  baseURL: https://API.example.com\n"
        "  auth: {type: none}\n  linkPolicy: Builders\n"
    )
    tls = ["--tls-cert", str(tmp_path / "client.pem"), "--tls-key", str(tmp_path / "client.key")]
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert), *tls]) == 0
    out, err = capsys.readouterr()
    assert "# kept" in out
    assert "PRIVATE" not in out + err
    sealed = yaml.safe_load(out)["spec"]["tls"]["clientCertificate"]["sealed"]
    scope = Scope("shop", "vendor", ORIGIN, use=TLS_CLIENT_CERTIFICATE)
    assert split_sealed(keys.open(sealed, scope), "sealed") == (chain, pem)
    with pytest.raises(SealedValueProblem):  # not an auth secret
        keys.open(sealed, Scope("shop", "vendor", ORIGIN))
    # A key of another certificate is refused before anything is sealed, naming the option.
    (tmp_path / "other.key").write_bytes(_pem_key(ec.generate_private_key(ec.SECP256R1())))
    wrong = [*tls[:3], str(tmp_path / "other.key")]
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert), *wrong]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().endswith(
        "the first certificate must be the client's own, its chain after it"
    )
    assert "--tls-key is not the private key of the first certificate of --tls-cert" in err
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert), *tls[:2]]) == 2
    assert "give both --tls-cert and --tls-key" in capsys.readouterr().err


def test_the_wizards_tls_section_goes_into_the_spec_and_is_kept_on_an_edit() -> None:
    from tests.operator.test_wizard import BASE, posted, stored_form

    assert "tls" not in posted({**BASE, "auth_type": "none"}).spec()
    bundle = issued(ec.generate_private_key(ec.SECP256R1())).decode()
    given = {
        **BASE,
        "auth_type": "none",
        "tls_secret": "vendor-client",
        "tls_ca_bundle": bundle.replace("\n", "\r\n"),
        "tls_only_bundle": "on",
    }
    spec = posted(given).spec()
    assert spec["tls"] == {
        "clientCertificate": {"secretRef": {"name": "vendor-client"}},
        "caBundle": bundle,
        "systemRoots": False,
    }
    assert ExternalConnectionSpec.model_validate(spec).tls is not None
    # Without a bundle, only the bundle cannot be trusted: the rule, under its field's title.
    refused = posted({**BASE, "auth_type": "none", "tls_only_bundle": "on"})
    assert any(
        "tls.systemRoots may be false only with tls.caBundle" in line for line in refused.problems()
    ), refused.problems()
    # An edit shows the Secret and the bundle; a sealed certificate stays as stored.
    body = {
        "metadata": {"name": "vendor", "resourceVersion": "7"},
        "spec": {
            "displayName": "Vendor",
            "baseURL": ORIGIN,
            "auth": {"type": "none"},
            "linkPolicy": "AdminsOnly",
            "tls": {"clientCertificate": {"sealed": "gh1.a.b"}, "caBundle": bundle},
        },
    }
    form = stored_form(body)
    assert (form.tls_secret, form.tls_ca_bundle, form.tls_only_bundle) == (
        "",
        bundle.strip(),
        False,
    )
    assert form.spec()["tls"] == {"clientCertificate": {"sealed": "gh1.a.b"}, "caBundle": bundle}


def test_the_page_says_the_certificates_subject_and_expiry_never_its_key() -> None:
    from gatehouse_operator.connections.models import ConnectionDetail
    from gatehouse_operator.web.tls_section import tls_view

    def view(tls: Any, read: Any = None) -> Any:
        detail = ConnectionDetail.model_construct(tls=tls, client_certificate=read)
        return tls_view(detail)

    assert view(None) is None
    read = {"subject": "CN=shop-client", "issuer": "CN=test-ca", "notAfter": "2027-01-01T00:00:00Z"}
    rows = dict(view({"clientCertificate": {"secretRef": {"name": "client"}}}, read))
    assert rows == {
        "Client certificate": "Secret client (kubernetes.io/tls)",
        "Subject": "CN=shop-client",
        "Issuer": "CN=test-ca",
        "Expires": "2027-01-01T00:00:00Z",
        "CA bundle": "none",
        "System roots": "trusted too",
    }
    pem = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    rows = dict(
        view(
            {"clientCertificate": {"sealed": "gh1.a.b"}, "caBundle": pem * 2, "systemRoots": False}
        )
    )
    assert rows["Client certificate"] == "sealed (gatehouse seal --tls-cert --tls-key)"
    assert rows["CA bundle"] == "2 certificates, in the spec"
    assert rows["System roots"] == "not trusted: the CA bundle alone"
    assert dict(view({"caBundleRef": {"name": "ca", "key": "ca.crt"}}))["CA bundle"] == (
        "key ca.crt of Secret ca"
    )


def test_the_tls_example_is_a_connection_the_model_takes_with_a_ca_that_parses() -> None:
    """examples/connections/tls/: the API server's dry run is tests/e2e/test_examples.py."""
    from tests.dev.doc_blocks import ROOT

    example = ROOT / "examples" / "connections" / "tls" / "vendor-mtls.yaml"
    (document,) = yaml.safe_load_all(example.read_text())
    spec = ExternalConnectionSpec.model_validate(document["spec"])
    assert spec.tls is not None
    assert spec.tls.ca_bundle is not None
    assert check_ca_bundle(spec.tls.ca_bundle.encode(), "tls.caBundle")[1] == 1


def test_a_sealed_client_certificate_is_reconciled_when_the_sealing_keys_change() -> None:
    from gatehouse_operator.wiring.key_following import sealed_connections

    bodies = {
        "shop/tls": _connection({"clientCertificate": {"sealed": "gh1.a.b"}}),
        "shop/plain": _connection({"caBundleRef": {"name": "ca"}}),
    }
    routes = SimpleNamespace(
        connection_keys=lambda: sorted(bodies),
        connection_resource=lambda key: resource_of(bodies[key]),
    )
    assert sealed_connections(SimpleNamespace(routes=routes)) == ["shop/tls"]  # type: ignore[arg-type]


def test_moving_a_ca_bundle_ref_to_another_key_of_its_secret_needs_the_right_to_read_it() -> None:
    """A cert-manager Secret holds ca.crt beside tls.crt and tls.key: whoever points caBundleRef
    at another of its keys chooses, from a Secret they may not read, whom the connection trusts
    (and learns from the condition whether that key holds certificates), as auth.secretRef's
    key is held to the rule."""

    def spec(key: str) -> StoredConnectionSpec:
        return StoredConnectionSpec.model_validate(
            _spec({"caBundleRef": {"name": "issuer", "key": key}})
        )

    assert tls_secrets_to_read(spec("ca.crt"), spec("tls.crt")) == [
        ("issuer", "spec.tls.caBundleRef")
    ]
    assert tls_secrets_to_read(spec("ca.crt"), spec("ca.crt")) == []


def test_a_certificate_not_valid_yet_is_judged_again_by_the_clock() -> None:
    """A rotated certificate whose notBefore is still ahead of the operator's clock (the issuer's
    clock a little ahead, a certificate put in place before it starts) is refused for now; the
    clock alone makes it valid, with no change of its Secret to bring it back: the resync judges
    it again, as it judges a valid certificate's expiry."""
    from gatehouse_operator.wiring import resync

    key = ec.generate_private_key(ec.SECP256R1())
    ahead = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    chain = issued(key, not_before=ahead)
    api = TlsSecretsApi(
        {"client": ("kubernetes.io/tls", {"tls.crt": chain, "tls.key": _pem_key(key)})}
    )
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    tls = {"clientCertificate": {"secretRef": {"name": "client"}}}
    asyncio.run(external_connections.reconcile(runtime, resource_of(_connection(tls))))
    found = {c["type"]: c for c in api.statuses[-1]["conditions"]}
    assert found["UpstreamTLSReady"]["reason"] == "InvalidClientCertificate"
    assert "is not valid before" in found["UpstreamTLSReady"]["message"]
    assert resync.unwatched(runtime) == ["shop/vendor"]


def test_a_watched_certificate_is_read_again_only_when_the_clock_moves_its_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resync judges a client certificate's expiry again, which needs the clock, not its
    Secret: a watched Secret's change comes by its event. Reading every connection's Secrets every
    minute for it would cost 1,000 GETs a minute for 1,000 connections (measured with the API
    stand-in); only a connection whose verdict the clock has moved (renewal due, expired) is
    read again."""
    from gatehouse_operator.status import ready
    from gatehouse_operator.wiring import resync

    key = ec.generate_private_key(ec.SECP256R1())
    chain = issued(key, not_before=NOW - DAY, not_after=NOW + 90 * DAY)
    api = TlsSecretsApi(
        {"client": ("kubernetes.io/tls", {"tls.crt": chain, "tls.key": _pem_key(key)})}
    )
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())

    async def reported(routed: Routed) -> None:
        verdicts = [*routed.verdicts, ready(routed.verdicts, "Routed", routed.message)]
        await runtime.rollout.write(
            routed.kind, routed.resource, verdicts, routed.extra, routed.key
        )

    monkeypatch.setattr(runtime.rollout, "report", reported)
    tls = {"clientCertificate": {"secretRef": {"name": "client"}}}
    asyncio.run(external_connections.reconcile(runtime, resource_of(_connection(tls))))
    found = {c["type"]: c for c in api.statuses[-1]["conditions"]}
    assert found["ClientCertificateCurrent"]["status"] == "True"
    assert found["CredentialWatched"]["status"] == "True"
    assert resync.unwatched(runtime) == []
    later = datetime.datetime.now(datetime.UTC) + 70 * DAY  # within its last third

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return later

    monkeypatch.setattr(datetime, "datetime", Later)
    assert resync.unwatched(runtime) == ["shop/vendor"]


def test_a_certificate_with_a_huge_subject_is_named_within_the_conditions_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whoever writes the Secret chooses the certificate's names: a subject and issuer of
    thousands of characters (escaped, RFC 4514 doubles them) within the 32 KiB chain made the
    UpstreamTLSReady message longer than the CRD takes, and the status write raised (no status,
    a traceback, retried for ever). Names are cut where they are told."""
    from cryptography.x509.oid import ObjectIdentifier

    key = ec.generate_private_key(ec.SECP256R1())
    oid = "1.3.6.1.4.1.99999."
    name = x509.Name(
        [x509.NameAttribute(ObjectIdentifier(f"{oid}{index}"), "," * 1000) for index in range(10)]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + 90 * DAY)
        .sign(key, hashes.SHA256())
    )
    chain = certificate.public_bytes(serialization.Encoding.PEM)
    assert len(chain) < 32 * 1024
    api = TlsSecretsApi(
        {"client": ("kubernetes.io/tls", {"tls.crt": chain, "tls.key": _pem_key(key)})}
    )
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    routed: list[Routed] = []

    async def waits_for_the_proxies(entry: Routed) -> None:
        routed.append(entry)

    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)
    tls = {"clientCertificate": {"secretRef": {"name": "client"}}}
    asyncio.run(external_connections.reconcile(runtime, resource_of(_connection(tls))))
    # Routed (its spec.tls is bounded by its own rules, not the entry's): the status the
    # proxies' acknowledgement writes.
    (entry,) = routed
    found = {str(verdict.type): verdict for verdict in entry.verdicts}
    assert found["UpstreamTLSReady"].status == "True"
    assert len(found["UpstreamTLSReady"].message) < 4096
    assert all(len(message) < 4096 for _, _, message in api.events)


def test_a_client_certificate_sealed_with_an_older_key_is_offered_resealed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    keys_file = tmp_path / SEALING_KEYS_FILE
    keys = SealingKeys.generate()
    keys_file.write_text(keys.dump())
    scope = Scope("shop", "vendor", ORIGIN, use=TLS_CLIENT_CERTIFICATE)
    sealed = keys.public().seal(issued(key) + _pem_key(key), scope)
    api = TlsSecretsApi({})
    settings = OperatorSettings(keyring_file=tmp_path / "keyring.json")
    runtime = assemble(settings, kube_of(api), StaticKeyring())
    routed: list[Routed] = []

    async def waits_for_the_proxies(entry: Routed) -> None:
        routed.append(entry)

    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)
    rotated = keys.rotated()
    keys_file.write_text(rotated.dump())
    tls = {"clientCertificate": {"sealed": sealed}}
    asyncio.run(external_connections.reconcile(runtime, resource_of(_connection(tls))))
    ready = next(v for v in routed[-1].verdicts if v.type == "UpstreamTLSReady")
    assert ready.reason == "TLSConfigured"  # the older key still opens it
    status = routed[-1].extra.model_dump(by_alias=True, exclude_unset=True, mode="json")
    offers = [
        value
        for value in status.values()
        if isinstance(value, str)
        and value.startswith("gh1.")
        and SealedValue.parse(value).key == rotated.active
    ]
    assert offers
    assert rotated.open(offers[0], scope, "tls.clientCertificate.sealed").startswith(b"-----")


def test_a_connections_secret_and_certificate_are_each_offered_once_for_their_own_use(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside a sealed auth secret, the certificate's offer is its own (bound to its use), made
    once per value and active key; an offer taken in is no longer offered, and an invalid spec
    withdraws it (it would be for a value the file may no longer hold)."""
    key = ec.generate_private_key(ec.SECP256R1())
    keys_file = tmp_path / SEALING_KEYS_FILE
    keys = SealingKeys.generate()
    keys_file.write_text(keys.dump())
    secret_scope = Scope("shop", "vendor", ORIGIN)
    scope = Scope("shop", "vendor", ORIGIN, use=TLS_CLIENT_CERTIFICATE)
    api = TlsSecretsApi({})
    settings = OperatorSettings(keyring_file=tmp_path / "keyring.json")
    runtime = assemble(settings, kube_of(api), StaticKeyring())
    routed: list[Routed] = []

    async def waits_for_the_proxies(entry: Routed) -> None:
        routed.append(entry)

    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)

    def offered(secret: str, certificate: str, status: Any = None) -> dict[str, Any]:
        body = _connection({"clientCertificate": {"sealed": certificate}})
        body["spec"]["auth"] = {"type": "bearer", "sealedSecret": secret}
        body["status"] = status or {}
        asyncio.run(external_connections.reconcile(runtime, resource_of(body)))
        return routed[-1].extra.model_dump(by_alias=True, exclude_unset=True, mode="json")

    secret = keys.public().seal(b"token", secret_scope)
    certificate = keys.public().seal(issued(key) + _pem_key(key), scope)
    rotated = keys.rotated()
    keys_file.write_text(rotated.dump())
    status = offered(secret, certificate)
    resealed = status["resealedClientCertificate"]
    assert SealedValue.parse(resealed).scope == scope
    assert SealedValue.parse(resealed).key == rotated.active
    assert rotated.open(status["resealedSecret"], secret_scope) == b"token"
    assert offered(secret, certificate) == status  # the same offers, not new ciphertexts
    taken = offered(status["resealedSecret"], resealed, status)
    assert (taken["resealedSecret"], taken["resealedClientCertificate"]) == ("", "")

    body = _connection({"clientCertificate": {"sealed": certificate}})
    body["spec"]["linkPolicy"] = "Everyone?"
    body["status"] = status
    asyncio.run(external_connections.reconcile(runtime, resource_of(body)))
    assert api.statuses[-1]["resealedClientCertificate"] == ""


def _altered(chain: bytes, find: bytes, put: bytes) -> bytes:
    """The chain's first certificate with ``find`` replaced by ``put`` in its DER (its signature
    no longer verifies: nothing here checks it, as the vendor will)."""
    der = x509.load_pem_x509_certificate(chain).public_bytes(serialization.Encoding.DER)
    assert find in der
    encoded = base64.encodebytes(der.replace(find, put, 1))
    return b"-----BEGIN CERTIFICATE-----\n" + encoded + b"-----END CERTIFICATE-----\n"


def test_a_certificate_whose_key_or_names_cannot_be_read_is_a_typed_reason() -> None:
    """cryptography reads a certificate's public key and names only when asked: a key of an
    unknown algorithm (UnsupportedAlgorithm) or a name that is not well-formed (ValueError) went
    out of the check as a traceback (no status, retried for ever; gatehouse seal's too)."""
    key = ec.generate_private_key(ec.SECP256R1())
    chain = issued(key)
    id_ec_public_key = bytes.fromhex("06072a8648ce3d0201")
    for altered in (
        _altered(chain, id_ec_public_key, bytes.fromhex("06072a8648ce3d0209")),
        _altered(chain, b"shop-client", b"shop-clien\xff"),
    ):
        with pytest.raises(CredentialProblem) as refused:
            _check(altered, _pem_key(key))
        assert refused.value.reason == "InvalidClientCertificate"
        assert "tls.crt" in refused.value.message
