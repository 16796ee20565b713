"""Secrets become credentials encrypted with the keyring, or a reason that names the rule and
never the value."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import Credential
from gatehouse_dev.service_accounts import service_account_key
from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.connection import Auth
from gatehouse_operator.keys.credentials import (
    CredentialProblem,
    check_role,
    encrypt_credential,
    secret_in,
)
from gatehouse_operator.settings import AwsRoles

ORIGIN = "https://api.example.com"


def _auth(**fields: Any) -> Auth:
    return Auth.model_validate(fields)


def encrypt(auth: Auth, data: dict[str, bytes] | None, **where: Any) -> Credential:
    """A Secret's data encrypted as the controller does it: the value found, then encrypted."""
    return encrypt_credential(auth, secret_in(auth, data), **where)


API_KEY = _auth(
    type="apiKey",
    apiKey={"name": "X-API-Key", "in": "header"},
    secretRef={"name": "vendor", "key": "token"},
)
GOOGLE = _auth(
    type="googleServiceAccount",
    googleServiceAccount={"scopes": ["https://www.googleapis.com/auth/bigquery.readonly"]},
    secretRef={"name": "sa", "key": "key.json"},
)


def test_api_key_is_encrypted_for_its_connection_and_placement() -> None:
    keyring = Keyring.generate()
    credential = encrypt(
        API_KEY, {"token": b"sk_live_42\n"}, keyring=keyring, connection_uid="u1", origin=ORIGIN
    )
    assert credential.parameter == "X-API-Key"
    assert credential.location == "header"
    assert credential.encrypted is not None
    assert keyring.decrypt(credential.encrypted, credential.context("u1", ORIGIN)) == b"sk_live_42"


@pytest.mark.parametrize(
    ("data", "reason", "message"),
    [
        (None, "SecretNotFound", "Secret 'vendor' does not exist"),
        ({"other": b"x"}, "SecretKeyNotFound", "has no key 'token'"),
        ({"token": b"   "}, "InvalidSecretValue", "is empty"),
        ({"token": b"sk_live\r\nX-Evil: 1"}, "InvalidSecretValue", "line breaks"),
        ({"token": b"\xff\xfe"}, "InvalidSecretValue", "not UTF-8"),
    ],
)
def test_unusable_api_key_secrets(data: dict[str, bytes] | None, reason: str, message: str) -> None:
    with pytest.raises(CredentialProblem) as caught:
        encrypt(API_KEY, data, keyring=Keyring.generate(), connection_uid="u", origin=ORIGIN)
    assert caught.value.reason == reason
    assert message in caught.value.message
    assert "sk_live" not in caught.value.message


def test_google_key_file_is_validated_and_encrypted_whole() -> None:
    key_file, _ = service_account_key()
    keyring = Keyring.generate()
    credential = encrypt(
        GOOGLE, {"key.json": key_file}, keyring=keyring, connection_uid="u", origin=ORIGIN
    )
    assert credential.scopes == ("https://www.googleapis.com/auth/bigquery.readonly",)
    assert credential.encrypted is not None
    assert keyring.decrypt(credential.encrypted, credential.context("u", ORIGIN)) == key_file


def _key_with(**changes: Any) -> bytes:
    document = json.loads(service_account_key()[0])
    document.update(changes)
    return json.dumps({k: v for k, v in document.items() if v is not None}).encode()


