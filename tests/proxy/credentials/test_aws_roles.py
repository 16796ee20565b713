"""A role's keys from AWS STS, asked with the proxy's web identity token: against an STS on
127.0.0.1 that checks the token it is sent and answers as AWS documents (XML). What the fleet does
with the keys (one mint, renewed once) is FleetTokens', as for every minted credential, and is
tested with 2 replicas x 2 workers in tests/e2e/test_aws_web_identity.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.routes import AwsSigning, WebIdentity
from gatehouse_proxy.credentials.aws_roles import AwsSettings, RoleMinter, keys_of
from gatehouse_proxy.credentials.token_grants import MAX_LIFETIME_SECONDS
from gatehouse_proxy.errors import ProxyError
from tests.proxy.credentials.test_injectors import client_for

SESSION = "FwoGZXIvYXdzE-session"
IDENTITY = "eyJhbGciOiJSUzI1NiJ9.the-pods-token.signature"
ROLE = WebIdentity(role_arn="arn:aws:iam::111122223333:role/reports")
KEY = "shop/reports"
AWS = AwsSigning(region="eu-west-1", service="execute-api", web_identity=ROLE)


def answer(expires: datetime, session_token: str = SESSION) -> str:
    return f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIAEXAMPLE000000001</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>{session_token}</SessionToken>
      <Expiration>{expires.strftime("%Y-%m-%dT%H:%M:%SZ")}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:gatehouse:proxy</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"""


