"""A role's keys asked of STS with the proxy's EKS Pod Identity: the Pod's own keys from an
agent on 127.0.0.1 that checks its token as EKS's does, and an STS that verifies the signed
``AssumeRole`` with gatehouse_dev.sigv4_verifier (written apart from the proxy's signer). The
fleet's side (one mint for 2 replicas x 2 workers) is tests/e2e/test_aws_web_identity.py's."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.routes import AwsSigning, WebIdentity
from gatehouse_dev.sigv4_verifier import Account, Received, verify
from gatehouse_proxy.credentials.aws_pod_identity import PodIdentity, _held_of, agent_url
from gatehouse_proxy.credentials.aws_roles import AwsSettings, RoleMinter, signing_region
from gatehouse_proxy.errors import ProxyError
from tests.proxy.credentials.test_aws_roles import answer
from tests.proxy.credentials.test_injectors import client_for
from tests.proxy.serving import upstream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AGENT_TOKEN = "eyJhbGciOiJSUzI1NiJ9.the-agents-audience.signature"
POD = Account(
    "ASIAPODIDENTITY00001",
    "cG9kLXNlY3JldC1rZXkvSzdNREVORytiUHhSZmlD",
    "eu-west-1",
    "sts",
    session_token="IQoJb3JpZ2luX2VjEPODSESSION",
)
ROLE = WebIdentity(role_arn="arn:aws:iam::111122223333:role/reports", duration_seconds=7200)
KEY = "shop/reports"
AWS = AwsSigning(region="eu-west-1", service="execute-api", web_identity=ROLE)


def _agent_answer(lifetime: float) -> bytes:
    expires = datetime.fromtimestamp(time.time() + lifetime, UTC)
    return json.dumps(
        {
            "AccessKeyId": POD.access_key_id,
            "SecretAccessKey": POD.secret_access_key,
            "Token": POD.session_token,
            "Expiration": expires.isoformat(),
        }
    ).encode()


@asynccontextmanager
async def agent(handler: Handler) -> AsyncIterator[str]:
    """An agent answering as ``handler`` does: its URL."""
    app = web.Application()
    app.router.add_get("/v1/credentials", handler)
    async with upstream(app) as url:
        yield f"{url}/v1/credentials"


def _slow(seconds: float) -> Handler:
    """An agent answering good keys after ``seconds``."""

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return web.Response(body=_agent_answer(3600), content_type="application/json")

    return slow


@dataclass
class Aws:
    """What the agent and STS saw."""

    url: str = ""
    agent_asked: list[str] = field(default_factory=list)  # the Authorization each ask had
    assumed: list[dict[str, str]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    pod_lifetime: float = 6 * 3600.0
    sts_answer: str = ""  # "": the role's keys


@asynccontextmanager
async def aws() -> AsyncIterator[Aws]:
    seen = Aws()

    async def credentials(request: web.Request) -> web.Response:
        seen.agent_asked.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != AGENT_TOKEN:
            return web.json_response(
                {"message": "Service account token cannot be empty"}, status=400
            )
        expires = datetime.fromtimestamp(time.time() + seen.pod_lifetime, UTC)
        return web.json_response(
            {
                "AccessKeyId": POD.access_key_id,
                "SecretAccessKey": POD.secret_access_key,
                "Token": POD.session_token,
                "AccountId": "111122223333",
                "Expiration": expires.isoformat(),
            }
        )

    async def assume(request: web.Request) -> web.Response:
        body = await request.read()
        received = Received(request.method, request.raw_path, list(request.headers.items()), body)
        verdict = verify(received, POD, datetime.now(UTC))
        if not verdict.verified:
            seen.refusals.append(verdict.code)
            return web.Response(status=403, text=f"<Error><Code>{verdict.code}</Code></Error>")
        form = {name: str(value) for name, value in (await request.post()).items()}
        seen.assumed.append(form)
        if seen.sts_answer:
            return web.Response(status=403, text=seen.sts_answer, content_type="text/xml")
        expires = datetime.fromtimestamp(time.time() + int(form["DurationSeconds"]), UTC)
        return web.Response(text=answer(expires), content_type="text/xml")

    app = web.Application()
    app.router.add_get("/v1/credentials", credentials)
    app.router.add_post("/{region}/", assume)
    async with upstream(app) as url:
        seen.url = url
        yield seen


@asynccontextmanager
async def chained(seen: Aws, token_file: Path) -> AsyncIterator[RoleMinter]:
    pod = PodIdentity(f"{seen.url}/v1/credentials", token_file)
    try:
        async with aiohttp.ClientSession() as session:
            sts = f"{seen.url}/{{region}}/"
            yield RoleMinter(client_for(session), None, sts, timeout=5.0, pod=pod)
    finally:
        await pod.close()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "eks-pod-identity-token"
    path.write_text(AGENT_TOKEN + "\n")
    return path


def test_a_roles_keys_are_asked_with_assume_role_signed_by_the_pods_own_keys(
    token_file: Path,
) -> None:
    async def run() -> None:
        async with aws() as seen, chained(seen, token_file) as roles:
            minted = await roles.mint(KEY, AWS, ROLE, 10.0)
            await roles.mint(KEY, AWS, ROLE, 10.0)
        keys = AwsKeys.parse(minted.value)
        assert keys.access_key_id == "ASIAEXAMPLE000000001"
        assert seen.refusals == []  # STS verified both signatures
        # Role chaining: AWS refuses more than an hour, so 7,200 is asked as 3,600.
        assert (
            seen.assumed
            == [
                {
                    "Action": "AssumeRole",
                    "Version": "2011-06-15",
                    "RoleArn": ROLE.role_arn,
                    "RoleSessionName": "shop.reports",
                    "DurationSeconds": "3600",
                }
            ]
            * 2
        )
        assert 3590 < minted.lifetime <= 3600
        # The Pod's keys were asked once, with the agent's token, and kept for the second mint.
        assert seen.agent_asked == [AGENT_TOKEN]

    asyncio.run(run())


def test_the_pods_keys_are_asked_once_for_concurrent_mints_and_again_before_they_expire(
    token_file: Path,
) -> None:
    async def run() -> None:
        async with aws() as seen, chained(seen, token_file) as roles:
            assert roles.pod is not None
            seen.pod_lifetime = 240  # within the five minutes before expiry: due at once
            await asyncio.gather(*(roles.pod.keys(5.0) for _ in range(20)))
            assert len(seen.agent_asked) == 1
            await asyncio.to_thread(token_file.write_text, "rotated")  # the kubelet's
            with pytest.raises(ProxyError) as refused:
                await roles.pod.keys(5.0)
        assert seen.agent_asked == [AGENT_TOKEN, "rotated"]
        assert refused.value.code == "credential_failed"
        assert "agent answered 400" in refused.value.message
        assert "rotated" not in refused.value.message

    asyncio.run(run())


def _sts_error(code: str, message: str) -> str:
    return (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}"
        "</Message></Error></ErrorResponse>"
    )


def _refused_by_sts(token_file: Path, code: str, message: str) -> str:
    """What a mint is told when STS answers ``code`` with ``message``."""

    async def run() -> str:
        async with aws() as seen, chained(seen, token_file) as roles:
            seen.sts_answer = _sts_error(code, message)
            with pytest.raises(ProxyError) as refused:
                await roles.mint(KEY, AWS, ROLE, 10.0)
        return refused.value.message

    return asyncio.run(run())


def test_sts_refusing_is_said_with_its_code_and_the_pods_session_token_scrubbed(
    token_file: Path,
) -> None:
    said = _refused_by_sts(
        token_file,
        "AccessDenied",
        f"session {POD.session_token} is not authorized to perform sts:AssumeRole",
    )
    assert "AccessDenied" in said
    assert "not authorized to perform sts:AssumeRole" in said
    assert POD.session_token not in said


def test_sts_naming_the_proxies_own_role_and_pod_tells_the_app_neither(token_file: Path) -> None:
    said = _refused_by_sts(
        token_file,
        "AccessDenied",
        "User: arn:aws:sts::111122223333:assumed-role/gatehouse-proxy/eks-analytics-gatehouse-"
        "proxy-7d9f-1a2b is not authorized to perform: sts:AssumeRole on resource: "
        f"{ROLE.role_arn}",
    )
    assert "gatehouse-proxy" not in said
    assert "User: the proxies' role is not authorized" in said
    assert ROLE.role_arn in said


def test_an_agent_that_does_not_answer_keys_is_refused_naming_what_is_wrong(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        pod = PodIdentity("http://127.0.0.1:9/v1/credentials", None)
        try:
            with pytest.raises(ProxyError) as refused:
                await pod.keys(2.0)
        finally:
            await pod.close()
        assert "could not be reached" in refused.value.message
        absent = PodIdentity("http://127.0.0.1:9/v1/credentials", tmp_path / "absent")
        with pytest.raises(ProxyError) as refused:
            await absent.keys(2.0)
        assert "token file cannot be read" in refused.value.message

    asyncio.run(run())
    for body, said in (
        (b"[]", "not a JSON object"),
        (json.dumps({"AccessKeyId": "A", "SecretAccessKey": "s", "Token": "t"}).encode(), "keys:"),
        (b"[" * 8000, "not a JSON object"),
        (json.dumps({"AccessKeyId": 12345678901234567890, "Token": {}}).encode(), "as strings"),
        (
            json.dumps(
                {
                    "AccessKeyId": POD.access_key_id,
                    "SecretAccessKey": POD.secret_access_key,
                    "Token": POD.session_token,
                }
            ).encode(),
            "no Expiration",
        ),
        (_agent_answer(-60), "expired already"),
    ):
        with pytest.raises(ProxyError) as refused:
            _held_of(body, time.time())
        assert said in refused.value.message
        assert POD.secret_access_key not in refused.value.message


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
        "http://169.254.170.2/v2/credentials/id",
        "http://127.0.0.1:8080/v1/credentials",
        "http://localhost/v1/credentials",
        "https://agent.example/v1/credentials",
    ],
)
def test_the_agent_is_asked_where_awss_sdks_would_ask_it(url: str) -> None:
    assert agent_url(url) == url


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/v1/credentials", "ftp://x/"],
)
def test_any_other_agent_url_is_refused_at_start(url: str) -> None:
    with pytest.raises(ValueError, match="AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        agent_url(url)


def test_a_web_identity_is_used_before_pod_identity_as_awss_sdks_do(
    monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
    settings = AwsSettings.from_env()
    assert settings.pod_identity_url == "http://169.254.170.23/v1/credentials"
    assert settings.pod_identity_token_file == token_file
    assert settings.pod_identity() is not None
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.169.254/")
    with pytest.raises(ValueError, match="EKS Pod Identity's agent"):
        AwsSettings.from_env()

    async def run() -> None:
        async with aws() as seen:
            identity = token_file.parent / "web-identity"
            identity.write_text("eyJ.web.identity")
            pod = PodIdentity(f"{seen.url}/v1/credentials", token_file)
            async with aiohttp.ClientSession() as session:
                sts = f"{seen.url}/{{region}}/"
                roles = RoleMinter(client_for(session), identity, sts, timeout=5.0, pod=pod)
                with pytest.raises(ProxyError):
                    await roles.mint(KEY, AWS, ROLE, 10.0)  # this STS knows only AssumeRole
            await pod.close()
        assert seen.agent_asked == []

    asyncio.run(run())


def test_an_answer_written_in_pieces_is_read_whole() -> None:
    async def run() -> None:
        async def pieces(request: web.Request) -> web.StreamResponse:
            answer = web.StreamResponse()
            answer.content_type = "application/json"
            await answer.prepare(request)  # chunked
            body = _agent_answer(3600)
            await answer.write(body[:20])
            await asyncio.sleep(0.05)
            await answer.write(body[20:])
            await answer.write_eof()
            return answer

        async with agent(pieces) as url:
            pod = PodIdentity(url, None)
            try:
                assert (await pod.keys(5.0)).access_key_id == POD.access_key_id
            finally:
                await pod.close()

    asyncio.run(run())


def test_a_short_wait_of_one_connection_fails_no_other_waiting_on_the_same_ask() -> None:
    """The ask is bounded by the installation, each waiter by its own connection's timeout."""

    async def run() -> None:
        async with agent(_slow(1.2)) as url:
            pod = PodIdentity(url, None)
            try:
                short = asyncio.create_task(pod.keys(0.5))
                await asyncio.sleep(0)
                patient = asyncio.create_task(pod.keys(10.0))
                found = await asyncio.gather(short, patient, return_exceptions=True)
            finally:
                await pod.close()
        assert isinstance(found[0], ProxyError)
        assert found[1] == AwsKeys(POD.access_key_id, POD.secret_access_key, POD.session_token)

    asyncio.run(run())


