"""auth.type oauth2AuthorizationCode as the operator declares it: each rule of the section refuses
with a message naming the field, the section becomes the table's Credential (the authorization, the
token request, the scopes), the client secret is bound to the token URL and client id, and a new
client id, token URL or scopes is a new grant identity."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import Credential
from gatehouse_operator.api.connection import (
    RESERVED_AUTHORIZATION_PARAMETERS,
    ExternalConnectionSpec,
)
from gatehouse_operator.api.meta import first_problem
from gatehouse_operator.api.url_fields import AUTHORIZATION_URL, CODE_TOKEN_URL, REVOCATION_URL
from gatehouse_operator.connections.origin import OriginError, token_url_of
from gatehouse_operator.keys.credentials import Found, encrypt_credential, placement
from tests.proxy.stores import quota_route

CODE = "auth.oauth2AuthorizationCode"
SECTION: dict[str, Any] = {
    "authorizationURL": "https://github.com/login/oauth/authorize",
    "tokenURL": "https://github.com/login/oauth/access_token",
    "clientId": "Iv1.8a61f9b3a7aba766",
}


def spec(**section: Any) -> ExternalConnectionSpec:
    return ExternalConnectionSpec.model_validate(
        {
            "displayName": "GitHub",
            "baseURL": "https://api.github.com",
            "linkPolicy": "AdminsOnly",
            "auth": {
                "type": "oauth2AuthorizationCode",
                "oauth2AuthorizationCode": {**SECTION, **section},
                "secretRef": {"name": "github", "key": "client-secret"},
            },
        }
    )


def refusal(**section: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        spec(**section)
    where, rule = first_problem(caught.value)
    return where, rule.removeprefix("Value error, ")


def credential(**section: Any) -> Credential:
    connection = spec(**section)
    return placement(connection.auth, token_url_of(connection.auth, allow_http=False))


def test_the_section_becomes_the_tables_credential() -> None:
    placed = credential(
        scopes=["repo", "read:org"],
        authorizationParameters={"allow_signup": "false"},
        clientAuthentication="body",
        revocationURL="https://api.github.com/applications/revoke",
    )
    assert placed.type == "oauth2AuthorizationCode"
    assert placed.scopes == ("repo", "read:org")
    assert placed.token_request is not None
    assert placed.token_request.url == "https://github.com/login/oauth/access_token"
    assert placed.token_request.client_id == "Iv1.8a61f9b3a7aba766"
    assert placed.token_request.client_authentication == "body"
    assert placed.authorization is not None
    assert placed.authorization.url == "https://github.com/login/oauth/authorize"
    assert placed.authorization.parameters == (("allow_signup", "false"),)
    assert placed.authorization.revocation_url == "https://api.github.com/applications/revoke"


def test_each_viewer_connects_their_own_account_unless_the_connection_shares_one() -> None:
    viewer = credential().authorization
    assert viewer is not None
    assert viewer.credential_scope == "viewer"
    assert viewer.revocation_url == ""
    shared = credential(credentialScope="shared").authorization
    assert shared is not None
    assert shared.credential_scope == "shared"
    assert refusal(credentialScope="everyone")[0] == f"{CODE}.credentialScope"


def test_pkce_is_always_used_no_field_turns_it_off() -> None:
    for field in ("pkce", "codeChallengeMethod", "usePKCE"):
        assert refusal(**{field: False}) == (
            f"{CODE}.{field}",
            "unknown key (misspelt, or not a setting of this section)",
        )


@pytest.mark.parametrize("name", RESERVED_AUTHORIZATION_PARAMETERS)
def test_a_parameter_oauth_or_pkce_sets_itself_is_refused_naming_the_field(name: str) -> None:
    for written in (name, name.upper()):
        where, rule = refusal(authorizationParameters={"prompt": "consent", written: "x"})
        assert where == f"{CODE}.authorizationParameters"
        assert rule.startswith(f"{CODE}.authorizationParameters must not set a parameter")
        assert name in rule


@pytest.mark.parametrize(
    ("parameters", "rule"),
    [
        ({"bad name": "x"}, "does not match the pattern"),
        ({"x" * 65: "x"}, "does not match the pattern"),
        ({"prompt": "a\nb"}, "does not match the pattern"),
        ({"prompt": "x" * 1025}, "at most 1024 characters"),
        ({f"p{i}": "x" for i in range(9)}, "at most 8 items"),
    ],
)
def test_authorization_parameters_are_bounded(parameters: dict[str, str], rule: str) -> None:
    where, said = refusal(authorizationParameters=parameters)
    assert where.startswith(f"{CODE}.authorizationParameters")
    assert rule in said


def test_what_providers_ask_for_is_accepted() -> None:
    """Google's offline access and consent, Salesforce's, GitHub's (no scopes: the app's)."""
    placed = credential(
        authorizationURL="https://accounts.google.com/o/oauth2/v2/auth",
        tokenURL="https://oauth2.googleapis.com/token",
        scopes=["https://www.googleapis.com/auth/spreadsheets.readonly"],
        authorizationParameters={"access_type": "offline", "prompt": "consent"},
        revocationURL="https://oauth2.googleapis.com/revoke",
    )
    assert placed.authorization is not None
    assert dict(placed.authorization.parameters) == {"access_type": "offline", "prompt": "consent"}
    assert credential().scopes == ()


@pytest.mark.parametrize("field", [AUTHORIZATION_URL, CODE_TOKEN_URL, REVOCATION_URL])
@pytest.mark.parametrize(
    ("url", "broken"),
    [
        ("login.example.com/authorize", "must be an absolute URL"),
        ("ftp://login.example.com/authorize", "must be an https URL"),
        ("https://user:pw@login.example.com/authorize", "must not contain credentials"),
        ("https://login.example.com/authorize?x=1", "must not have a query or fragment"),
        ("https://login.example.com/authorize#x", "must not have a query or fragment"),
    ],
)
def test_each_url_keeps_the_token_urls_rules_naming_itself(
    field: Any, url: str, broken: str
) -> None:
    key = field.name.rpartition(".")[2]
    where, rule = refusal(**{key: url})
    assert where == field.name
    assert rule.startswith(f"{field.name} {broken}")


@pytest.mark.parametrize("key", ["authorizationURL", "tokenURL", "revocationURL"])
def test_the_installations_scheme_rule_holds_every_endpoint(key: str) -> None:
    """http only where the installation allows it, and the origin's host rules, for each
    endpoint of the section: the message names the field."""
    connection = spec(**{key: "http://login.example.com/x"})
    with pytest.raises(OriginError, match=f"^{key} uses http"):
        token_url_of(connection.auth, allow_http=False)
    assert token_url_of(connection.auth, allow_http=True)
    numeric = spec(**{key: "https://2130706433/x"})
    with pytest.raises(OriginError, match=f"^{key} host"):
        token_url_of(numeric.auth, allow_http=True)


def test_the_client_secret_is_bound_to_the_token_url_and_client_id() -> None:
    keyring = Keyring.generate()
    found = Found(b"cl1ent-s3cret", "key 'client-secret' of Secret 'github'")

    def encrypted(**section: Any) -> Credential:
        connection = spec(**section)
        return encrypt_credential(
            connection.auth,
            found,
            keyring=keyring,
            connection_uid="uid-1",
            origin="https://api.github.com",
            token_url=token_url_of(connection.auth, allow_http=False),
        )

    sealed = encrypted()
    assert sealed.encrypted is not None
    context = sealed.context("uid-1", "https://api.github.com")
    assert keyring.decrypt(sealed.encrypted, context) == b"cl1ent-s3cret"
    for other in (encrypted(clientId="another"), encrypted(tokenURL="https://evil.example/t")):
        assert other.context("uid-1", "https://api.github.com") != context


def test_a_new_client_id_token_url_or_scopes_is_a_new_grant_identity() -> None:
    """What the proxies compare to drop the grants given for another: the client id, the token
    URL, the scopes (in any order); a new authorization URL, parameter, revocation URL or
    secret keeps them."""
    first = credential(scopes=["repo", "read:org"]).grant_identity
    assert first
    assert credential(scopes=["read:org", "repo"]).grant_identity == first
    for kept in (
        {"authorizationURL": "https://github.com/login/oauth/authorize2"},
        {"authorizationParameters": {"allow_signup": "false"}},
        {"revocationURL": "https://api.github.com/applications/revoke"},
    ):
        assert credential(scopes=["repo", "read:org"], **kept).grant_identity == first
    for dropped in (
        {"clientId": "Iv1.another"},
        {"tokenURL": "https://github.com/login/oauth/token2"},
        {"scopes": ["repo"]},
    ):
        assert credential(**{"scopes": ["repo", "read:org"], **dropped}).grant_identity != first
    assert Credential(type="oauth2ClientCredentials").grant_identity == ""


def test_the_tables_authorization_is_bounded_where_it_is_read() -> None:
    placed = credential().model_dump(mode="json")
    for authorization in (
        {"url": "https://a.example/" + "x" * 2048},
        {"url": "https://a.example/a", "parameters": [["p", "x"]] * 9},
        {"url": "https://a.example/a", "parameters": [["p", "x" * 1025]]},
        {"url": "https://a.example/a", "credential_scope": "everyone"},
    ):
        with pytest.raises(ValidationError):
            Credential.model_validate({**placed, "authorization": authorization})


@pytest.mark.parametrize(("scope", "needs"), [("viewer", True), ("shared", False)])
def test_a_connection_whose_grants_are_each_viewers_needs_a_verified_viewer(
    scope: str, needs: bool
) -> None:
    route = quota_route().model_copy(update={"credential": credential(credentialScope=scope)})
    assert route.needs_viewer is needs
