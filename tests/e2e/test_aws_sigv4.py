"""AWS Signature Version 4 end to end: kubectl-applied connections with ``auth.type: awsSigV4``,
the stack's two proxies, and services on 127.0.0.1 that verify each request as AWS does
(gatehouse_dev.sigv4_upstream: written from AWS's published algorithm, sharing no code with the
proxy's signer). Each answer's verdict is the service's own."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from aiohttp import web

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import free_port
from gatehouse_dev.sigv4_upstream import SigV4Upstream
from gatehouse_dev.sigv4_verifier import Account
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

REGION = "eu-west-1"
KEYS = AwsKeys("AKIAGATEHOUSEE2E0001", "e2e/K7MDENG+bPxRfiCYGatehouseLongTermKey1")
TEMPORARY = AwsKeys(
    "ASIAGATEHOUSEE2E0002",
    "e2e/K7MDENG+bPxRfiCYGatehouseTemporaryKey2",
    "IQoJb3JpZ2luX2VjEGatehouseE2eSessionToken//////////wEaCXVzLWVhc3QtMSJHMEUCIQD==",
)
# The temporary keys with a secret the service does not hold.
WRONG = dataclasses.replace(TEMPORARY, secret_access_key="e2e/AnotherSecretTheServiceNeverIssued1")


@contextmanager
def _service(account: Account) -> Iterator[tuple[str, SigV4Upstream]]:
    """``account``'s service on 127.0.0.1, on a loop of its own in a thread (the tests' calls
    through the proxies are synchronous): its URL, and what it answered."""
    verifier = SigV4Upstream(account)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(verifier.create_app())
    port = free_port()

    async def start() -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()

    try:
        asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
        yield f"http://127.0.0.1:{port}", verifier
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _account(keys: AwsKeys, service: str, *, unsigned: bool = False) -> Account:
    return Account(
        keys.access_key_id,
        keys.secret_access_key,
        REGION,
        service,
        session_token=keys.session_token,
        allow_unsigned_payload=unsigned,
    )


def _aws(name: str, origin: str, service: str, payload: str = "signed") -> dict[str, object]:
    return connection(
        name,
        origin,
        {
            "type": "awsSigV4",
            "awsSigV4": {"region": REGION, "service": service, "payloadSigning": payload},
            "secretRef": {"name": name, "key": "aws-keys.json"},
        },
        allowedMethods=["GET", "POST", "PUT"],
    )


def test_signed_requests_verify_where_the_service_checks_them_as_aws_does(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    with (
        _service(_account(KEYS, "execute-api")) as (api, api_answers),
        _service(_account(TEMPORARY, "execute-api")) as (temporary, temporary_answers),
        _service(_account(KEYS, "s3", unsigned=True)) as (bucket, bucket_answers),
    ):
        keys = {"api": KEYS, "temporary": TEMPORARY, "wrong": WRONG, "bucket": KEYS}
        apply(
            cluster,
            namespace,
            *(secret(name, **{"aws-keys.json": value.stored()}) for name, value in keys.items()),
            _aws("api", api, "execute-api"),
            _aws("temporary", temporary, "execute-api"),
            _aws("wrong", temporary, "execute-api"),
            _aws("bucket", bucket, "s3", payload="unsigned"),
            data_app("reports", {name: name for name in keys}),
        )
        for name in keys:
            wait_condition(cluster, namespace, f"externalconnection/{name}", "True")
        token = app_token(cluster, namespace, "dataapp-reports-gatehouse")

        # Both replicas sign; the service verifies each as AWS would.
        for proxy in stack.proxies:
            got = fetch(proxy.url, token, "api", "/v1/items?b=2&a=1")
            assert got.status_code == 200, got.text
            assert {"host", "x-amz-date"} <= set(got.json()["signedHeaders"])
        posted = fetch(stack.proxy, token, "api", "/v1/items", method="POST", json={"n": [1, 2]})
        assert posted.status_code == 200, posted.text
        assert posted.json()["json"] == {"n": [1, 2]}

        # What the proxy re-encodes (%7E sent as ~, %3A as :, lower case escapes in upper case,
        # a stray % as %25) is what it signs.
        encoded = fetch(
            stack.proxy, token, "api", "/v1/%7Euser/a%20b/%e1%88%b4/x%3Ay?q=caf%c3%a9&bad=%zz&&f"
        )
        assert encoded.status_code == 200, encoded.text
        assert encoded.json()["path"] == "/v1/~user/a%20b/%E1%88%B4/x:y"
        assert encoded.json()["query"] == "q=caf%c3%a9&bad=%25zz&f"

        large = bytes(range(256)) * 1024  # 256 KiB: past the proxy's 64 KiB buffer
        uploaded = fetch(stack.proxy, token, "api", "/v1/upload", method="POST", content=large)
        assert uploaded.status_code == 200, uploaded.text
        assert uploaded.json()["bodySha256"] == hashlib.sha256(large).hexdigest()

        put = fetch(stack.proxy, token, "bucket", "/bucket/a%20key", method="PUT", content=large)
        assert put.status_code == 200, put.text
        assert (put.json()["unsignedPayload"], put.json()["bodyBytes"]) == (True, len(large))

        session = fetch(stack.proxy, token, "temporary", "/v1/items")
        assert session.status_code == 200, session.text
        assert "x-amz-security-token" in session.json()["signedHeaders"]

        # The service's refusal reaches the app as the service gave it, with the session token
        # that its canonical request repeats scrubbed, and nothing of the secret.
        refused = fetch(stack.proxy, token, "wrong", "/v1/items")
        assert refused.status_code == 403, refused.text
        error = json.loads(refused.text)
        assert error["__type"] == "SignatureDoesNotMatch"
        assert "\nx-amz-security-token:[redacted]\n" in error["CanonicalRequest"]
        for value in (WRONG.secret_access_key, WRONG.session_token, TEMPORARY.secret_access_key):
            assert value not in refused.text
            assert value not in str(refused.headers)
        # Every request reached its service once, and each verdict is the one above.
        assert dict(api_answers.answers) == {"OK": 5}
        assert dict(bucket_answers.answers) == {"OK": 1}
        assert dict(temporary_answers.answers) == {"OK": 1, "SignatureDoesNotMatch": 1}