@pytest.mark.parametrize(
    ("key_file", "message"),
    [
        (b"not json", "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (_key_with(type="authorized_user"), '"type" must be "service_account"'),
        (_key_with(client_email=None), '"client_email" is missing'),
        (
            _key_with(private_key="-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
            '"private_key" is not a PEM RSA private key',
        ),
    ],
)
def test_bad_service_account_keys_are_named_without_echoing(key_file: bytes, message: str) -> None:
    problem = _refused_key_file(key_file)
    assert problem.reason == "InvalidServiceAccountKey"
    assert message in problem.message
    assert "BEGIN" not in problem.message


def _refused_key_file(key_file: bytes) -> CredentialProblem:
    with pytest.raises(CredentialProblem) as caught:
        encrypt(
            GOOGLE,
            {"key.json": key_file},
            keyring=Keyring.generate(),
            connection_uid="u",
            origin=ORIGIN,
        )
    return caught.value


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _inconsistent_key() -> str:
    """An RSA key whose private exponents were tampered with: it parses, but cannot sign."""
    numbers = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_numbers()
    tampered = rsa.RSAPrivateNumbers(
        numbers.p,
        numbers.q,
        numbers.d + 2,
        numbers.dmp1 + 2,
        numbers.dmq1,
        numbers.iqmp,
        numbers.public_numbers,
    )
    return _pem(tampered.private_key(unsafe_skip_rsa_key_validation=True))


@pytest.mark.parametrize(
    ("key_file", "message"),
    [
        # 16,384 bits cost 35 s of GIL-holding CPU to check; the size is refused before that.
        (
            _key_with(private_key=_pem(rsa.generate_private_key(65537, key_size=4160))),
            "a 4,160-bit RSA key; at most 4,096 bits are allowed",
        ),
        (_key_with(padding="x" * 20_000), "a key file may have at most 16,384"),
        (_key_with(private_key=_inconsistent_key()), "not a consistent RSA key"),
    ],
)
def test_service_account_keys_that_would_cost_every_tenant_are_refused(
    key_file: bytes, message: str
) -> None:
    problem = _refused_key_file(key_file)
    assert problem.reason == "InvalidServiceAccountKey"
    assert message in problem.message


def test_an_api_key_longer_than_4_kib_is_refused() -> None:
    with pytest.raises(CredentialProblem) as caught:
        encrypt(
            API_KEY,
            {"token": b"k" * 300_000},
            keyring=Keyring.generate(),
            connection_uid="u",
            origin=ORIGIN,
        )
    assert caught.value.reason == "SecretTooLong"
    assert caught.value.message == (
        "key 'token' of Secret 'vendor' is 300,000 bytes; at most 4,096 are allowed"
    )


AWS = _auth(
    type="awsSigV4",
    awsSigV4={"region": "eu-west-1", "service": "execute-api"},
    secretRef={"name": "aws", "key": "aws-keys.json"},
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's own example


def _aws_keys(**changes: Any) -> bytes:
    keys = {
        "Version": 1,
        "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",
        "SecretAccessKey": AWS_SECRET,
        "SessionToken": "FwoGZXIvYXdzEXAMPLE+/=",
        "Expiration": "2026-11-29T20:00:00+00:00",
    }
    keys.update(changes)
    return json.dumps({k: v for k, v in keys.items() if v is not None}).encode()


def test_aws_keys_are_checked_and_encrypted_as_the_proxy_reads_them() -> None:
    keyring = Keyring.generate()
    credential = encrypt(
        AWS, {"aws-keys.json": _aws_keys()}, keyring=keyring, connection_uid="u", origin=ORIGIN
    )
    assert credential.aws is not None
    assert (credential.aws.region, credential.aws.service, credential.aws.payload) == (
        "eu-west-1",
        "execute-api",
        "signed",
    )
    assert credential.encrypted is not None
    stored = keyring.decrypt(credential.encrypted, credential.context("u", ORIGIN)).decode()
    # What AWS's tools add and no request needs (Expiration) is not kept.
    assert json.loads(stored) == {
        "Version": 1,
        "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",
        "SecretAccessKey": AWS_SECRET,
        "SessionToken": "FwoGZXIvYXdzEXAMPLE+/=",
    }


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (b"AKIAIOSFODNN7EXAMPLE:" + AWS_SECRET.encode(), ": is not JSON: AWS keys are stored as"),
        (b'["AKIAIOSFODNN7EXAMPLE"]', "is not a JSON object with AccessKeyId and SecretAccessKey"),
        (b"\xff" + _aws_keys(), "is not UTF-8 text"),
        (_aws_keys(AccessKeyId=None), '"AccessKeyId" must be 16 to 128 upper case letters'),
        (_aws_keys(AccessKeyId="asiaiosfodnn7example"), '"AccessKeyId" must be 16 to 128'),
        (_aws_keys(AccessKeyId=12), '"AccessKeyId" must be a string'),
        (_aws_keys(SecretAccessKey=None), '"SecretAccessKey" is missing'),
        (_aws_keys(SecretAccessKey=AWS_SECRET + " x"), '"SecretAccessKey" must be at most 256'),
        (_aws_keys(SecretAccessKey=AWS_SECRET * 7), '"SecretAccessKey" must be at most 256'),
        (_aws_keys(SessionToken="FwoG\nZX"), '"SessionToken" must be at most 8,192 printable'),
        (_aws_keys(SessionToken="F" * 8193), '"SessionToken" must be at most 8,192 printable'),
        (_aws_keys(Padding="x" * 17_000), "AWS keys' JSON may have at most 16,384"),
    ],
)
def test_bad_aws_keys_are_named_without_echoing(keys: bytes, message: str) -> None:
    with pytest.raises(CredentialProblem) as caught:
        encrypt(
            AWS,
            {"aws-keys.json": keys},
            keyring=Keyring.generate(),
            connection_uid="u",
            origin=ORIGIN,
        )
    assert caught.value.reason == "InvalidAwsKeys"
    assert caught.value.message.startswith("key 'aws-keys.json' of Secret 'aws'")
    assert message in caught.value.message
    for value in ("IOSFODNN7", "wJalrXUtnFEMI", "FwoG", "asiaiosfodnn"):
        assert value not in caught.value.message


def test_a_role_by_web_identity_needs_a_regions_name_where_sts_is_asked() -> None:
    # STS's URL names the connection's region (sts.{region}.amazonaws.com): "s3-us-west-2" would
    # name a bucket's endpoint, and the proxies' token would go there.
    role = "arn:aws:iam::111122223333:role/reports"
    roles = AwsRoles({"shop": (role,)})
    section = {"service": "execute-api", "webIdentity": {"roleArn": role}}
    check_role(_auth(type="awsSigV4", awsSigV4={"region": "eu-west-1", **section}), "shop", roles)
    with pytest.raises(CredentialProblem) as refused:
        check_role(
            _auth(type="awsSigV4", awsSigV4={"region": "s3-us-west-2", **section}), "shop", roles
        )
    assert refused.value.reason == Reason.INVALID_SPEC
    assert refused.value.message.startswith("auth.awsSigV4.region: ")
