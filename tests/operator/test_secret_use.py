"""Which connection changes need the right to read the Secret."""

from __future__ import annotations

from typing import Any

import pytest

from gatehouse_operator.access import secret_use
from gatehouse_operator.api.stored import StoredConnectionSpec

REF = {"name": "vendor", "key": "api-key"}
SPEC: dict[str, Any] = {
    "baseURL": "https://api.vendor.test",
    "auth": {"type": "bearer", "secretRef": REF},
    "allowedPaths": ["/v1"],
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**SPEC, **changes}


@pytest.mark.parametrize(
    ("old", "new", "needed"),
    [
        (None, SPEC, ("vendor", "spec.auth.secretRef")),
        (None, _with(auth={"type": "none"}), None),
        (SPEC, SPEC, None),
        (SPEC, _with(allowedPaths=["/v2"], linkPolicy="Builders"), None),
        (
            SPEC,
            _with(auth={"type": "bearer", "secretRef": {"name": "db-password", "key": "p"}}),
            ("db-password", "spec.auth.secretRef"),
        ),
        (
            SPEC,
            _with(auth={"type": "bearer", "secretRef": {"name": "vendor", "key": "other"}}),
            ("vendor", "spec.auth.secretRef"),
        ),
        (SPEC, _with(baseURL="https://attacker.test"), ("vendor", "spec.baseURL")),
        (_with(auth={"type": "none"}), SPEC, ("vendor", "spec.auth.secretRef")),
        (SPEC, _with(baseURL="https://attacker.test", auth={"type": "none"}), None),
        # Whom the vendor's certificate may chain to is who receives the value.
        (SPEC, _with(tls={"caBundle": "-----BEGIN CERTIFICATE-----"}), ("vendor", "spec.tls")),
        (
            _with(tls={"caBundle": "a"}),
            _with(tls={"caBundle": "a", "systemRoots": False}),
            ("vendor", "spec.tls"),
        ),
        (SPEC, _with(tls={"caBundleRef": {"name": "ca"}}), ("vendor", "spec.tls")),
        (_with(tls={"caBundle": "a"}), _with(tls={"caBundle": "a"}), None),
        (SPEC, _with(tls={"systemRoots": True}), None),
    ],
)
def test_what_a_change_needs_to_read(
    old: dict[str, Any] | None, new: dict[str, Any], needed: tuple[str, str] | None
) -> None:
    before = None if old is None else StoredConnectionSpec.model_validate(old)
    assert secret_use.secret_to_read(before, StoredConnectionSpec.model_validate(new)) == needed


def test_the_refusal_names_the_field_the_secret_and_the_rule() -> None:
    message = secret_use.secret_refusal("ana", "shop", "db-password", "spec.baseURL")
    assert message.startswith("spec.baseURL: ana may not get Secret 'db-password'")
    assert "namespace shop" in message


CODE = {
    "authorizationURL": "https://login.vendor.test/authorize",
    "tokenURL": "https://login.vendor.test/token",
    "clientId": "reports",
}
CODE_SPEC = _with(
    auth={"type": "oauth2AuthorizationCode", "oauth2AuthorizationCode": CODE, "secretRef": REF}
)


def _code(**changes: Any) -> dict[str, Any]:
    return _with(
        auth={
            "type": "oauth2AuthorizationCode",
            "oauth2AuthorizationCode": {**CODE, **changes},
            "secretRef": REF,
        }
    )


@pytest.mark.parametrize(
    ("new", "needed"),
    [
        (_code(tokenURL="https://attacker.test/token"), "tokenURL"),
        (_code(clientId="attackers-client"), "clientId"),
        # Where a person is sent, and what they are asked for, send no secret.
        (_code(authorizationURL="https://login.vendor.test/authorize2"), None),
        (_code(scopes=["repo"], credentialScope="shared"), None),
    ],
)
def test_an_authorization_codes_client_secret_goes_to_its_token_url_for_its_client(
    new: dict[str, Any], needed: str | None
) -> None:
    """The webhook's rule for client credentials holds for the authorization code's section:
    its client secret goes to tokenURL, on behalf of clientId."""
    before = StoredConnectionSpec.model_validate(CODE_SPEC)
    found = secret_use.secret_to_read(before, StoredConnectionSpec.model_validate(new))
    assert found == (
        None if needed is None else ("vendor", f"spec.auth.oauth2AuthorizationCode.{needed}")
    )
