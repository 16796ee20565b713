"""Secrets become sealed credentials, or a reason that names the rule and never the value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gatehouse_dev.service_accounts import service_account_key
from gatehouse_operator.api.connection import Auth
from gatehouse_operator.credentials import CredentialProblem, seal_credential
from gatehouse_proxy.sealing import Keyring

ORIGIN = "https://api.example.com"


def _auth(**fields: Any) -> Auth:
    return Auth.model_validate(fields)


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


def test_api_key_is_sealed_for_its_connection_and_placement() -> None:
    keyring = Keyring.generate()
    credential = seal_credential(
        API_KEY, {"token": b"sk_live_42\n"}, keyring=keyring, connection_uid="u1", origin=ORIGIN
    )
    assert credential.parameter == "X-API-Key"
    assert credential.location == "header"
    assert credential.sealed is not None
    assert keyring.open(credential.sealed, credential.context("u1", ORIGIN)) == b"sk_live_42"


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
        seal_credential(
            API_KEY, data, keyring=Keyring.generate(), connection_uid="u", origin=ORIGIN
        )
    assert caught.value.reason == reason
    assert message in caught.value.message
    assert "sk_live" not in caught.value.message


def test_google_key_file_is_validated_and_sealed_whole() -> None:
    key_file, _ = service_account_key()
    keyring = Keyring.generate()
    credential = seal_credential(
        GOOGLE, {"key.json": key_file}, keyring=keyring, connection_uid="u", origin=ORIGIN
    )
    assert credential.scopes == ("https://www.googleapis.com/auth/bigquery.readonly",)
    assert credential.sealed is not None
    assert keyring.open(credential.sealed, credential.context("u", ORIGIN)) == key_file


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
    with pytest.raises(CredentialProblem) as caught:
        seal_credential(
            GOOGLE,
            {"key.json": key_file},
            keyring=Keyring.generate(),
            connection_uid="u",
            origin=ORIGIN,
        )
    assert caught.value.reason == "InvalidServiceAccountKey"
    assert message in caught.value.message
    assert "BEGIN" not in caught.value.message
