"""The wizard's form: the spec its fields make, the YAML it shows, the secret it carries sealed."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
import yaml
from starlette.datastructures import FormData, UploadFile

from gatehouse_contract.sealing import Keyring
from gatehouse_operator.api.connection import MAX_INSTRUCTIONS, ExternalConnectionSpec
from gatehouse_operator.web import session
from gatehouse_operator.web.session import Credentials, Sessions
from gatehouse_operator.web.wizard import WizardForm, name_from


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
    return WizardForm.posted(FormData(items), stored or {}).named()


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
            "allow_public_images": "on",
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
    assert parsed.allow_public_images


def test_an_edit_keeps_what_the_wizard_does_not_show() -> None:
    stored_body: dict[str, Any] = {
        "metadata": {"name": "vendor", "resourceVersion": "41"},
        "spec": {
            "displayName": "Vendor",
            "baseURL": "https://api.example.com",
            "auth": {"type": "bearer", "secretRef": {"name": "their-secret", "key": "token"}},
            "linkPolicy": "AdminsOnly",
            "limits": {"timeoutSeconds": 30},
        },
    }
    form = WizardForm.of(stored_body)
    assert form.editing
    spec = form.spec()
    assert spec["limits"] == {"timeoutSeconds": 30}
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
        "Allowed methods: at least one of GET, POST, PUT, PATCH, DELETE",
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


def test_the_yaml_is_the_manifest_and_names_the_secret_without_its_value() -> None:
    text = posted({**BASE, "auth_type": "bearer", "draft_secret": "sealed-blob"}).yaml("sales")
    manifest, comment = text.split("---\n")
    document = yaml.safe_load(manifest)
    assert document["metadata"] == {"name": "payments-api-eu", "namespace": "sales"}
    assert document["kind"] == "ExternalConnection"
    assert "sealed-blob" not in text
    assert "kubectl create secret generic payments-api-eu-credential -n sales" in comment
    assert all(line.startswith("#") for line in comment.splitlines())
    assert "---" not in posted(BASE).yaml("sales")


def test_a_draft_secret_opens_only_for_the_token_it_was_sealed_for() -> None:
    sessions = Sessions(FixedKeyring())
    alice = Credentials("alice-token", from_proxy=False)
    bob = Credentials("bob-token", from_proxy=True)
    sealed = sessions.seal_draft_secret(alice, "sk-live-123")
    assert "sk-live-123" not in sealed
    assert sessions.open_draft_secret(alice, sealed) == "sk-live-123"
    assert sessions.open_draft_secret(bob, sealed) is None
    assert sessions.open_draft_secret(alice, sealed[:-2] + "AA") is None
    assert sessions.open_draft_secret(alice, "") is None
    # Nor is a session cookie's content taken for a draft secret, or the other way round.
    cookie = sessions._seal({"token": "alice-token"}, 60, "gatehouse/web-session")
    assert sessions.open_draft_secret(alice, cookie) is None


def test_a_draft_secret_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = Sessions(FixedKeyring())
    alice = Credentials("alice-token", from_proxy=False)
    sealed = sessions.seal_draft_secret(alice, "sk-live-123")
    later = time.time() + session.DRAFT_SECRET_SECONDS + 1
    monkeypatch.setattr("gatehouse_operator.web.session.time.time", lambda: later)
    assert sessions.open_draft_secret(alice, sealed) is None


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
        "Keep the secret: one of secret, sealed"
    ]


def test_editing_a_sealed_connection_keeps_its_value_until_another_is_entered() -> None:
    spec: dict[str, Any] = {
        "displayName": "Vendor",
        "baseURL": "https://api.example.com",
        "auth": {"type": "bearer", "sealedSecret": SEALED},
        "linkPolicy": "Builders",
    }
    form = WizardForm.of({"metadata": {"name": "vendor", "resourceVersion": "7"}, "spec": spec})
    assert form.storage == "sealed"
    assert form.spec()["auth"] == {"type": "bearer", "sealedSecret": SEALED}
    # Kept in a Secret instead: the sealed value is dropped, a Secret is named.
    moved = posted({**BASE, "auth_type": "bearer", "storage": "secret"}, spec)
    assert "sealedSecret" not in moved.spec()["auth"]
    assert moved.spec()["auth"]["secretRef"]["key"] == "token"
