"""``gatehouse seal`` offline (``--cert``): the value from stdin or a file, never argv; the
connection's file comes back with its sealed value and nothing else changed."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from kubernetes.client import V1ConfigMap

from gatehouse_contract.keyring import Keyring
from gatehouse_operator.api.auth_kinds import ENDPOINT_SECTIONS
from gatehouse_operator.api.connection import Auth
from gatehouse_operator.cli import gatehouse as cli
from gatehouse_operator.cli import kubeconfig
from gatehouse_operator.keys.credentials import encrypt_credential, sealed_in
from gatehouse_operator.keys.sealed_values import (
    SEALING_KEYS_FILE,
    TLS_CLIENT_CERTIFICATE,
    PublicSealingKeys,
    Scope,
    SealedValue,
    SealedValueProblem,
    SealingKeys,
)

CONNECTION = """\
# Stripe, for the shop's apps.
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata:
  name: stripe
  namespace: shop
spec:
  displayName: Stripe  # shown to app builders
  baseURL: https://API.stripe.com:443
  auth:
    type: bearer
    secretRef: {name: stripe, key: token}
  linkPolicy: AdminsOnly
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
"""
SECRET = b"sk_live_canary_cli\n"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[SealingKeys, Path]:
    keys = SealingKeys.generate()
    cert = tmp_path / "keys.json"
    cert.write_text(keys.public().dump())
    return keys, cert


def stdin(monkeypatch: pytest.MonkeyPatch, data: bytes, *, tty: bool = False) -> None:
    stream = io.TextIOWrapper(io.BytesIO(data))
    monkeypatch.setattr(stream, "isatty", lambda: tty)
    monkeypatch.setattr(sys, "stdin", stream)


def test_seal_rewrites_the_connection_file_from_stdin(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, cert = keys
    source = tmp_path / "stripe.yaml"
    source.write_text(CONNECTION)
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert)]) == 0
    out, err = capsys.readouterr()
    assert "canary" not in out + err
    assert "# Stripe, for the shop's apps." in out
    assert "# shown to app builders" in out
    connection, unrelated = yaml.safe_load_all(out)
    assert unrelated["metadata"]["name"] == "unrelated"
    auth = connection["spec"]["auth"]
    assert "secretRef" not in auth
    # Bound to the origin the operator pins (its normal form), not the text as written.
    scope = Scope("shop", "stripe", "https://api.stripe.com")
    assert private.open(auth["sealedSecret"], scope) == SECRET
    assert f"sealed for {scope} with key {private.active}" in err


def test_seal_without_a_file_prints_the_value_or_a_patch(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, cert = keys
    secret = tmp_path / "token"
    secret.write_bytes(SECRET)
    common = ["seal", "--name", "stripe", "--base-url", "https://api.stripe.com", "-n", "shop"]
    assert cli.main([*common, "--from-file", str(secret), "--cert", str(cert)]) == 0
    value = capsys.readouterr().out.strip()
    assert SealedValue.parse(value).scope == Scope("shop", "stripe", "https://api.stripe.com")
    args = [*common, "--from-file", str(secret), "--cert", str(cert), "-o", "patch"]
    assert cli.main(args) == 0
    patch = yaml.safe_load(capsys.readouterr().out)
    assert patch["spec"]["auth"]["secretRef"] is None
    assert patch["spec"]["auth"]["sealedSecret"].startswith("gh1.")


@pytest.mark.parametrize(
    ("args", "tty", "message"),
    [
        (["--name", "s", "--base-url", "https://a.example", "-n", "x"], True, "on stdin or with"),
        (["--name", "s", "--base-url", "https://a.example"], False, "the connection's namespace"),
        (["--name", "s", "--base-url", "ftp://a.example", "-n", "x"], False, "spec.baseURL"),
        (["--name", "s"], False, "give -f CONNECTION.yaml, or --name and --base-url"),
    ],
)
def test_seal_refuses_with_one_line_naming_the_option(
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    tty: bool,
    message: str,
) -> None:
    _, cert = keys
    stdin(monkeypatch, SECRET, tty=tty)
    assert cli.main(["seal", *args, "--cert", str(cert)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "canary" not in err


class _Cluster:
    """The connection as the API server holds it, and the published public keys: a stand-in
    for the two reads reseal makes (tests/e2e/test_sealed_credentials.py makes them for real)."""

    def __init__(self, live: dict[str, Any], public: PublicSealingKeys) -> None:
        self.live = live
        self.public = public
        metadata = live["metadata"]
        self.where = (metadata["namespace"], "externalconnections", metadata["name"])

    def get_namespaced_custom_object(self, *where: str, **_: Any) -> dict[str, Any]:
        assert where[2:] == self.where, where
        return self.live

    def read_namespaced_config_map(self, name: str, namespace: str, **_: Any) -> V1ConfigMap:
        return V1ConfigMap(data={SEALING_KEYS_FILE: self.public.dump()})


OWN = Scope("shop", "stripe", "https://api.stripe.com")  # CONNECTION's, its origin normalised


def _reseal(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    offered: Callable[[SealingKeys], str],
    document: dict[str, Any] | None = None,
    scope: Scope = OWN,
) -> tuple[int, str, str, SealingKeys]:
    """Reseals ``document`` (CONNECTION with bearer auth when none), its secret sealed for
    ``scope`` with an old key, whose status offers ``offered(keys)``: the exit code, the file
    before and after, and the rotated keys."""
    old = SealingKeys.generate()
    keys = SealingKeys.parse(old.rotated().dump())
    if document is None:
        document = yaml.safe_load(CONNECTION.split("---")[0])
        document["spec"]["auth"] = {"type": "bearer"}
    auth = document["spec"]["auth"]
    auth.pop("secretRef", None)
    auth["sealedSecret"] = old.public().seal(b"k", scope)
    source = tmp_path / f"{document['metadata']['name']}.yaml"
    source.write_text(yaml.safe_dump(document))
    before = source.read_text()
    live = {**document, "status": {"resealedSecret": offered(keys)}}
    cluster = _Cluster(live, keys.public())
    monkeypatch.setattr(kubeconfig, "load", lambda *_: "default")
    monkeypatch.setattr(kubernetes.client, "CustomObjectsApi", lambda: cluster)
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", lambda: cluster)
    code = cli.main(["reseal", "-f", str(source), "-w"])
    return code, before, source.read_text(), keys


def test_reseal_writes_an_offer_sealed_for_the_files_connection_with_the_active_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, before, after, _ = _reseal(
        tmp_path, monkeypatch, lambda keys: keys.public().seal(b"k", OWN)
    )
    assert code == 0, capsys.readouterr().err
    value = yaml.safe_load(after)["spec"]["auth"]["sealedSecret"]
    assert after != before
    assert SealedValue.parse(value).scope == OWN


@pytest.mark.parametrize(
    ("offer", "message"),
    [
        (
            lambda keys: keys.public().seal(b"k", Scope("other", "stripe", OWN.origin)),
            "is sealed for other/stripe at https://api.stripe.com, not for the file's "
            "connection (shop/stripe at https://api.stripe.com)",
        ),
        (
            lambda keys: keys.public().seal(b"k", Scope("shop", "paypal", OWN.origin)),
            "is sealed for shop/paypal",
        ),
        (
            lambda keys: keys.public().seal(b"k", Scope("shop", "stripe", "https://evil.example")),
            "is sealed for shop/stripe at https://evil.example",
        ),
        (
            lambda keys: SealingKeys.generate().public().seal(b"k", OWN),
            "is sealed with key",
        ),
        (lambda keys: "gh1.not-a-value", "is not a sealed value"),
    ],
    ids=["namespace", "name", "origin", "key", "not-a-value"],
)
def test_reseal_refuses_an_offer_for_another_connection_or_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    offer: Callable[[SealingKeys], str],
    message: str,
) -> None:
    """Whoever may write the connection's status must not choose what the file in Git holds."""
    code, before, after, _ = _reseal(tmp_path, monkeypatch, offer)
    err = capsys.readouterr().err
    assert code == 2
    assert after == before  # nothing written
    assert len(err.strip().splitlines()) == 1, err
    assert "shop/stripe: status.resealedSecret " in err
    assert message in err