def test_keys_are_held_an_hour_at_most_and_a_stopping_proxy_says_so() -> None:
    held = _held_of(
        json.dumps(
            {
                "AccessKeyId": POD.access_key_id,
                "SecretAccessKey": POD.secret_access_key,
                "Token": POD.session_token,
                "Expiration": "9999-12-31T23:59:59Z",
            }
        ).encode(),
        time.time(),
    )
    assert held.renew_at - time.monotonic() <= 3600

    async def run() -> None:
        async with agent(_slow(2)) as url:
            pod = PodIdentity(url, None)
            waiting = asyncio.create_task(pod.keys(5.0))
            await asyncio.sleep(0.1)
            await pod.close()
            found = await asyncio.gather(waiting, return_exceptions=True)
            with pytest.raises(ProxyError, match="stopping"):
                await pod.keys(5.0)
        assert isinstance(found[0], ProxyError)
        assert "stopping" in found[0].message

    asyncio.run(run())


def test_keys_sts_refuses_are_asked_of_the_agent_again(token_file: Path) -> None:
    async def run() -> None:
        async with aws() as seen, chained(seen, token_file) as roles:
            seen.sts_answer = _sts_error(
                "ExpiredToken", "The security token included in the request is expired"
            )
            with pytest.raises(ProxyError):
                await roles.mint(KEY, AWS, ROLE, 10.0)
            seen.sts_answer = ""
            await roles.mint(KEY, AWS, ROLE, 10.0)
        assert seen.agent_asked == [AGENT_TOKEN, AGENT_TOKEN]

    asyncio.run(run())


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("sts.amazonaws.com", "us-east-1"),
        ("sts.eu-west-1.amazonaws.com", "eu-west-1"),
        ("sts-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("sts.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("vpce-0abc-12de.sts.ap-southeast-2.vpce.amazonaws.com", "ap-southeast-2"),
        ("127.0.0.1", "eu-central-1"),  # names none: the connection's
    ],
)
def test_sts_requests_are_signed_for_the_region_their_endpoint_serves(
    host: str, region: str
) -> None:
    assert signing_region(host, "eu-central-1") == region
