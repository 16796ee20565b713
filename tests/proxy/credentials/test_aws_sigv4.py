"""The awsSigV4 injector: the stored keys read, the request signed as it is sent, and every
signature it sends added to what is scrubbed; keys it cannot read refused without their value."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import AwsSigning, ConnectionRoute, WebIdentity
from gatehouse_proxy.credentials import injectors
from gatehouse_proxy.credentials.injectors import Injection, Sending
from gatehouse_proxy.errors import ProxyError
from tests.proxy.credentials.test_injectors import injector_for
from tests.proxy.serving import KEYRING, Tenant

KEYS = AwsKeys("ASIAEXAMPLEEXAMPLE00", "wJalr/K7+MDENG=bPx", "IQoJb3Jp+Z2lu/X2Vj==")
AWS = AwsSigning(region="eu-west-1", service="execute-api")


def _route(
    secret: str, aws: AwsSigning | None = AWS, origin: str = "https://[::1]:8443"
) -> ConnectionRoute:
    return Tenant("one", origin, auth="awsSigV4", secret=secret, aws=aws).connection()


def _inject(tmp_path: Path, route: ConnectionRoute) -> Injection:
    path = tmp_path / "keyring.json"
    path.write_text(KEYRING.dump())

    async def scenario() -> Injection:
        async with aiohttp.ClientSession() as session:
            return await injector_for(KeyringFile(path), session).injection(route)

    return asyncio.run(scenario())


def test_the_request_as_sent_is_signed_under_the_names_the_kind_says(tmp_path: Path) -> None:
    route = _route(KEYS.stored())
    injection = _inject(tmp_path, route)
    assert injection.headers == {}
    assert list(injection.secrets) == [KEYS.session_token]
    assert injection.signer is not None
    sending = Sending(
        "POST",
        "https://[::1]:8443/v1/a%20b?b=2&a=1",
        [("Content-Type", "application/json"), ("X-Amz-Target", "Svc.Op"), ("Accept", "*/*")],
        [b"{}"],
    )
    added = asyncio.run(injection.signer.sign(sending))
    names = {name for name, _ in added}
    assert names == injectors.injected_header_names(route) | {"Host"}
    headers = dict(added)
    assert headers["Host"] == "[::1]:8443"
    assert headers["X-Amz-Security-Token"] == KEYS.session_token
    authorization = headers["Authorization"]
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert (
        "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-security-token;x-amz-target," in authorization
    )
    signature = authorization.rpartition("Signature=")[2]
    # Each request's signature is scrubbed from what the upstream answers.
    assert injection.secrets == (KEYS.session_token, signature)
    echoed = Redactor(injection.secrets)(authorization.encode())
    assert signature.encode() not in echoed


def test_permanent_keys_send_no_token(tmp_path: Path) -> None:
    keys = AwsKeys("AKIAEXAMPLEEXAMPLE00", "wJalr/K7+MDENG=bPx")
    injection = _inject(tmp_path, _route(keys.stored(), origin="https://api.example.com"))
    assert injection.secrets == ()
    assert injection.signer is not None
    sending = Sending("GET", "https://api.example.com/", [], [])
    added = dict(asyncio.run(injection.signer.sign(sending)))
    assert added["Host"] == "api.example.com"
    assert "X-Amz-Security-Token" not in added
    assert len(injection.secrets) == 1


@pytest.mark.parametrize("stored", ["not json", '{"AccessKeyId": "short"}', KEYS.stored()[:-1]])
def test_keys_that_cannot_be_read_are_refused_without_their_value(
    tmp_path: Path, stored: str
) -> None:
    with pytest.raises(ProxyError) as refused:
        _inject(tmp_path, _route(stored))
    assert refused.value.code == "connection_unavailable"
    assert "wJalr" not in refused.value.message
    assert stored not in refused.value.message


def test_a_role_by_web_identity_is_refused_until_it_is_served(tmp_path: Path) -> None:
    aws = AwsSigning(
        region="eu-west-1",
        service="execute-api",
        web_identity=WebIdentity(
            role_arn="arn:aws:iam::123456789012:role/reader",
            sts_url="https://sts.eu-west-1.amazonaws.com",
            session_name="gatehouse",
        ),
    )
    with pytest.raises(ProxyError) as refused:
        _inject(tmp_path, _route("", aws=aws))
    assert refused.value.code == "connection_unavailable"
