"""An API key is never sent as a header the proxy or HTTP controls, in any spelling (N6)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.meta import spec_error


def _spec(name: str, where: str = "header") -> dict[str, Any]:
    return {
        "displayName": "Vendor",
        "baseURL": "https://api.example.com",
        "linkPolicy": "Builders",
        "auth": {
            "type": "apiKey",
            "apiKey": {"name": name, "in": where},
            "secretRef": {"name": "vendor", "key": "api-key"},
        },
    }


@pytest.mark.parametrize(
    "name",
    ["Content_Length", "Transfer_Encoding", "X-Forwarded-Host", "X.Forwarded.Host", "Proxy"],
)
def test_a_reserved_header_name_is_refused_naming_the_field_and_the_rule(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ExternalConnectionSpec.model_validate(_spec(name))
    message = spec_error(refused.value)
    assert message.startswith("spec.auth.apiKey: ")
    assert "auth.apiKey.name must not be a header the proxy or HTTP itself controls" in message
    assert "read with every character other than a letter or digit as '-'" in message


@pytest.mark.parametrize("name", ["X-Api-Key", "Authorization", "api_key"])
def test_ordinary_names_and_authorization_are_accepted(name: str) -> None:
    ExternalConnectionSpec.model_validate(_spec(name))


def test_a_query_parameter_may_have_any_of_those_names() -> None:
    ExternalConnectionSpec.model_validate(_spec("X-Forwarded-Host", "query"))


@pytest.mark.parametrize("name", ["X-Amz-Date", "x_amz_security_token", "X-Amz-Content-Sha256"])
def test_an_aws_connections_own_header_is_never_one_its_signature_sends(name: str) -> None:
    # The proxy sends its own beside the connection's (the app's alone are dropped): two
    # X-Amz-Date headers, both signed, and AWS refuses every fetch.
    spec = {
        **_spec("X-Api-Key"),
        "auth": {
            "type": "awsSigV4",
            "awsSigV4": {"region": "eu-west-1", "service": "execute-api"},
            "secretRef": {"name": "vendor", "key": "aws-keys.json"},
        },
        "headers": [{"name": name, "value": "x"}],
    }
    with pytest.raises(ValidationError) as refused:
        ExternalConnectionSpec.model_validate(spec)
    assert "headers[].name must not be one the AWS signature sends" in spec_error(refused.value)