TLS_OWN = Scope(OWN.namespace, OWN.name, OWN.origin, use=TLS_CLIENT_CERTIFICATE)


def _reseal_both(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    offered: Callable[[SealingKeys], str],
    *,
    applied: bool = True,
) -> tuple[int, dict[str, Any], dict[str, Any], SealingKeys]:
    """Reseals CONNECTION with its bearer secret and its client certificate sealed with an old
    key, whose status offers the secret resealed and ``offered(keys)`` for the certificate (the
    cluster's certificate another value unless ``applied``): the exit code, the file's spec
    before and after, and the rotated keys."""
    old = SealingKeys.generate()
    keys = SealingKeys.parse(old.rotated().dump())
    document = yaml.safe_load(CONNECTION.split("---")[0])
    document["spec"]["auth"] = {"type": "bearer", "sealedSecret": old.public().seal(b"k", OWN)}
    certificate = {"sealed": old.public().seal(b"chain and key", TLS_OWN)}
    document["spec"]["tls"] = {"clientCertificate": certificate}
    source = tmp_path / "stripe.yaml"
    source.write_text(yaml.safe_dump(document))
    live = yaml.safe_load(source.read_text())
    if not applied:
        live["spec"]["tls"]["clientCertificate"]["sealed"] = old.public().seal(b"new", TLS_OWN)
    offers = {"resealedSecret": keys.public().seal(b"k", OWN)}
    live["status"] = offers | {"resealedClientCertificate": offered(keys)}
    cluster = _Cluster(live, keys.public())
    monkeypatch.setattr(kubeconfig, "load", lambda *_: "default")
    monkeypatch.setattr(kubernetes.client, "CustomObjectsApi", lambda: cluster)
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", lambda: cluster)
    code = cli.main(["reseal", "-f", str(source), "-w"])
    return code, document["spec"], yaml.safe_load(source.read_text())["spec"], keys


