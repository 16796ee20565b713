"""ID tokens (access.id_tokens), signed by the dev issuer's key: each check refuses a token that
breaks it, and the user is named as kube-apiserver's --oidc-* flags name it. The whole flow, in
Chromium against the dev issuer on 127.0.0.1, is tests/e2e/test_sign_in_browser.py."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from gatehouse_dev.oidc_issuer import Issuer
from gatehouse_operator.access.id_tokens import IdTokenRefused, user_of, verified_claims
from gatehouse_operator.settings import OidcSettings

ISSUER = "https://login.example.com"
SETTINGS = OidcSettings(issuer=ISSUER, client_id="gatehouse", groups_claim="groups")
ISSUED = Issuer(ISSUER, "gatehouse", "secret")
JWKS = {"keys": [ISSUED.jwk()]}


def claims(**changed: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": ISSUER,
        "sub": "alice",
        "aud": "gatehouse",
        "iat": now,
        "exp": now + 300,
        "nonce": "n-1",
        "email": "alice@example.com",
        "groups": ["team-a"],
        **changed,
    }


def test_a_good_token_names_the_user_as_the_api_server_would() -> None:
    found = verified_claims(ISSUED.id_token(claims()), JWKS, SETTINGS, "n-1")
    user = user_of(found, SETTINGS)
    assert user.name == f"{ISSUER}#alice"
    assert user.groups == ("team-a", "system:authenticated")
    by_email = OidcSettings(issuer=ISSUER, client_id="gatehouse", username_claim="email")
    assert user_of(found, by_email).name == "alice@example.com"
    prefixed = OidcSettings(
        issuer=ISSUER,
        client_id="gatehouse",
        username_prefix="oidc:",
        groups_claim="groups",
        groups_prefix="oidc:",
    )
    assert user_of(found, prefixed).name == "oidc:alice"
    assert user_of(found, prefixed).groups[0] == "oidc:team-a"
    bare = OidcSettings(issuer=ISSUER, client_id="gatehouse", username_prefix="-")
    assert user_of(found, bare).name == "alice"


@pytest.mark.parametrize(
    ("changed", "claim"),
    [
        ({"iss": "https://evil.example.com"}, "iss"),
        ({"aud": "another-client"}, "aud"),
        ({"aud": ["gatehouse", "other"], "azp": "other"}, "azp"),
        ({"exp": int(time.time()) - 120}, "exp"),
        ({"nonce": "n-2"}, "nonce"),
        ({"nonce": None}, "nonce"),
    ],
)
def test_a_token_breaking_a_claims_rule_is_refused(changed: dict[str, Any], claim: str) -> None:
    with pytest.raises(IdTokenRefused, match=f"^{claim}:"):
        verified_claims(ISSUED.id_token(claims(**changed)), JWKS, SETTINGS, "n-1")


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def test_a_token_not_signed_by_the_issuers_key_is_refused() -> None:
    header, _, signature = ISSUED.id_token(claims()).split(".")
    forged = f"{header}.{_b64(claims(sub='admin'))}.{signature}"
    with pytest.raises(IdTokenRefused, match="signature"):
        verified_claims(forged, JWKS, SETTINGS, "n-1")
    other = Issuer(ISSUER, "gatehouse", "secret")  # another key under the same key id
    with pytest.raises(IdTokenRefused, match="signature"):
        verified_claims(other.id_token(claims()), JWKS, SETTINGS, "n-1")
    for alg in ("none", "HS256"):
        unsigned = f"{_b64({'alg': alg, 'kid': 'dev-1'})}.{_b64(claims())}."
        with pytest.raises(IdTokenRefused, match="algorithm"):
            verified_claims(unsigned, JWKS, SETTINGS, "n-1")
    unknown = f"{_b64({'alg': 'RS256', 'kid': 'other'})}.{_b64(claims())}.{signature}"
    with pytest.raises(IdTokenRefused, match="does not publish"):
        verified_claims(unknown, JWKS, SETTINGS, "n-1")


@pytest.mark.parametrize("token", ["", "a.b", "a.b.c", "x" * 20_000])
def test_what_is_not_a_token_is_refused(token: str) -> None:
    with pytest.raises(IdTokenRefused):
        verified_claims(token, JWKS, SETTINGS, "n-1")


def test_an_unverified_email_names_nobody() -> None:
    by_email = OidcSettings(issuer=ISSUER, client_id="gatehouse", username_claim="email")
    with pytest.raises(IdTokenRefused, match="email_verified"):
        user_of(claims(email_verified=False), by_email)
    # The API server refuses a present claim that is not the boolean true: "false" too.
    for unverified in ("false", "true", 0, None):
        with pytest.raises(IdTokenRefused, match="email_verified"):
            user_of(claims(email_verified=unverified), by_email)
