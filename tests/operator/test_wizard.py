"""The wizard's form: the spec its fields make, the YAML it shows, the secret it carries sealed."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
import yaml
from starlette.datastructures import FormData, UploadFile

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.keyring import Keyring
from gatehouse_operator.api.connection import (
    AUTH_TYPES,
    CLIENT_AUTHENTICATIONS,
    KEY_PLACEMENTS,
    LINK_POLICIES,
    MAX_INSTRUCTIONS,
    PAYLOAD_SIGNINGS,
    ExternalConnectionSpec,
    Limits,
)
from gatehouse_operator.api.stored import StoredConnection, StoredConnectionSpec
from gatehouse_operator.connections.exfiltration import link_warning
from gatehouse_operator.keys.sealed_values import Scope
from gatehouse_operator.web import session
from gatehouse_operator.web.field_problems import field_at
from gatehouse_operator.web.session import Credentials, Sessions
from gatehouse_operator.web.wizard import (
    AUTH_TYPE_TITLES,
    CLIENT_AUTHENTICATION_TITLES,
    FIELDS,
    KEY_PLACEMENT_TITLES,
    LIMIT_TITLES,
    LINK_POLICY_TITLES,
    PAYLOAD_SIGNING_TITLES,
    SHOWN_LIMITS,
    WizardForm,
    aws_secret,
    basic_secret,
    first_storage,
    name_from,
    step_of,
)


class FixedKeyring:
    def __init__(self) -> None:
        self.keyring = Keyring.generate("k1")

    def current(self) -> Keyring:
        return self.keyring


def posted(fields: dict[str, str | list[str]], stored: dict[str, Any] | None = None) -> WizardForm:
    items: list[tuple[str, str | UploadFile]] = [
        (key, value)
        for key, values in fields.items()
        for value in (values if isinstance(values, list) else [values])
    ]
    return WizardForm.posted(
        FormData(items), StoredConnectionSpec.model_validate(stored or {})
    ).named()


def stored_form(body: Mapping[str, Any]) -> WizardForm:
    """The edit form of the connection ``body``, parsed as the page reads it."""
    return WizardForm.of(StoredConnection.of(body), body["metadata"]["resourceVersion"])


BASE: dict[str, str | list[str]] = {
    "display_name": "Payments API (EU)",
    "base_url": "https://api.example.com",
    "allowed_methods": "GET",
    "link_policy": "AdminsOnly",
}


def test_a_name_is_made_from_the_display_name_unless_one_is_given() -> None:
    assert name_from("Payments API (EU)") == "payments-api-eu"
    assert name_from("  --Ünïcode & more-- ") == "n-code-more"
    assert posted(BASE).name == "payments-api-eu"
    assert posted({**BASE, "name": "pay"}).name == "pay"


@pytest.mark.parametrize(
    ("fields", "auth"),
    [
        ({"auth_type": "none"}, {"type": "none"}),
        (
            {"auth_type": "apiKey", "api_key_name": "X-Key", "api_key_in": "query"},
            {
                "type": "apiKey",
                "apiKey": {"name": "X-Key", "in": "query"},
                "secretRef": {"name": "payments-api-eu-credential", "key": "token"},
            },
        ),
        (
            {"auth_type": "bearer"},
            {"type": "bearer", "secretRef": {"name": "payments-api-eu-credential", "key": "token"}},
        ),
        (
            {"auth_type": "googleServiceAccount", "scopes": "https://a/x\n\n https://a/y \n"},
            {
                "type": "googleServiceAccount",
                "googleServiceAccount": {"scopes": ["https://a/x", "https://a/y"]},
                "secretRef": {"name": "payments-api-eu-credential", "key": "key.json"},
            },
        ),
        (
            {"auth_type": "awsSigV4", "aws_region": " eu-west-1 ", "aws_service": "execute-api"},
            {
                "type": "awsSigV4",
                "awsSigV4": {
                    "region": "eu-west-1",
                    "service": "execute-api",
                    "payloadSigning": "signed",
                },
                "secretRef": {"name": "payments-api-eu-credential", "key": "aws-keys.json"},
            },
        ),
    ],
)
def test_each_auth_type_makes_a_valid_spec(
    fields: dict[str, str | list[str]], auth: dict[str, Any]
) -> None:
    form = posted(
        {
            **BASE,
            **fields,
            "allowed_methods": ["POST", "GET", "TRACE"],
            "allowed_paths": "/v1\n\n/v2 \n",
            "link_policy": "Builders",
            "instructions": "Paginate.\r\nWith ?page=.",
        }
    )
    spec = form.spec()
    assert spec["auth"] == auth
    assert spec["allowedMethods"] == ["GET", "POST"]  # in the schema's order; TRACE is not one
    assert spec["allowedPaths"] == ["/v1", "/v2"]
    assert spec["instructions"] == "Paginate.\nWith ?page=."
    parsed = ExternalConnectionSpec.model_validate(spec)
    assert parsed.link_policy == "Builders"


def test_an_edit_keeps_what_the_wizard_does_not_show() -> None:
    stored_body: dict[str, Any] = {
        "metadata": {"name": "vendor", "resourceVersion": "41"},
        "spec": {
            "displayName": "Vendor",
            "baseURL": "https://api.example.com",
            "auth": {"type": "bearer", "secretRef": {"name": "their-secret", "key": "token"}},
            "linkPolicy": "AdminsOnly",
            "limits": {"timeoutSeconds": 30},
            "cache": {"ttlSeconds": 30, "scope": "connection"},
        },
    }
    form = stored_form(stored_body)
    assert form.editing
    spec = form.spec()
    assert spec["limits"] == {"timeoutSeconds": 30}
    assert spec["cache"] == {"ttlSeconds": 30, "scope": "connection"}
    assert spec["auth"]["secretRef"] == {"name": "their-secret", "key": "token"}
    # A service account key is another kind of secret: a Secret of the wizard's own is named.
    switched = posted(
        {
            **BASE,
            "name": "vendor",
            "resource_version": "41",
            "auth_type": "googleServiceAccount",
            "scopes": "https://a/x",
        },
        stored_body["spec"],
    )
    assert switched.spec()["auth"]["secretRef"] == {"name": "vendor-credential", "key": "key.json"}


def test_problems_name_their_field() -> None:
    form = posted({"auth_type": "apiKey", "instructions": "x" * (MAX_INSTRUCTIONS + 1)})
    problems = form.problems()
    assert problems == [
        "Display name: required",
        "Base URL: required, an origin such as https://api.example.com",
        # Every method unchecked is not a silent GET, and who may link has no preselection.
        "Allowed methods: at least one of GET, POST, PUT, PATCH, DELETE, or none for an "
        "image-only connection (Allow public images, with auth type none)",
        f"Instructions: at most {MAX_INSTRUCTIONS:,} characters ({MAX_INSTRUCTIONS + 1:,} given)",
        "Who can link it: one of AdminsOnly, Builders",
        "Parameter name: required for an API key",
    ]
    assert WizardForm().link_policy == ""
    assert posted({**BASE, "sample_label": "x" * 201}).problems() == [
        "Sample label: at most 200 characters"
    ]
    assert posted({**BASE, "auth_type": "googleServiceAccount"}).problems() == [
        "Scopes: at least one for a Google service account"
    ]


def test_the_page_offers_each_allowed_value_in_words_and_no_other() -> None:
    # The titles are keyed by the api's types (mypy checks each key); this checks none is missing.
    assert set(AUTH_TYPE_TITLES) == set(AUTH_TYPES)
    assert set(CLIENT_AUTHENTICATION_TITLES) == set(CLIENT_AUTHENTICATIONS)
    assert set(KEY_PLACEMENT_TITLES) == set(KEY_PLACEMENTS)
    assert set(LINK_POLICY_TITLES) == set(LINK_POLICIES)
    assert set(PAYLOAD_SIGNING_TITLES) == set(PAYLOAD_SIGNINGS)
    assert list(LIMIT_TITLES) == [field.alias for field in Limits.model_fields.values()]


def test_the_largest_quota_the_page_takes_is_the_schemas() -> None:
    for key, (_, most) in SHOWN_LIMITS.items():
        Limits.model_validate({key: most})
        with pytest.raises(ValueError, match="less than or equal"):
            Limits.model_validate({key: most + 1})


def test_a_value_the_page_does_not_offer_is_named_and_kept_as_sent() -> None:
    form = posted(
        {
            **BASE,
            "auth_type": "apikey",
            "api_key_in": "body",
            "client_authentication": "post",
            "code_client_authentication": "jwt",
            "credential_scope": "everyone",
            "aws_payload_signing": "chunked",
            "storage": "vault",
        }
    )
    assert form.problems() == [
        "Auth type: one of none, apiKey, bearer, basic, oauth2ClientCredentials, "
        "oauth2AuthorizationCode, googleServiceAccount, awsSigV4",
        "Keep the secret: one of sealed, secret",
        "API key: sent in: one of header, query",
        "OAuth 2.0: client authentication: one of basic, body",
        "OAuth 2.0 authorization code: client authentication: one of basic, body",
        "Whose account: one of viewer, shared",
        "AWS: payload signing: one of signed, unsigned",
    ]
    assert form.spec()["auth"] == {
        "type": "apikey",
        "secretRef": {"name": "payments-api-eu-credential", "key": "token"},
    }


def test_the_yaml_is_the_manifest_and_names_the_secret_without_its_value() -> None:
    text = posted({**BASE, "auth_type": "bearer", "draft_secret": "encrypted-blob"}).yaml("sales")
    manifest, comment = text.split("---\n")
    document = yaml.safe_load(manifest)
    assert document["metadata"] == {"name": "payments-api-eu", "namespace": "sales"}
    assert document["kind"] == "ExternalConnection"
    assert "sealed-blob" not in text
    assert "kubectl create secret generic payments-api-eu-credential -n sales" in comment
    assert all(line.startswith("#") for line in comment.splitlines())
    assert "---" not in posted(BASE).yaml("sales")


def test_a_draft_secret_decrypts_only_for_the_token_it_was_encrypted_for() -> None:
    sessions = Sessions(FixedKeyring())
    alice = Credentials("alice-token", from_proxy=False)
    bob = Credentials("bob-token", from_proxy=True)
    encrypted = sessions.encrypt_draft_secret(alice, "sk-live-123")
    assert "sk-live-123" not in encrypted
    assert sessions.decrypt_draft_secret(alice, encrypted) == "sk-live-123"
    assert sessions.decrypt_draft_secret(bob, encrypted) is None
    assert sessions.decrypt_draft_secret(alice, encrypted[:-2] + "AA") is None
    assert sessions.decrypt_draft_secret(alice, "") is None
    # Nor is a session cookie's content taken for a draft secret, or the other way round.
    cookie = sessions._encrypt({"token": "alice-token"}, 60, "gatehouse/web-session")
    assert sessions.decrypt_draft_secret(alice, cookie) is None


def test_a_draft_secret_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = Sessions(FixedKeyring())
    alice = Credentials("alice-token", from_proxy=False)
    encrypted = sessions.encrypt_draft_secret(alice, "sk-live-123")
    later = time.time() + session.DRAFT_SECRET_SECONDS + 1
    monkeypatch.setattr("gatehouse_operator.web.session.time.time", lambda: later)
    assert sessions.decrypt_draft_secret(alice, encrypted) is None


SEALED = "gh1.eyJ2IjoxfQ.AAAA"  # a value's shape: the form carries it, never opens it


def test_a_sealed_secret_goes_into_the_spec_and_the_yaml_instead_of_a_secret_ref() -> None:
    fields = {**BASE, "auth_type": "bearer", "storage": "sealed"}
    form = posted(fields)
    assert form.secret_ref() is None
    assert form.problems() == ["Secret: required, to be sealed into the connection"]
    assert "Enter the secret (Authentication) to have it sealed here." in form.yaml("sales")
    sealed = replace(form, sealed_value=SEALED)
    assert sealed.problems() == []
    assert sealed.spec()["auth"] == {"type": "bearer", "sealedSecret": SEALED}
    text = sealed.yaml("sales")
    assert "kubectl create secret" not in text
    assert "safe to commit" in text
    assert yaml.safe_load(text)["spec"]["auth"]["sealedSecret"] == SEALED
    assert posted({**BASE, "storage": "elsewhere"}).problems() == [
        "Keep the secret: one of sealed, secret"
    ]


def test_editing_a_sealed_connection_keeps_its_value_until_another_is_entered() -> None:
    spec: dict[str, Any] = {
        "displayName": "Vendor",
        "baseURL": "https://api.example.com",
        "auth": {"type": "bearer", "sealedSecret": SEALED},
        "linkPolicy": "Builders",
    }
    form = stored_form({"metadata": {"name": "vendor", "resourceVersion": "7"}, "spec": spec})
    assert form.storage == "sealed"
    assert form.spec()["auth"] == {"type": "bearer", "sealedSecret": SEALED}
    # Kept in a Secret instead: the sealed value is dropped, a Secret is named.
    moved = posted({**BASE, "auth_type": "bearer", "storage": "secret"}, spec)
    assert "sealedSecret" not in moved.spec()["auth"]
    assert moved.spec()["auth"]["secretRef"]["key"] == "token"


OAUTH2_FIELDS: dict[str, str | list[str]] = {
    "auth_type": "oauth2ClientCredentials",
    "token_url": "https://Login.Example.com:443/oauth2/token",
    "client_id": "reports-app",
    "oauth_scopes": "crm.read  crm.write\nprofile",
    "client_authentication": "body",
    "token_parameters": "audience=https://api.example.com\n\nresource = crm",
}


def test_basic_and_oauth2_make_valid_specs() -> None:
    basic = posted({**BASE, "auth_type": "basic"}).spec()
    assert basic["auth"] == {
        "type": "basic",
        "secretRef": {"name": "payments-api-eu-credential", "key": "token"},
    }
    oauth2 = posted({**BASE, **OAUTH2_FIELDS}).spec()
    assert oauth2["auth"] == {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {
            "tokenURL": "https://Login.Example.com:443/oauth2/token",
            "clientId": "reports-app",
            "scopes": ["crm.read", "crm.write", "profile"],
            "clientAuthentication": "body",
            "parameters": {"audience": "https://api.example.com", "resource": "crm"},
        },
        "secretRef": {"name": "payments-api-eu-credential", "key": "token"},
    }
    for spec in (basic, oauth2):
        ExternalConnectionSpec.model_validate(spec)
    # An edit shows them as stored.
    form = stored_form({"metadata": {"name": "crm", "resourceVersion": "3"}, "spec": oauth2})
    assert (form.token_url, form.client_id, form.client_authentication) == (
        "https://Login.Example.com:443/oauth2/token",
        "reports-app",
        "body",
    )
    assert form.spec()["auth"] == oauth2["auth"]


def test_oauth2_problems_name_their_field() -> None:
    form = posted({**BASE, "auth_type": "oauth2ClientCredentials", "token_parameters": "audience"})
    assert form.problems() == [
        "Token URL: required for OAuth 2.0, such as https://login.example.com/oauth2/token",
        "Client id: required for OAuth 2.0",
        "Extra token parameters: 'audience' is not name=value (one a line)",
    ]
    odd = posted({**BASE, **OAUTH2_FIELDS, "client_authentication": "jwt"})
    assert odd.problems() == ["OAuth 2.0: client authentication: one of basic, body"]


def test_basic_auths_secret_is_the_pair_entered() -> None:
    assert basic_secret("reports", "pa:ss word") == ("reports:pa:ss word", "")
    assert basic_secret("", "") == (None, "")
    assert basic_secret("reports", "") == (
        None,
        "User name and password: enter both for basic authentication",
    )
    assert (
        basic_secret("", "pw")[1] == "User name and password: enter both for basic authentication"
    )
    assert basic_secret("a:b", "pw") == (
        None,
        "User name: no colon or control characters (RFC 7617)",
    )


def test_headers_content_types_and_quotas_go_into_the_spec() -> None:
    form = posted(
        {
            **BASE,
            "header_name": ["Notion-Version", "", "X-GitHub-Api-Version", ""],
            "header_value": ["2022-06-28", "", "2022-11-28"],
            "allowed_content_types": "application/json\n text/* \n",
            "connectionRequestsPerMinute": "120",
            "requestsPerDay": "",
        },
        {"limits": {"timeoutSeconds": 30, "requestsPerDay": 5000}},
    )
    assert form.problems() == []
    spec = form.spec()
    assert spec["headers"] == [
        {"name": "Notion-Version", "value": "2022-06-28"},
        {"name": "X-GitHub-Api-Version", "value": "2022-11-28"},
    ]
    assert spec["allowedContentTypes"] == ["application/json", "text/*"]
    # The quotas shown replace the stored ones (empty: none); the others stay as stored.
    assert spec["limits"] == {"timeoutSeconds": 30, "connectionRequestsPerMinute": 120}
    ExternalConnectionSpec.model_validate(spec)
    stored = stored_form(
        {"metadata": {"name": "n", "resourceVersion": "1"}, "spec": {**spec, "auth": {}}}
    )
    assert stored.headers == (
        ("Notion-Version", "2022-06-28"),
        ("X-GitHub-Api-Version", "2022-11-28"),
    )
    assert stored.limit("connectionRequestsPerMinute") == "120"
    assert stored.limit("requestsPerDay") == ""


def test_each_header_rows_problem_is_its_own_in_the_schemas_words() -> None:
    form = posted(
        {
            **BASE,
            "auth_type": "apiKey",
            "api_key_name": "X-Api-Key",
            "header_name": [
                "X-Forwarded-Host",
                "Bad Name",
                "notion_version",
                "Notion-Version",
                "x.api.key",
                "",
            ],
            "header_value": ["a", "b", "1", "2", "k", "orphan"],
        }
    )
    problems = form.header_problems()
    assert problems[0].startswith("headers[].name must not be a header the proxy or HTTP itself")
    assert problems[1].startswith("headers[].name: 'Bad Name' does not match the pattern")
    assert 2 not in problems
    assert problems[3] == (
        "headers[].name must be unique, read as servers read names (X-Foo, x_foo)"
    )
    assert problems[4] == "headers[].name must not be the API key's own header (auth.apiKey.name)"
    assert problems[5] == "headers[].name: String should have at least 1 character"
    listed = form.problems()
    assert listed[0].startswith("Header 1 (X-Forwarded-Host): headers[].name must not be")
    assert "Header 6 (no name): headers[].name: String should have at least 1 character" in listed
    too_many = posted(
        {**BASE, "header_name": [f"X-H{i}" for i in range(21)], "header_value": ["v"] * 21}
    )
    assert too_many.problems() == ["Headers: at most 20 (21 given)"]
    bad = posted(
        {
            **BASE,
            "allowed_content_types": "json",
            "requestsPerDay": "0",
            "connectionRequestsPerMinute": "x",
        }
    )
    assert bad.problems() == [
        "Allowed content types: 'json' is not a media type such as application/json or text/* "
        "(one a line)",
        "Requests per minute, all apps together: a whole number from 1 to 1,000,000, or empty "
        "for none",
        "Requests per UTC day, all apps together: a whole number from 1 to 1,000,000,000, or "
        "empty for none",
    ]


STORED_OAUTH2: dict[str, Any] = {
    "displayName": "CRM",
    "baseURL": "https://api.example.com",
    "auth": {
        "type": "oauth2ClientCredentials",
        "oauth2ClientCredentials": {
            "tokenURL": "https://login.example.com/token",
            "clientId": "reports",
            "clientAuthentication": "basic",
        },
        "secretRef": {"name": "crm-credential", "key": "token"},
    },
    "linkPolicy": "AdminsOnly",
}
EDIT = {
    **BASE,
    "name": "crm",
    "resource_version": "9",
    "base_url": "https://API.example.com:443",
    "auth_type": "oauth2ClientCredentials",
    "token_url": "https://login.example.com/token",
    "client_id": "reports",
    "client_authentication": "basic",
}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"auth_type": "bearer"}, "auth type"),
        ({"base_url": "https://api.example.net"}, "base URL"),
        ({"token_url": "https://login.attacker.example/token"}, "token URL"),
        ({"token_url": "https://login.example.com/other"}, "token URL"),
        ({"client_id": "someone-else"}, "client id"),
    ],
)
def test_an_edit_keeps_the_stored_secret_only_while_what_it_was_given_for_stays(
    change: dict[str, str], named: str
) -> None:
    """The reference's rule: kept while the auth type, origin, token URL and client id are
    unchanged; otherwise entered again (a sealed one sealed again)."""
    same = posted(EDIT, STORED_OAUTH2)  # the origin written otherwise, normalised alike
    assert same.changed_for_secret() == []
    assert same.keeps_stored_secret()
    assert same.problems() == []
    form = posted({**EDIT, **change}, STORED_OAUTH2)
    assert form.changed_for_secret() == [named]
    assert not form.keeps_stored_secret()
    assert form.problems() == [
        f"Secret: enter it again: the {named} changed, and a stored secret is kept only while "
        "the auth type, base URL, token URL and client id stay as they were"
    ]
    entered = replace(form, draft_secret="encrypted-for-the-draft")
    assert entered.problems() == []
    # A sealed one likewise: not carried into the changed connection.
    sealed_stored = {**STORED_OAUTH2, "auth": {**STORED_OAUTH2["auth"], "sealedSecret": SEALED}}
    del sealed_stored["auth"]["secretRef"]
    sealed = posted({**EDIT, **change, "storage": "sealed"}, sealed_stored)
    assert "sealedSecret" not in sealed.spec()["auth"]
    assert sealed.problems()[0].startswith(f"Secret: enter it again: the {named} changed")
    kept = posted({**EDIT, "storage": "sealed"}, sealed_stored)
    assert kept.spec()["auth"]["sealedSecret"] == SEALED


def test_a_client_secret_is_sealed_for_the_token_url_and_client_id() -> None:
    form = posted({**BASE, **OAUTH2_FIELDS, "storage": "sealed"})
    assert form.seal_scope("sales") == Scope(
        "sales",
        "payments-api-eu",
        "https://api.example.com",
        "https://login.example.com/oauth2/token",
        "reports-app",
    )
    assert posted({**BASE, "auth_type": "bearer"}).seal_scope("sales") == Scope(
        "sales", "payments-api-eu", "https://api.example.com"
    )
    assert posted({**BASE, **OAUTH2_FIELDS, "token_url": "ftp://x"}).seal_scope("s") is None
    sealed = replace(form, sealed_value=SEALED)
    assert "token URL and client id: safe to commit" in sealed.yaml("sales")


AWS_FIELDS: dict[str, str | list[str]] = {
    "auth_type": "awsSigV4",
    "aws_region": "us-east-1",
    "aws_service": "s3",
    "aws_payload_signing": "unsigned",
}
ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's own example


def test_aws_signing_makes_a_valid_spec_and_an_edit_shows_it() -> None:
    form = posted({**BASE, **AWS_FIELDS})
    assert form.problems() == []
    spec = form.spec()
    assert spec["auth"]["awsSigV4"] == {
        "region": "us-east-1",
        "service": "s3",
        "payloadSigning": "unsigned",
    }
    parsed = ExternalConnectionSpec.model_validate(spec)
    assert parsed.auth.aws_sig_v4 is not None
    assert parsed.auth.aws_sig_v4.payload_signing == "unsigned"
    edit = stored_form({"metadata": {"name": "s3", "resourceVersion": "3"}, "spec": spec})
    assert (edit.aws_region, edit.aws_service, edit.aws_payload_signing) == (
        "us-east-1",
        "s3",
        "unsigned",
    )
    assert edit.spec()["auth"] == spec["auth"]
    assert "# as the JSON of aws configure export-credentials --format process," in form.yaml("s")


def test_aws_signing_problems_name_their_field() -> None:
    assert posted({**BASE, "auth_type": "awsSigV4"}).problems() == [
        "AWS: region: required for AWS Signature Version 4",
        "AWS: service: required for AWS Signature Version 4",
    ]
    odd = posted({**BASE, **AWS_FIELDS, "aws_region": "US East", "aws_service": "s3.amazonaws"})
    assert odd.problems() == [
        "AWS: region: 'US East' is not a region such as us-east-1 (lower case letters, digits "
        "and -)",
        "AWS: service: 's3.amazonaws' is not a signing name such as execute-api or s3 (lower "
        "case letters, digits and -)",
    ]


def test_aws_keys_are_the_json_of_the_parts_entered() -> None:
    """The access key id, secret access key and session token, entered apart, are stored as the
    JSON the proxy reads; a part that breaks its rule is named by its field, never shown."""
    stored, problem = aws_secret(f" {ACCESS_KEY_ID} ", SECRET_ACCESS_KEY, "")
    assert problem == ""
    assert stored is not None
    assert AwsKeys.parse(stored) == AwsKeys(ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    stored, _ = aws_secret(ACCESS_KEY_ID.replace("AKIA", "ASIA"), SECRET_ACCESS_KEY, "FwoGZX+/=")
    assert stored is not None
    assert AwsKeys.parse(stored).session_token == "FwoGZX+/="
    assert aws_secret("", "", "") == (None, "")
    both = (
        "Access key id and secret access key: enter both for AWS Signature Version 4 (the "
        "session token too, for temporary keys)"
    )
    assert aws_secret(ACCESS_KEY_ID, "", "") == (None, both)
    assert aws_secret("", SECRET_ACCESS_KEY, "FwoGZX") == (None, both)
    refused = {
        ("akia-lower-case-1", SECRET_ACCESS_KEY, ""): "Access key id must be 16 to 128",
        (ACCESS_KEY_ID, "wJalrXUtnFEMI K7MDENG", ""): "Secret access key must be at most 256",
        (ACCESS_KEY_ID, "x" * 257, ""): "Secret access key must be at most 256",
        (ACCESS_KEY_ID, SECRET_ACCESS_KEY, "Fwo GZX"): "Session token must be at most 8,192",
    }
    for parts, start in refused.items():
        stored, problem = aws_secret(*parts)
        assert stored is None
        assert problem.startswith(start), problem
        assert not any(part.strip() and part.strip() in problem for part in parts)


def test_the_basic_yaml_says_how_the_secret_holds_the_pair() -> None:
    text = posted({**BASE, "auth_type": "basic"}).yaml("sales")
    assert "# as user:password (no colon in the user name)," in text


@pytest.mark.parametrize(
    ("methods", "stronger"),
    [(["GET"], False), (["GET", "DELETE", "POST"], True), (["PATCH"], True)],
)
def test_the_exfiltration_warning_is_stronger_with_write_methods(
    methods: list[str], stronger: bool
) -> None:
    text = link_warning("https://api.example.com", methods)
    assert text.startswith(
        "Apps linked to this connection can send any data they can query to "
        "https://api.example.com."
    )
    assert ("create, change or delete data there" in text) is stronger
    if methods == ["GET", "DELETE", "POST"]:
        assert "It allows POST, DELETE:" in text


def test_an_image_only_connection_has_no_methods_and_no_credential() -> None:
    images = posted(
        {**BASE, "allowed_methods": [], "allow_public_images": "on", "auth_type": "none"}
    )
    assert images.problems() == []
    spec = images.spec()
    assert spec["allowedMethods"] == []
    assert ExternalConnectionSpec.model_validate(spec).allow_public_images
    # An edit keeps it image-only: no methods stay none, not a silent GET.
    stored = {"metadata": {"name": "tiles", "resourceVersion": "3"}, "spec": spec}
    assert stored_form(stored).allowed_methods == ()
    # Public images go with auth none only: a browser loads them without the credential.
    keyed = posted(
        {**BASE, "allow_public_images": "on", "auth_type": "bearer", "draft_secret": "t"}
    )
    assert keyed.problems() == [
        "Allow public images: allowPublicImages is allowed only with auth.type none: browsers "
        "load the images straight from the origin, without the connection's credential"
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"allowPublicImages": True, "auth": {"type": "bearer", "sealedSecret": "gh1.a.b"}},
            "allowPublicImages is allowed only with auth.type none",
        ),
        ({"allowedMethods": []}, "allowedMethods must name at least one method, unless"),
    ],
)
def test_the_model_holds_the_image_only_rules(spec: dict[str, Any], message: str) -> None:
    base = {
        "displayName": "Tiles",
        "baseURL": "https://tiles.example.com",
        "linkPolicy": "Builders",
        "auth": {"type": "none"},
    }
    with pytest.raises(ValueError, match=re.escape(message)):
        ExternalConnectionSpec.model_validate({**base, **spec})


def test_a_sample_is_asked_for_without_a_label() -> None:
    unlabelled = posted({**BASE, "save_sample": "on"})
    assert unlabelled.save_sample
    assert unlabelled.sample_label == ""
    assert unlabelled.problems() == []
    # A label alone still asks for it.
    assert posted({**BASE, "sample_label": "Items"}).save_sample
    assert not posted(BASE).save_sample


def test_a_new_connection_is_sealed_by_default_where_the_installation_can_seal() -> None:
    assert first_storage(read_only=False, can_seal=True) == "sealed"
    assert first_storage(read_only=True, can_seal=True) == "sealed"
    # No sealing keys: a Secret, the only way that works there.
    assert first_storage(read_only=False, can_seal=False) == "secret"


def test_a_secret_entered_is_not_asked_for_again_while_its_base_url_is_wrong() -> None:
    # Sealed by default: the secret waits, carried encrypted for the session, until the base URL
    # it is sealed for is valid; the base URL's own rule is the problem to show.
    form = replace(
        posted({**BASE, "base_url": "https://user:pw@example.com", "auth_type": "bearer"}),
        storage="sealed",
        draft_secret="carried",
    )
    assert "Secret: required, to be sealed into the connection" not in form.problems()
    assert (
        "Secret: required, to be sealed into the connection"
        in replace(form, draft_secret="").problems()
    )


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (
            {"base_url": "https://exa_mple.com"},
            "Base URL: baseURL host 'exa_mple.com' is not a valid host name",
        ),
        ({"base_url": "https://0x7f.1"}, "Base URL: baseURL host '0x7f.1' looks like a numeric"),
        (
            {**OAUTH2_FIELDS, "token_url": "https://log_in.example.com/token"},
            "Token URL: tokenURL host 'log_in.example.com' is not a valid host name",
        ),
        ({"display_name": "数据"}, "Resource name: required, to seal the secret for it"),
    ],
)
def test_a_secret_that_cannot_be_sealed_names_the_field_that_keeps_it_from_it(
    fields: dict[str, str | list[str]], said: str
) -> None:
    # A URL the model and the schema take but the operator's origin rules do not: the secret
    # cannot be sealed for it, so the page names that field, not the schema's rule that an auth
    # type needs a secretRef or a sealedSecret (the dry run's words, though a secret was typed).
    form = replace(
        posted({**BASE, "auth_type": "bearer", **fields}),
        storage="sealed",
        draft_secret="carried",
    )
    assert form.seal_scope("sales") is None
    assert [line[: len(said)] for line in form.problems()] == [said]
    # Kept in a Secret, the secret is not sealed: the operator's Accepted condition names it.
    assert replace(form, storage="secret").problems() == []


@pytest.mark.parametrize("typed", ["²", "①", "٣", "+5"])
def test_a_quota_in_other_digits_is_named_not_an_error(typed: str) -> None:
    form = posted({**BASE, "auth_type": "none", "requestsPerDay": typed})
    title, most = SHOWN_LIMITS["requestsPerDay"]
    assert f"{title}: a whole number from 1 to {most:,}, or empty for none" in form.problems()


def test_the_page_names_a_bad_url_or_path_at_its_field_before_the_dry_run() -> None:
    """The model's rules, in its words under the page's titles (issue 48 item 5; before, only
    the API server's dry run at Review named them)."""
    assert posted({**BASE, "base_url": "https://user:pw@api.example.com"}).problems() == [
        "Base URL: baseURL must not contain credentials; reference a Secret in auth.secretRef"
    ]
    assert posted(
        {**BASE, **OAUTH2_FIELDS, "token_url": "ftp://login.example.com/token"}
    ).problems() == [
        "Token URL: auth.oauth2ClientCredentials.tokenURL must be an https URL (http only where "
        "the installation allows it)"
    ]
    assert posted({**BASE, "allowed_paths": "/v1\nv2"}).problems() == [
        "Allowed paths: 'v2' is not a path prefix such as /v1/users (one a line)"
    ]
    keyed = posted({**BASE, "auth_type": "apiKey", "api_key_name": "Host"})
    assert [line[:51] for line in keyed.problems()] == [
        "Parameter name: auth.apiKey.name must not be a head"
    ]


def test_each_title_is_a_field_of_the_model_or_the_pages_own() -> None:
    own = {row.path for row in FIELDS if field_at(ExternalConnectionSpec, row.path) is None}
    assert own == {"sampleLabel", "storage", "secret", "metadata.name"}


CODE_FIELDS: dict[str, str | list[str]] = {
    "auth_type": "oauth2AuthorizationCode",
    "code_authorization_url": "https://accounts.google.com/o/oauth2/v2/auth",
    "code_token_url": "https://OAuth2.googleapis.com:443/token",
    "code_client_id": "sheets-app",
    "code_scopes": "https://www.googleapis.com/auth/spreadsheets.readonly\nopenid",
    "code_parameters": "access_type=offline\n\nprompt = consent",
    "code_client_authentication": "body",
    "code_revocation_url": "https://oauth2.googleapis.com/revoke",
    "credential_scope": "shared",
}


def test_the_authorization_code_section_makes_a_valid_spec_and_an_edit_shows_it() -> None:
    spec = posted({**BASE, **CODE_FIELDS}).spec()
    assert spec["auth"] == {
        "type": "oauth2AuthorizationCode",
        "oauth2AuthorizationCode": {
            "authorizationURL": "https://accounts.google.com/o/oauth2/v2/auth",
            "tokenURL": "https://OAuth2.googleapis.com:443/token",
            "clientId": "sheets-app",
            "scopes": ["https://www.googleapis.com/auth/spreadsheets.readonly", "openid"],
            "authorizationParameters": {"access_type": "offline", "prompt": "consent"},
            "clientAuthentication": "body",
            "revocationURL": "https://oauth2.googleapis.com/revoke",
            "credentialScope": "shared",
        },
        "secretRef": {"name": "payments-api-eu-credential", "key": "token"},
    }
    ExternalConnectionSpec.model_validate(spec)
    form = stored_form({"metadata": {"name": "sheets", "resourceVersion": "3"}, "spec": spec})
    assert (form.code_token_url, form.code_client_id, form.credential_scope) == (
        "https://OAuth2.googleapis.com:443/token",
        "sheets-app",
        "shared",
    )
    assert form.spec()["auth"] == spec["auth"]
    # Each viewer's own account unless the page is told otherwise; no revocation URL: none.
    plain = posted({**BASE, **CODE_FIELDS, "credential_scope": "", "code_revocation_url": ""})
    section = plain.spec()["auth"]["oauth2AuthorizationCode"]
    assert "revocationURL" not in section
    assert posted({**BASE, "auth_type": "oauth2AuthorizationCode"}).credential_scope == "viewer"


def test_authorization_code_problems_name_their_field() -> None:
    form = posted({**BASE, "auth_type": "oauth2AuthorizationCode", "code_parameters": "prompt"})
    assert form.problems() == [
        "Authorization URL: required for OAuth 2.0 authorization code, such as "
        "https://login.example.com/oauth2/authorize",
        "Token URL: required for OAuth 2.0 authorization code, such as "
        "https://login.example.com/oauth2/token",
        "Client id: required for OAuth 2.0 authorization code",
        "Extra authorization parameters: 'prompt' is not name=value (one a line)",
    ]
    reserved = posted({**BASE, **CODE_FIELDS, "code_parameters": "redirect_uri=https://x"})
    assert [line[:80] for line in reserved.problems()] == [
        "Extra authorization parameters: auth.oauth2AuthorizationCode.authorizationParame"
    ]
    assert "must not set a parameter OAuth 2.0 or PKCE sets itself" in reserved.problems()[0]
    http = posted({**BASE, **CODE_FIELDS, "code_authorization_url": "ftp://a.example/auth"})
    assert http.problems() == [
        "Authorization URL: auth.oauth2AuthorizationCode.authorizationURL must be an https URL "
        "(http only where the installation allows it)"
    ]


CODE_EDIT = {**EDIT, **CODE_FIELDS, "code_token_url": "https://login.example.com/token"}
STORED_CODE = {
    **STORED_OAUTH2,
    "auth": {
        "type": "oauth2AuthorizationCode",
        "oauth2AuthorizationCode": {
            "authorizationURL": "https://accounts.google.com/o/oauth2/v2/auth",
            "tokenURL": "https://login.example.com/token",
            "clientId": "sheets-app",
        },
        "secretRef": {"name": "crm-credential", "key": "token"},
    },
}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"code_token_url": "https://login.attacker.example/token"}, "token URL"),
        ({"code_client_id": "someone-else"}, "client id"),
    ],
)
def test_an_authorization_code_edit_keeps_the_client_secret_only_for_its_token_url_and_client(
    change: dict[str, str], named: str
) -> None:
    same = posted(CODE_EDIT, STORED_CODE)
    assert same.changed_for_secret() == []
    assert same.keeps_stored_secret()
    form = posted({**CODE_EDIT, **change}, STORED_CODE)
    assert form.changed_for_secret() == [named]
    assert not form.keeps_stored_secret()
    # The client credentials section's fields are another kind's: they change nothing here.
    assert posted(
        {**CODE_EDIT, "token_url": "https://x.example/t"}, STORED_CODE
    ).keeps_stored_secret()