@asynccontextmanager
async def sts(body: str = "", status: int = 200) -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An STS that refuses any token but the Pod's, and answers ``body`` (the keys, by
    default, for the duration asked)."""
    asked: list[dict[str, str]] = []

    async def assume(request: web.Request) -> web.Response:
        form = {name: str(value) for name, value in (await request.post()).items()}
        asked.append({**form, "path": request.path})
        if form.get("WebIdentityToken") != IDENTITY:
            return web.Response(
                status=400,
                text="<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
                "<Message>Couldn't retrieve verification key from your identity provider"
                "</Message></Error></ErrorResponse>",
            )
        if body:
            return web.Response(status=status, text=body, content_type="text/xml")
        seconds = int(form["DurationSeconds"])
        expires = datetime.fromtimestamp(time.time() + seconds, UTC)
        return web.Response(text=answer(expires), content_type="text/xml")

    app = web.Application()
    app.router.add_post("/{region}/", assume)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/{{region}}/", asked
    finally:
        await runner.cleanup()


@asynccontextmanager
async def minter(url: str, token_file: Path | None) -> AsyncIterator[RoleMinter]:
    async with aiohttp.ClientSession() as session:
        yield RoleMinter(client_for(session), token_file, url, timeout=5.0)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(IDENTITY + "\n")
    return path


def test_a_roles_keys_are_asked_of_the_regions_sts_with_the_pods_token(token_file: Path) -> None:
    async def run() -> None:
        async with sts() as (url, asked), minter(url, token_file) as roles:
            minted = await roles.mint(KEY, AWS, ROLE, 10.0)
        keys = AwsKeys.parse(minted.value)
        assert keys.access_key_id == "ASIAEXAMPLE000000001"
        assert keys.session_token == SESSION
        assert 3590 < minted.lifetime <= 3600
        assert asked == [
            {
                "Action": "AssumeRoleWithWebIdentity",
                "Version": "2011-06-15",
                "RoleArn": ROLE.role_arn,
                "RoleSessionName": "shop.reports",
                "DurationSeconds": "3600",
                "WebIdentityToken": IDENTITY,
                "path": "/eu-west-1/",
            }
        ]

    asyncio.run(run())


def test_the_token_is_read_again_at_each_mint_since_the_kubelet_rotates_it(
    token_file: Path,
) -> None:
    async def run() -> None:
        async with sts() as (url, asked), minter(url, token_file) as roles:
            await roles.mint(KEY, AWS, ROLE, 10.0)
            await asyncio.to_thread(token_file.write_text, "rotated")
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, AWS, ROLE, 10.0)
        assert [form["WebIdentityToken"] for form in asked] == [IDENTITY, "rotated"]
        assert "InvalidIdentityToken: Couldn't retrieve verification key" in refused.value.message

    asyncio.run(run())


def test_sts_refusing_is_said_with_its_code_and_the_token_it_echoes_scrubbed(
    token_file: Path,
) -> None:
    echoed = (
        "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not "
        f"authorized to perform sts:AssumeRoleWithWebIdentity with {IDENTITY}</Message></Error>"
        "</ErrorResponse>"
    )

    async def run() -> None:
        async with sts(echoed, status=403) as (url, _), minter(url, token_file) as roles:
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, AWS, ROLE, 10.0)
        assert refused.value.code == "credential_failed"
        assert "(HTTP 403: AccessDenied: Not authorized" in refused.value.message
        assert IDENTITY not in refused.value.message
        assert "the-pods-token" not in refused.value.message

    asyncio.run(run())


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("<!DOCTYPE x [<!ENTITY a 'aaaa'>]><x>&a;</x>", "not XML it can read"),
        ("not xml", "not XML it can read"),
        (answer(datetime.fromtimestamp(time.time() + 3, UTC)), "too soon to use"),
        (answer(datetime.fromtimestamp(time.time() + 3600, UTC), ""), "no SessionToken"),
        (
            answer(datetime.fromtimestamp(time.time() + 3600, UTC), "with space"),
            '"SessionToken" must be at most',
        ),
        (answer(datetime.fromtimestamp(time.time() + 3600, UTC)).replace("Z<", "x<"), "Expiration"),
    ],
)
def test_an_answer_that_is_not_good_keys_is_refused_naming_what_is_wrong(
    body: str, said: str
) -> None:
    with pytest.raises(ProxyError) as refused:
        keys_of(body.encode(), time.time())
    assert said in refused.value.message
    assert "wJalrXUtnFEMI" not in refused.value.message


def test_a_proxy_without_a_web_identity_says_so(tmp_path: Path) -> None:
    async def run() -> None:
        async with minter("http://127.0.0.1:9/", None) as roles:
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, AWS, ROLE, 10.0)
        assert "no AWS identity: neither a web identity token" in refused.value.message
        async with minter("http://127.0.0.1:9/", tmp_path / "absent") as roles:
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, AWS, ROLE, 10.0)
        assert "cannot be read" in refused.value.message

    asyncio.run(run())


def test_the_sts_url_is_an_installations_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEHOUSE_AWS_STS_URL", "sts.{region}.example")
    with pytest.raises(ValueError, match="GATEHOUSE_AWS_STS_URL must be an https:// URL"):
        AwsSettings.from_env()
    monkeypatch.setenv("GATEHOUSE_AWS_STS_URL", "https://sts.{zone}.example")
    with pytest.raises(ValueError, match="GATEHOUSE_AWS_STS_URL"):
        AwsSettings.from_env()
    monkeypatch.setenv("GATEHOUSE_AWS_STS_URL", "https://sts.{region}.example/")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token")
    assert AwsSettings.from_env() == AwsSettings(
        "https://sts.{region}.example/", Path("/var/run/token")
    )


@pytest.mark.parametrize("region", ["s3", "s3-us-west-2", "s3-website-us-east-1", "s3-external-1"])
def test_a_region_that_is_no_aws_regions_never_gets_the_pods_token(
    token_file: Path, region: str
) -> None:
    # With the default URL (https://sts.{region}.amazonaws.com/) these name S3's endpoint of a
    # bucket called "sts" (sts.s3.amazonaws.com), not STS: the proxy's token is every tenant's
    # roles' key, and a connection's region must not send it anywhere but STS.
    aws = AwsSigning(region=region, service="execute-api", web_identity=ROLE)

    async def run() -> None:
        async with sts() as (url, asked), minter(url, token_file) as roles:
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, aws, ROLE, 10.0)
        assert asked == []
        assert refused.value.code == "credential_failed"
        assert "region" in refused.value.message

    asyncio.run(run())


def test_a_document_type_is_refused_in_any_encoding_the_parser_reads() -> None:
    # The parser reads the encoding the document declares: "<!DOCTYPE" in UTF-16 is no byte
    # pattern of UTF-8's, and its entities were expanded (up to expat's amplification limit).
    expires = datetime.fromtimestamp(time.time() + 3600, UTC)
    with_entity = answer(expires, "&token;").replace(
        "<AssumeRoleWithWebIdentityResponse",
        '<!DOCTYPE x [<!ENTITY token "FwoGZXIvYXdzE-entity">]><AssumeRoleWithWebIdentityResponse',
        1,
    )
    body = ('<?xml version="1.0" encoding="UTF-16"?>' + with_entity).encode("utf-16")
    with pytest.raises(ProxyError) as refused:
        keys_of(body, time.time())
    assert "not XML it can read" in refused.value.message


def test_keys_are_kept_no_longer_than_any_minted_token_whatever_sts_says() -> None:
    # STS grants at most 12 hours: an Expiration years away is not believed (the fleet would
    # keep the keys, and sign with them, until then).
    far = datetime(2999, 1, 1, tzinfo=UTC)
    assert keys_of(answer(far).encode(), time.time()).lifetime == MAX_LIFETIME_SECONDS
