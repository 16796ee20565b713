"""No service API response, status, Event, sample or log line holds a secret: exercise every
path that handles one (good and broken credentials, passing and failing tests, errors), then scan
everything a user or an operator of the cluster can read."""

from __future__ import annotations

import json

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    project_members,
    received,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

API_KEY = "leak-canary-api-key-4f1c"
BEARER = "leak-canary-bearer-9e2d"
BROKEN_KEY_FILE = '{"type": "service_account", "private_key": "leak-canary-private-7a3b"}'
# Temporary AWS keys: the secret access key signs and is never sent, the session token is sent
# in X-Amz-Security-Token (the access key id is sent in every signature: not secret).
AWS_SECRET_ACCESS_KEY = "leak-canary-aws-secret/5d8e+Q"
AWS_SESSION_TOKEN = "leak-canary-aws-session-3b6f"
AWS_KEYS = json.dumps(
    {
        "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",
        "SecretAccessKey": AWS_SECRET_ACCESS_KEY,
        "SessionToken": AWS_SESSION_TOKEN,
    }
)
BROKEN_AWS_KEYS = (
    '{"AccessKeyId": "leak-canary-aws-id-2c4a", "SecretAccessKey": "leak-canary-8d1e"}'
)
CANARIES = (
    API_KEY,
    BEARER,
    "leak-canary-private-7a3b",
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    "leak-canary-aws-id-2c4a",
    "leak-canary-8d1e",
)
_AWS_SECTION = {"region": "us-east-1", "service": "execute-api"}


def test_nothing_readable_holds_a_secret(cluster: Cluster, stack: Stack, namespace: str) -> None:
    members = project_members(cluster, namespace)
    admin = members["admin"].headers()
    apply(
        cluster,
        namespace,
        secret("vendor", **{"api-key": API_KEY}),
        secret("payments", token=BEARER),
        secret("google", **{"key.json": BROKEN_KEY_FILE}),
        secret("aws", **{"aws-keys.json": AWS_KEYS}),
        secret("awsbroken", **{"aws-keys.json": BROKEN_AWS_KEYS}),
    )
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, allowedMethods=["GET", "POST"]),
        connection(
            "payments",
            stack.upstream,
            {"type": "bearer", "secretRef": {"name": "payments", "key": "token"}},
        ),
        connection(
            "google",
            stack.upstream,
            {
                "type": "googleServiceAccount",
                "googleServiceAccount": {"scopes": ["email"]},
                "secretRef": {"name": "google", "key": "key.json"},
            },
        ),
        *(
            connection(
                name,
                stack.upstream,
                {
                    "type": "awsSigV4",
                    "awsSigV4": _AWS_SECTION,
                    "secretRef": {"name": name, "key": "aws-keys.json"},
                },
            )
            for name in ("aws", "awsbroken")
        ),
        data_app("sales", {"api": "vendor", "pay": "payments", "gcp": "google", "aws": "aws"}),
    )
    wait_condition(cluster, namespace, "externalconnection/google", "False")
    wait_condition(cluster, namespace, "externalconnection/awsbroken", "False")
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    wait_condition(cluster, namespace, "externalconnection/aws", "True")

    # App traffic, as apps make it. The echo upstream sends the injected key back in every answer.
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    assert fetch(stack.proxy, token, "api", "/echo/a").status_code == 200
    assert fetch(stack.proxy, token, "gcp", "/echo/a").status_code == 503
    # A secret an app puts in a query value, as some vendors want it: the inspector's records
    # and the audit lines keep the parameter's name only.
    assert fetch(stack.proxy, token, "api", f"/echo/q?api_key={BEARER}").status_code == 200
    # ...or in a path segment's parameters (Java's ;jsessionid=): the name only, too.
    assert fetch(stack.proxy, token, "api", f"/echo/m;sid={BEARER};{BEARER}").status_code == 200
    # A signed request: the upstream got the signature and the session token; the echo that
    # came back through the proxy has neither, and nothing readable holds either.
    signed = fetch(stack.proxy, token, "aws", "/echo/signed")
    headers = received(stack.upstream, signed)["headers"]
    signature = headers["authorization"].rpartition("Signature=")[2]
    assert len(signature) == 64
    assert headers["x-amz-security-token"] == AWS_SESSION_TOKEN
    assert signature not in signed.text
    assert AWS_SESSION_TOKEN not in signed.text

    api = f"{stack.local.api_url}/api/v1/namespaces/{namespace}"
    replies = [
        httpx.get(f"{api}/connections", headers=admin, timeout=10),
        httpx.get(f"{api}/dataapps/sales/build-spec", headers=admin, timeout=10),
        httpx.get(f"{api}/connections/vendor/requests", headers=admin, timeout=10),
        httpx.get(f"{api}/dataapps/sales/requests", headers=admin, timeout=10),
        httpx.post(
            f"{api}/connections/vendor/tests",
            json={
                "method": "POST",
                "path": "/echo/x",
                "body": {"hello": "world"},
                "saveAsSample": {"label": "echo"},
            },
            headers=admin,
            timeout=60,
        ),
        httpx.post(
            f"{api}/connections/payments/tests", json={"path": "/echo/y"}, headers=admin, timeout=60
        ),
        httpx.post(
            f"{api}/connections/google/tests", json={"path": "/echo/z"}, headers=admin, timeout=90
        ),
        httpx.post(
            f"{api}/connections/vendor/tests", json={"method": "TRACE"}, headers=admin, timeout=10
        ),
        httpx.post(
            f"{api}/connections/vendor/tests", json={"method": "DELETE"}, headers=admin, timeout=10
        ),
        httpx.post(
            f"{api}/connections/aws/tests", json={"path": "/echo/w"}, headers=admin, timeout=60
        ),
        httpx.post(
            f"{api}/connections/awsbroken/tests",
            json={"path": "/echo/w"},
            headers=admin,
            timeout=60,
        ),
    ]
    statuses = [reply.status_code for reply in replies]
    assert statuses == [200, 200, 200, 200, 201, 201, 201, 400, 422, 201, 201], [
        r.text for r in replies
    ]
    assert "/echo/q?api_key=*" in replies[2].text
    assert "/echo/m;sid=*;*" in replies[2].text
    assert replies[4].json()["passed"] is True
    assert replies[4].json()["sample"]
    assert replies[6].json()["reason"] == "InvalidServiceAccountKey"
    assert replies[9].json()["passed"] is True
    assert replies[10].json()["reason"] == "InvalidAwsKeys"
    # The signature of the test's own request, as the upstream received it.
    echoed = json.loads(replies[9].json()["response"]["body"])
    test_headers = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    test_signature = test_headers["headers"]["authorization"].rpartition("Signature=")[2]

    readable = [reply.text for reply in replies]
    for resources in (
        "externalconnections,dataapps,connectiontests",
        "connectionsamples",
        "events",
    ):
        readable.append(cluster.kubectl("get", resources, "-n", namespace, "-o", "json").stdout)
    for log in sorted((stack.local.workdir / "logs").glob("*.log")):
        readable.append(log.read_text(errors="replace"))
    for text in readable:
        for canary in (*CANARIES, signature, test_signature):
            assert canary not in text
    # The sample was saved and is readable, only without the secret.
    samples = json.loads(readable[len(replies) + 1])["items"]
    assert any(item["spec"]["connection"] == "vendor" for item in samples)