def test_an_authorization_code_client_secret_is_sealed_for_its_token_url_and_client_id() -> None:
    form = posted({**BASE, **CODE_FIELDS, "storage": "sealed"})
    assert form.seal_scope("sales") == Scope(
        "sales",
        "payments-api-eu",
        "https://api.example.com",
        "https://oauth2.googleapis.com/token",
        "sheets-app",
    )
    unsealable = replace(
        posted({**BASE, **CODE_FIELDS, "code_client_id": ""}),
        storage="sealed",
        draft_secret="carried",
    )
    assert unsealable.seal_scope("sales") is None
    assert unsealable.unsealable() == (
        "auth.oauth2AuthorizationCode.clientId",
        "required for OAuth 2.0",
    )


def test_every_field_is_shown_on_a_step_that_checks_it_when_left() -> None:
    """Next checks the step's own fields (issue 50 item 3): each of the page's fields has one."""
    assert {row.path: step_of(row.path) for row in FIELDS if step_of(row.path) == "review"} == {}
    assert step_of("auth.oauth2ClientCredentials.tokenURL") == "auth"
    assert step_of("limits.requestsPerDay") == "access"


def test_a_steps_problems_are_its_own_fields_by_the_models_rules() -> None:
    form = posted(
        {
            **BASE,
            "base_url": "https://user:pw@api.example.com",
            "auth_type": "apiKey",
            "link_policy": "",
            "requestsPerDay": "many",
        }
    )
    found = form.field_problems()

    def of(step: str) -> list[str]:
        return found.only(lambda path: step_of(path) == step).listed()

    assert of("api") == [
        "Base URL: baseURL must not contain credentials; reference a Secret in auth.secretRef"
    ]
    assert of("auth") == ["Parameter name: required for an API key"]
    title, most = SHOWN_LIMITS["requestsPerDay"]
    assert of("access") == [
        f"{title}: a whole number from 1 to {most:,}, or empty for none",
        "Who can link it: one of AdminsOnly, Builders",
    ]
    assert of("test") == []
    # Every problem is some step's.
    assert sorted(of("api") + of("auth") + of("access")) == sorted(found.listed())