def test_reseal_writes_a_client_certificates_offer_sealed_for_its_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sealed client certificate is offered resealed in status.resealedClientCertificate, and
    written in its own field beside the auth secret's."""
    code, before, after, keys = _reseal_both(
        tmp_path, monkeypatch, lambda keys: keys.public().seal(b"chain and key", TLS_OWN)
    )
    err = capsys.readouterr().err
    assert code == 0, err
    written = after["tls"]["clientCertificate"]["sealed"]
    assert written != before["tls"]["clientCertificate"]["sealed"]
    assert SealedValue.parse(written).scope == TLS_OWN
    assert keys.open(written, TLS_OWN) == b"chain and key"
    assert SealedValue.parse(after["auth"]["sealedSecret"]).key == keys.active
    assert "shop/stripe: resealed" in err
    assert "shop/stripe: spec.tls.clientCertificate.sealed resealed" in err


@pytest.mark.parametrize(
    ("offer", "message"),
    [
        (
            # The auth secret's use: a status must not turn the certificate into it.
            lambda keys: keys.public().seal(b"k", OWN),
            "is sealed for shop/stripe at https://api.stripe.com, not for the file's connection "
            "(shop/stripe at https://api.stripe.com (as its tlsClientCertificate))",
        ),
        (
            lambda keys: keys.public().seal(
                b"k", Scope("shop", "paypal", OWN.origin, use=TLS_CLIENT_CERTIFICATE)
            ),
            "is sealed for shop/paypal",
        ),
        (
            lambda keys: SealingKeys.generate().public().seal(b"k", TLS_OWN),
            "is sealed with key",
        ),
    ],
    ids=["use", "name", "key"],
)
def test_reseal_refuses_a_client_certificate_offer_for_another_use_connection_or_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    offer: Callable[[SealingKeys], str],
    message: str,
) -> None:
    code, before, after, _ = _reseal_both(tmp_path, monkeypatch, offer)
    err = capsys.readouterr().err
    assert code == 2
    assert after == before  # nothing written, the auth secret's offer neither
    refusal = err.strip().splitlines()[-1]  # after the auth secret's line
    assert "shop/stripe: status.resealedClientCertificate " in refusal
    assert message in refusal


def test_reseal_leaves_a_client_certificate_the_cluster_holds_another_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offer is for the cluster's value: over a file that holds another it would undo it."""
    code, before, after, _ = _reseal_both(
        tmp_path,
        monkeypatch,
        lambda keys: keys.public().seal(b"new", TLS_OWN),
        applied=False,
    )
    err = capsys.readouterr().err
    assert code == 1
    assert after["tls"] == before["tls"]
    assert after["auth"] != before["auth"]  # the auth secret, the same in both, is resealed
    assert "the cluster's tls.clientCertificate.sealed differs from the file's" in err


