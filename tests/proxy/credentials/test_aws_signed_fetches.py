"""AWS Signature Version 4 through a real proxy (uvicorn on 127.0.0.1), verified by an upstream
that checks it as AWS does (gatehouse_dev.sigv4_upstream, written from AWS's published algorithm,
not from the proxy's signer): what the proxy sends, after it has normalised the path and
re-encoded the query, is what its signature covers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import httpx
import yarl

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.routes import AwsSigning, ConnectionRoute, PayloadSigning
from gatehouse_dev.sigv4_upstream import SigV4Upstream
from gatehouse_dev.sigv4_verifier import Account
from tests.proxy.serving import Tenant, running_proxy, upstream

KEYS = AwsKeys("AKIAGATEHOUSETEST001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYGATEHOUSE1")
TEMPORARY = AwsKeys(
    "ASIAGATEHOUSETEST002",
    "Zm9vYmFyYmF6cXV4/K7MDENG+bPxRfiCYGATEHOUSE2",
    "IQoJb3JpZ2luX2VjEGatehouseSessionToken//////////wEaCXVzLWVhc3QtMSJHMEUCIQDexample==",
)
REGION, SERVICE = "eu-west-1", "execute-api"


@dataclasses.dataclass(frozen=True)
class AwsTenant(Tenant):
    """A tenant whose connection signs with AWS Signature Version 4 as ``aws`` says."""

    aws: AwsSigning | None = None

    def connection(self) -> ConnectionRoute:
        plain = super().connection()
        credential = plain.credential.model_copy(update={"aws": self.aws})
        return plain.model_copy(update={"credential": credential})


def _account(keys: AwsKeys, *, service: str = SERVICE, unsigned: bool = False) -> Account:
    return Account(
        keys.access_key_id,
        keys.secret_access_key,
        REGION,
        service,
        session_token=keys.session_token,
        allow_unsigned_payload=unsigned,
    )


@contextlib.asynccontextmanager
async def _signing(
    tmp_path: Path, account: Account, keys: AwsKeys = KEYS, payload: PayloadSigning = "signed"
) -> AsyncIterator[tuple[SigV4Upstream, httpx.AsyncClient]]:
    """An app, through a real proxy, to a verifying upstream serving ``account``, its
    connection signing with ``keys``."""
    verifier = SigV4Upstream(account)
    async with upstream(verifier.create_app()) as origin:
        signed = AwsTenant(
            "one",
            origin,
            auth="awsSigV4",
            secret=keys.stored(),
            methods=frozenset({"GET", "POST", "PUT"}),
            aws=AwsSigning(region=REGION, service=account.service, payload=payload),
        )
        async with (
            running_proxy(tmp_path, [signed]) as proxy,
            httpx.AsyncClient(
                base_url=f"{proxy.url}/v1/fetch/api",
                headers={"Authorization": f"Bearer {signed.token}"},
                timeout=10,
            ) as client,
        ):
            yield verifier, client


def test_get_and_post_are_verified_as_aws_verifies_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _signing(tmp_path, _account(KEYS)) as (verifier, client):
            got = await client.get("/v1/items", params={"b": "2", "a": "1"})
            assert got.status_code == 200, got.text
            assert got.json()["verified"] is True
            assert {"host", "x-amz-date"} <= set(got.json()["signedHeaders"])
            posted = await client.post("/v1/items", json={"name": "a thing", "n": [1, 2]})
            assert posted.status_code == 200, posted.text
            assert posted.json()["json"] == {"name": "a thing", "n": [1, 2]}
            assert posted.json()["unsignedPayload"] is False
            assert dict(verifier.answers) == {"OK": 2}

    asyncio.run(scenario())


def test_a_path_and_query_the_proxy_re_encodes_still_verify(tmp_path: Path) -> None:
    """The app's escapes are not what goes upstream: ``%7E`` is sent as ``~``, ``%3A`` as ``:``,
    lower case escapes in upper case, a stray ``%`` as ``%25``; the signature covers what was
    sent, so the service, encoding the path again as AWS does, agrees."""

    async def scenario() -> None:
        async with _signing(tmp_path, _account(KEYS)) as (verifier, client):
            answer = await client.get(
                "/v1/%7Euser/a%20b/%e1%88%b4/x%3Ay/(c)"
                '?q=caf%c3%a9&bad=%zz&plus=a+b&&flag&z=%7e&sp=a b&quote="x"'
            )
            assert answer.status_code == 200, answer.text
            echo = answer.json()
            assert echo["path"] == "/v1/~user/a%20b/%E1%88%B4/x:y/(c)"
            assert (
                echo["query"] == "q=caf%c3%a9&bad=%25zz&plus=a+b&flag&z=%7e&sp=a%20b&quote=%22x%22"
            )
            # Dot and empty segments, whose meaning could differ upstream, are refused, never
            # signed and sent (sent as written: httpx would resolve the dots itself).
            async with aiohttp.ClientSession(headers=dict(client.headers)) as raw:
                base = str(client.base_url).rstrip("/")
                refusals = {"/v1/a/./b/../c": "path_traversal", "//x": "invalid_path"}
                for refused, code in refusals.items():
                    async with raw.get(yarl.URL(f"{base}{refused}", encoded=True)) as refusal:
                        assert refusal.status == 400, refused
                        assert (await refusal.json())["error"]["code"] == code
            assert dict(verifier.answers) == {"OK": 1}

    asyncio.run(scenario())


def test_a_body_past_64_kib_is_hashed_whole(tmp_path: Path) -> None:
    body = bytes(range(256)) * 1024  # 256 KiB

    async def scenario() -> None:
        async with _signing(tmp_path, _account(KEYS)) as (_, client):
            answer = await client.post(
                "/v1/upload", content=body, headers={"Content-Type": "application/octet-stream"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["bodyBytes"] == len(body)
            assert answer.json()["bodySha256"] == hashlib.sha256(body).hexdigest()

    asyncio.run(scenario())


def test_an_unsigned_payload_verifies_where_the_service_accepts_it(tmp_path: Path) -> None:
    body = b"x" * (100 * 1024)

    async def scenario() -> None:
        account = _account(KEYS, service="s3", unsigned=True)
        async with _signing(tmp_path, account, payload="unsigned") as (_, client):
            answer = await client.put("/bucket/key", content=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["unsignedPayload"] is True
            assert answer.json()["bodyBytes"] == len(body)

    asyncio.run(scenario())


def test_s3s_object_keys_are_signed_as_s3_reads_them(tmp_path: Path) -> None:
    """S3 signs a key encoded once (``:`` as ``%3A``, a space as ``%20``), where every other
    service encodes the path as sent again (``%20`` as ``%2520``): the same path verifies at
    both, each by its own rule."""
    path = "/bucket/photos/a%20b/%7Ekey%3A1.jpg"

    async def scenario() -> None:
        for service in ("s3", SERVICE):
            async with _signing(tmp_path, _account(KEYS, service=service)) as (verifier, client):
                answer = await client.get(path)
                assert answer.status_code == 200, (service, answer.text)
                assert answer.json()["path"] == "/bucket/photos/a%20b/~key:1.jpg"
                assert dict(verifier.answers) == {"OK": 1}

    asyncio.run(scenario())


def test_temporary_keys_send_their_session_token(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _signing(tmp_path, _account(TEMPORARY), keys=TEMPORARY) as (_, client):
            answer = await client.get("/v1/items")
            assert answer.status_code == 200, answer.text
            assert "x-amz-security-token" in answer.json()["signedHeaders"]
            assert TEMPORARY.session_token not in answer.text

    asyncio.run(scenario())


def test_a_wrong_secret_gets_the_vendors_refusal_and_no_secret(tmp_path: Path) -> None:
    """The service's 403 names what failed and shows the canonical request it expected, as AWS
    does; that request holds the session token (a signed header): the app gets it scrubbed."""
    service_keys = dataclasses.replace(TEMPORARY, secret_access_key="another" + "A" * 33)

    async def scenario() -> None:
        account = _account(service_keys)
        async with _signing(tmp_path, account, keys=TEMPORARY) as (verifier, client):
            answer = await client.get("/v1/items")
            assert answer.status_code == 403, answer.text
            error = json.loads(answer.text)
            assert error["__type"] == "SignatureDoesNotMatch"
            assert error["CanonicalRequest"].startswith("GET\n/v1/items\n")
            assert "\nx-amz-security-token:[redacted]\n" in error["CanonicalRequest"]
            for secret in (TEMPORARY.secret_access_key, TEMPORARY.session_token):
                assert secret not in answer.text
                assert secret not in str(answer.headers)
            assert dict(verifier.answers) == {"SignatureDoesNotMatch": 1}

    asyncio.run(scenario())