def test_cache_answers_is_checked_by_the_models_own_rules_and_an_edit_keeps_the_rest() -> None:
    cached = posted({**BASE, "auth_type": "none", "cache": "on", "cache_ttl": "30"})
    assert cached.spec()["cache"] == {"ttlSeconds": 30}
    assert cached.problems() == []
    assert ExternalConnectionSpec.model_validate(cached.spec()).cache is not None
    assert "cache" not in posted({**BASE, "auth_type": "none", "cache_ttl": "30"}).spec()
    assert posted({**BASE, "auth_type": "none", "cache": "on", "cache_ttl": "0"}).problems() == [
        "Cache answers: fresh for (seconds): a whole number from 1 to 604,800"
    ]
    writes = posted(
        {**BASE, "auth_type": "none", "allowed_methods": "POST", "cache": "on", "cache_ttl": "9999"}
    )
    assert writes.problems() == [
        "Cache answers: cache.ttlSeconds must be at most cache.maxTTLSeconds",
        "Cache answers: cache needs GET in allowedMethods: only GET answers are cached, "
        "and this connection allows no GET",
    ]
    assert step_of("cache.ttlSeconds") == "access"
    stored = {
        "displayName": "Payments API (EU)",
        "baseURL": "https://api.example.com",
        "auth": {"type": "none"},
        "linkPolicy": "AdminsOnly",
        "cache": {"ttlSeconds": 60, "maxTTLSeconds": 600, "scope": "connection"},
    }
    edited = posted({**BASE, "auth_type": "none", "cache": "on", "cache_ttl": "120"}, stored)
    assert edited.spec()["cache"] == {
        "ttlSeconds": 120,
        "maxTTLSeconds": 600,
        "scope": "connection",
    }
    assert "cache" not in posted({**BASE, "auth_type": "none"}, stored).spec()  # unchecked: off