OAUTH2_CONNECTION = """\
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata:
  name: crm
  namespace: shop
spec:
  displayName: CRM
  baseURL: https://api.crm.example
  auth:
    type: oauth2ClientCredentials
    oauth2ClientCredentials:
      tokenURL: https://LOGIN.crm.example:443/oauth2/token  # as written
      clientId: reports
    secretRef: {name: crm, key: secret}
  linkPolicy: AdminsOnly
"""
# OAUTH2_CONNECTION's, normalised as the operator pins them.
CRM = Scope(
    "shop", "crm", "https://api.crm.example", "https://login.crm.example/oauth2/token", "reports"
)


def test_a_client_secret_is_sealed_for_the_files_token_url_and_client_id(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, cert = keys
    source = tmp_path / "crm.yaml"
    source.write_text(OAUTH2_CONNECTION)
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert)]) == 0
    out, err = capsys.readouterr()
    assert "# as written" in out
    value = yaml.safe_load(out)["spec"]["auth"]["sealedSecret"]
    assert SealedValue.parse(value).scope == CRM
    assert private.open(value, CRM) == SECRET
    assert f"sealed for {CRM} with key" in err
    assert "(token URL https://login.crm.example/oauth2/token, client reports)" in err
    # Bound to them: for another token URL or client id it does not open.
    for other in (
        Scope(CRM.namespace, CRM.name, CRM.origin, "https://evil.example/token", CRM.client_id),
        Scope(CRM.namespace, CRM.name, CRM.origin, CRM.token_url, "someone-else"),
    ):
        with pytest.raises(SealedValueProblem) as refused:
            private.open(value, other)
        assert refused.value.reason == "SealedForAnotherConnection"


AWS_CONNECTION = """\
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata:
  name: orders
  namespace: shop
spec:
  displayName: Orders
  baseURL: https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com
  auth:
    type: awsSigV4
    awsSigV4: {region: eu-west-1, service: execute-api}
    secretRef: {name: orders, key: aws-keys.json}
  linkPolicy: AdminsOnly
"""


def test_aws_keys_are_sealed_from_their_file_whole_and_the_operator_takes_them(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The JSON aws configure export-credentials writes, sealed from its file for the
    connection's namespace, name and origin, opens to what the operator checks and encrypts."""
    private, cert = keys
    source = tmp_path / "orders.yaml"
    source.write_text(AWS_CONNECTION)
    exported = tmp_path / "aws-keys.json"
    exported.write_text(
        '{\n  "Version": 1,\n  "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",\n'
        '  "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",\n'
        '  "SessionToken": "FwoGZXIvYXdzEXAMPLE",\n'
        '  "Expiration": "2026-11-29T20:00:00+00:00"\n}\n'
    )
    args = ["seal", "-f", str(source), "--from-file", str(exported), "--cert", str(cert)]
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    assert "wJalrXUtnFEMI" not in out + err
    connection = yaml.safe_load(out)
    auth = connection["spec"]["auth"]
    scope = Scope("shop", "orders", "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com")
    opened = private.open(auth["sealedSecret"], scope)
    assert opened == exported.read_bytes()
    credential = encrypt_credential(
        Auth.model_validate(auth),
        sealed_in(Auth.model_validate(auth), private, scope),
        keyring=Keyring.generate(),
        connection_uid="u",
        origin=scope.origin,
    )
    assert credential.aws is not None
    assert credential.aws.region == "eu-west-1"


CODE_CONNECTION = """\
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata:
  name: crm
  namespace: shop
spec:
  displayName: CRM, each viewer's own
  baseURL: https://api.crm.example
  auth:
    type: oauth2AuthorizationCode
    oauth2AuthorizationCode:
      authorizationURL: https://login.crm.example/oauth2/authorize
      tokenURL: https://LOGIN.crm.example:443/oauth2/token  # as written
      clientId: reports
    secretRef: {name: crm, key: secret}
  linkPolicy: AdminsOnly
"""


def test_an_authorization_code_client_secret_is_sealed_for_its_token_url_and_client_id(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, cert = keys
    source = tmp_path / "crm.yaml"
    source.write_text(CODE_CONNECTION)
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert)]) == 0
    out, err = capsys.readouterr()
    assert "# as written" in out
    auth = yaml.safe_load(out)["spec"]["auth"]
    assert "secretRef" not in auth
    assert SealedValue.parse(auth["sealedSecret"]).scope == CRM
    assert private.open(auth["sealedSecret"], CRM) == SECRET
    assert "(token URL https://login.crm.example/oauth2/token, client reports)" in err
    with pytest.raises(SealedValueProblem):
        private.open(auth["sealedSecret"], Scope("shop", "crm", CRM.origin))
    (tmp_path / "missing.yaml").write_text(CODE_CONNECTION.replace("      clientId: reports\n", ""))
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(tmp_path / "missing.yaml"), "--cert", str(cert)]) == 2
    assert "spec.auth.oauth2AuthorizationCode: tokenURL and clientId are required" in (
        capsys.readouterr().err
    )


def test_a_client_secret_is_sealed_with_flags_for_both_or_neither(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, cert = keys
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    common = [
        "seal", "--name", "crm", "--base-url", "https://api.crm.example", "-n", "shop",
        "--from-file", str(secret), "--cert", str(cert),
    ]  # fmt: skip
    flags = ["--token-url", "https://login.crm.example/oauth2/token", "--client-id", "reports"]
    assert cli.main([*common, *flags]) == 0
    assert SealedValue.parse(capsys.readouterr().out.strip()).scope == CRM


NAMED = ["--name", "c", "--base-url", "https://a.example", "-n", "x"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*NAMED, "--client-id", "r"], "give both --token-url and --client-id"),
        (
            [*NAMED, "--token-url", "https://a.example/t?x=1", "--client-id", "r"],
            "--token-url: tokenURL must not have a query or fragment",
        ),
        (["-f", "FILE", "--token-url", "https://a.example/t", "--client-id", "r"], "without -f"),
        (["-f", "MISSING"], "spec.auth.oauth2ClientCredentials: tokenURL and clientId are"),
    ],
)
def test_sealing_a_client_secret_refuses_with_one_line_naming_the_option(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    _, cert = keys
    (tmp_path / "crm.yaml").write_text(OAUTH2_CONNECTION)
    (tmp_path / "missing.yaml").write_text(
        OAUTH2_CONNECTION.replace("      clientId: reports\n", "")
    )
    paths = {"FILE": str(tmp_path / "crm.yaml"), "MISSING": str(tmp_path / "missing.yaml")}
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", *[paths.get(a, a) for a in args], "--cert", str(cert)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("offer", "message"),
    [
        (lambda keys: keys.public().seal(b"k", CRM), ""),
        (
            lambda keys: keys.public().seal(
                b"k", Scope("shop", "crm", CRM.origin, "https://evil.example/token", "reports")
            ),
            "is sealed for shop/crm at https://api.crm.example (token URL "
            "https://evil.example/token, client reports), not for the file's connection",
        ),
        (
            lambda keys: keys.public().seal(b"k", Scope("shop", "crm", CRM.origin)),
            "is sealed for shop/crm at https://api.crm.example, not for the file's connection "
            f"({CRM})",
        ),
    ],
    ids=["own", "token-url", "unbound"],
)
def test_reseal_checks_a_client_secrets_token_url_and_client_id(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    offer: Callable[[SealingKeys], str],
    message: str,
) -> None:
    document = yaml.safe_load(OAUTH2_CONNECTION)
    code, before, after, keys = _reseal(tmp_path, monkeypatch, offer, document, CRM)
    err = capsys.readouterr().err
    if not message:
        assert code == 0, err
        value = yaml.safe_load(after)["spec"]["auth"]["sealedSecret"]
        assert SealedValue.parse(value).scope == CRM
        assert SealedValue.parse(value).key == keys.active
        return
    assert code == 2
    assert after == before
    assert "shop/crm: status.resealedSecret " in err
    assert message in err


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "connections").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_examples_show_the_sealed_way_first_and_it_seals_as_shown(
    example: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = example.read_text()
    auth = yaml.safe_load(text)["spec"]["auth"]
    if auth["type"] == "none":
        return
    assert "secretRef" not in auth  # the Secret is the second way, in the comments
    assert text.index("gatehouse seal -f") < text.index("kubectl create secret")
    private, cert = keys
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(example), "-n", "shop", "--cert", str(cert)]) == 0
    sealed = yaml.safe_load(capsys.readouterr().out)
    # A client secret is sealed for the section's tokenURL and clientId too.
    endpoint: dict[str, str] = next((auth[s] for s in ENDPOINT_SECTIONS if s in auth), {})
    scope = Scope(
        "shop",
        sealed["metadata"]["name"],
        sealed["spec"]["baseURL"],
        endpoint.get("tokenURL", ""),
        endpoint.get("clientId", ""),
    )
    assert private.open(sealed["spec"]["auth"]["sealedSecret"], scope) == SECRET
