"""ConnectionTests run through the proxy's own path; passing ones become redacted samples that the
app-build hand-off serves; nothing anyone can read afterwards holds a secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Member,
    apply,
    connection,
    connection_test,
    data_app,
    finished,
    get,
    project_members,
    run_cli,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

SECRET = "sk-live-0123456789abcdef"


def public_connection(cluster: Cluster, stack: Stack, namespace: str, **spec: Any) -> None:
    """A connection without auth to the echo upstream, Ready."""
    apply(cluster, namespace, connection("vendor", stack.upstream, {"type": "none"}, **spec))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")


def try_apply(cluster: Cluster, namespace: str, document: dict[str, Any]) -> str:
    """kubectl apply's error output ('' when it was applied)."""
    done = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps(document), check=False
    )
    return "" if done.returncode == 0 else done.stderr


def passed(body: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in body["status"]["conditions"] if c["type"] == "Passed")


AUTHS = {
    "none": ({"type": "none"}, "", ""),
    "api-key-header": (API_KEY_AUTH, "api-key", SECRET),
    "api-key-query": (
        {
            "type": "apiKey",
            "apiKey": {"name": "appid", "in": "query"},
            "secretRef": {"name": "vendor", "key": "api-key"},
        },
        "api-key",
        SECRET,
    ),
    "bearer": (
        {"type": "bearer", "secretRef": {"name": "vendor", "key": "api-key"}},
        "api-key",
        SECRET,
    ),
    "google": (
        {
            "type": "googleServiceAccount",
            "googleServiceAccount": {"scopes": ["https://www.googleapis.com/auth/bigquery"]},
            "secretRef": {"name": "vendor", "key": "key.json"},
        },
        "key.json",
        "",
    ),
}


@pytest.mark.parametrize("auth_name", sorted(AUTHS))
def test_each_auth_type_through_the_proxy(
    cluster: Cluster, stack: Stack, namespace: str, auth_name: str
) -> None:
    auth, key, value = AUTHS[auth_name]
    if key == "key.json":
        value = stack.service_account_key.decode()
    if key:
        apply(cluster, namespace, secret("vendor", **{key: value}))
    apply(cluster, namespace, connection("vendor", stack.upstream, auth))
    apply(cluster, namespace, connection_test("probe", "vendor", path="/echo/ping?q=1"))
    body = finished(cluster, namespace, "probe")
    assert passed(body)["reason"] == "Passed", passed(body)
    response = body["status"]["response"]
    assert response["statusCode"] == 200
    assert response["contentType"].startswith("application/json")
    echoed = json.loads(response["body"])
    assert echoed["path"] == "/echo/ping"
    headers, query = echoed["headers"], echoed["query"]
    # What the test result keeps: the echoed credential, redacted.
    kept = {
        "none": "authorization" not in headers and "x-api-key" not in headers,
        "api-key-header": headers.get("x-api-key") == "[redacted]",
        "api-key-query": query == "q=1&appid=[redacted]",
        "bearer": headers.get("authorization") == "[redacted]",
        "google": headers.get("authorization") == "[redacted]",
    }
    assert kept[auth_name], echoed
    # What the upstream received, asked of it directly: the credential itself.
    seen = httpx.get(f"{stack.upstream}/_received/{echoed['id']}", timeout=5).json()
    received = seen["headers"]
    if auth_name == "google":
        access_token = received["authorization"].removeprefix("Bearer ")
        info = httpx.get(
            f"{stack.token_endpoint}/tokeninfo", params={"access_token": access_token}, timeout=5
        )
        assert info.json()["scope"] == "https://www.googleapis.com/auth/bigquery"
    else:
        sent = {
            "none": "authorization" not in received and "x-api-key" not in received,
            "api-key-header": received.get("x-api-key") == SECRET,
            "api-key-query": seen["query"] == f"q=1&appid={SECRET}",
            "bearer": received.get("authorization") == f"Bearer {SECRET}",
        }
        assert sent[auth_name], seen
    if value:
        assert value.strip() not in json.dumps(body)


def test_a_passing_test_saved_as_sample_is_redacted_and_capped(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}))
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, allowedMethods=["GET", "POST"]),
    )
    payload = {
        "token": "t-upstream-session",
        "note": f"the key is {SECRET}",
        # Values no uid can hold (a uuid is hex and dashes): the scan below finds only leaks.
        "items": [{"id": n, "client_secret": f"zz-client-{n}"} for n in range(120)],
        "nested": {"deeper": {"Access-Token": "zz-access-1", "kept": "visible"}},
    }
    sample_test = connection_test(
        "sample",
        "vendor",
        method="POST",
        path="/echo/orders?token=typed-by-the-tester",
        body=payload,
        saveAsSample={"label": "An order"},
    )
    # A credential-like value typed into the path is refused at admission, unrepeated, so it
    # never reaches the stored spec; the page and `gatehouse test` replace it first, as here.
    refused = try_apply(cluster, namespace, sample_test)
    assert "spec.path: the query gives a value to token; a ConnectionTest" in refused
    assert "typed-by-the-tester" not in refused
    assert get(cluster, namespace, "connectiontest/sample") is None
    sample_test["spec"]["path"] = "/echo/orders?token=[redacted]"
    apply(cluster, namespace, sample_test)
    body = finished(cluster, namespace, "sample")
    assert passed(body)["status"] == "True"
    assert body["status"]["sample"] == "sample"
    stored = get(cluster, namespace, "connectionsample/sample")
    assert stored is not None
    text = json.dumps(stored)
    for leak in (
        SECRET,
        "t-upstream-session",
        "zz-client-7",
        "zz-access-1",
        "typed-by-the-tester",
    ):
        assert leak not in text, leak
    assert "typed-by-the-tester" not in json.dumps(body["status"])
    # Owned by the connection, so deleted with it.
    (owner,) = stored["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("ExternalConnection", "vendor")
    sample = stored["spec"]
    assert (sample["connection"], sample["label"]) == ("vendor", "An order")
    # The request is kept too, its query and body redacted and capped as the answer is, so the
    # app generator sees an example POST body.
    request = sample["request"]
    assert (request["method"], request["path"]) == ("POST", "/echo/orders?token=[redacted]")
    assert request["body"]["token"] == "[redacted]"
    assert request["body"]["note"] == "the key is [redacted]"
    assert len(request["body"]["items"]) == 50
    assert request["body"]["nested"]["deeper"]["kept"] == "visible"
    echoed = sample["body"]["json"]
    assert echoed["token"] == "[redacted]"
    assert echoed["note"] == "the key is [redacted]"
    assert len(echoed["items"]) == 50
    assert echoed["items"][3] == {"id": 3, "client_secret": "[redacted]"}
    assert echoed["nested"]["deeper"] == {"Access-Token": "[redacted]", "kept": "visible"}
    assert sample["body"]["headers"]["x-api-key"] == "[redacted]"


def test_refusals_are_results_and_bad_methods_are_refused_at_admission(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    public_connection(cluster, stack, namespace, allowedPaths=["/echo/v1"])
    refusals = {
        "spec.method: POST is not one of the connection's allowedMethods (GET)": connection_test(
            "post", "vendor", method="POST", body={"a": 1}
        ),
        "spec.body: a GET test cannot have a body": connection_test(
            "get-body", "vendor", body={"a": 1}
        ),
        "spec.connection: no ExternalConnection 'absent'": connection_test("nowhere", "absent"),
        "spec.path: the query gives a value to api_key; a ConnectionTest": connection_test(
            "typed", "vendor", path="/echo/v1?api_key=typed-by-me"
        ),
    }
    for message, document in refusals.items():
        assert message in try_apply(cluster, namespace, document)

    apply(
        cluster,
        namespace,
        connection_test("outside", "vendor", path="/echo/v2", saveAsSample={"label": "x"}),
        connection_test("traversal", "vendor", path="/echo/v1/%2e%2e/v2"),
    )
    outside = finished(cluster, namespace, "outside")
    assert passed(outside)["reason"] == "PathNotAllowed"
    assert "response" not in outside["status"]
    assert not any(c["type"] == "SampleSaved" for c in outside["status"]["conditions"])
    assert passed(finished(cluster, namespace, "traversal"))["reason"] == "PathTraversal"
    events = cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector=involvedObject.name=outside",
        "-o",
        "json",
    )
    assert any(e["reason"] == "PathNotAllowed" for e in json.loads(events.stdout)["items"])


def test_a_tests_request_reaches_the_upstream_once_though_it_waited_for_a_place(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """A payment API's POST: twelve tests of one namespace against an upstream that answers
    in 10 s, on two replicas that run 4 of a namespace's tests at once. The tests that wait for
    a place start when one frees; none is cancelled in flight and sent again (before: a test
    that waited was cancelled at the operator's deadline, 17 s, and sent again)."""
    public_connection(
        cluster, stack, namespace, allowedMethods=["POST"], limits={"timeoutSeconds": 12}
    )
    run = uuid.uuid4().hex[:8]
    charges = [f"/slow?seconds=10&charge={run}-{n}" for n in range(12)]
    apply(
        cluster,
        namespace,
        *(
            connection_test(f"charge-{n}", "vendor", method="POST", path=path, body={"cents": 1})
            for n, path in enumerate(charges)
        ),
    )
    results = [finished(cluster, namespace, f"charge-{n}", timeout=90) for n in range(12)]
    arrivals = httpx.get(f"{stack.upstream}/_arrivals", timeout=5).json()
    sent = {path: arrivals.get(f"POST {path}", 0) for path in charges}
    print("POSTs per test at the upstream:", sorted(sent.values()))
    assert max(sent.values()) == 1, sent
    # Each reports the upstream's answer.
    assert [passed(body)["reason"] for body in results] == ["Passed"] * 12


def test_upstream_errors_fail_the_test_and_are_not_saved(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    public_connection(cluster, stack, namespace)
    missing = connection_test(
        "missing", "vendor", path="/nothing-here", saveAsSample={"label": "x"}
    )
    apply(cluster, namespace, missing)
    body = finished(cluster, namespace, "missing")
    assert passed(body)["reason"] == "UpstreamStatus"
    assert body["status"]["response"]["statusCode"] == 404
    saved = next(c for c in body["status"]["conditions"] if c["type"] == "SampleSaved")
    assert (saved["status"], saved["reason"]) == ("False", "TestFailed")


def test_at_most_twenty_samples_per_connection(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    # 21 tests at once: a burst the default rate (60 a minute: 10 at once) would refuse.
    public_connection(cluster, stack, namespace, limits={"requestsPerMinute": 600})
    names = [f"s{n:02d}" for n in range(21)]
    apply(
        cluster,
        namespace,
        *(connection_test(n, "vendor", path="/echo/", saveAsSample={"label": n}) for n in names),
    )
    outcomes = []
    for name in names:
        conditions = finished(cluster, namespace, name)["status"]["conditions"]
        outcomes.append(next(c["reason"] for c in conditions if c["type"] == "SampleSaved"))
    assert sorted(outcomes) == ["SampleLimitReached"] + ["Saved"] * 20
    assert len(samples_of(cluster, namespace, "vendor")) == 20


def test_finished_tests_are_deleted_after_their_ttl(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    public_connection(cluster, stack, namespace)
    apply(cluster, namespace, connection_test("brief", "vendor", ttlSecondsAfterFinished=0))
    finished(cluster, namespace, "brief")
    wait_for(
        lambda: get(cluster, namespace, "connectiontest/brief") is None,
        timeout=45,
        interval=0.5,
        what="the expired test's deletion",
    )


def test_the_cli_runs_a_test_and_exits_by_its_outcome(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    public_connection(cluster, stack, namespace, allowedPaths=["/echo"])

    def gatehouse(*args: str) -> subprocess.CompletedProcess[str]:
        return gatehouse_cli(cluster, "test", "vendor", "-n", namespace, *args)

    ok = gatehouse("--path", "/echo/hello", "--save-sample", "Hello")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("PASSED Passed: GET /echo/hello answered 200")
    assert "saved as sample" in ok.stdout
    failed = gatehouse("--path", "/elsewhere")
    assert failed.returncode == 1
    assert failed.stdout.startswith("FAILED PathNotAllowed")
    refused = gatehouse("-X", "POST", "--data", '{"a": 1}')
    assert refused.returncode == 2
    assert "allowedMethods" in refused.stderr
    as_json = json.loads(gatehouse("--path", "/echo/x", "-o", "json").stdout)
    assert as_json["status"]["response"]["statusCode"] == 200


def gatehouse_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(cluster, "gatehouse_operator.cli.gatehouse", *args)


def test_kubectl_runs_the_cli_as_its_gatehouse_plugin(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The installed kubectl-gatehouse on PATH, found and run by a real kubectl; the cluster
    named by --kubeconfig alone ($KUBECONFIG points nowhere)."""
    public_connection(cluster, stack, namespace, allowedPaths=["/echo"])
    kubectl = str(cluster.binaries.kubectl)
    env = {
        **os.environ,
        "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ["PATH"])),
        "KUBECONFIG": "/nonexistent",
    }

    def plugin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, *args], capture_output=True, text=True, timeout=60, check=False, env=env
        )

    assert "kubectl-gatehouse" in plugin("plugin", "list").stdout
    ran = plugin(
        "gatehouse", "test", "vendor", "-n", namespace, "--kubeconfig", str(cluster.kubeconfig),
        "--path", "/echo/plugin", "-o", "yaml",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert yaml.safe_load(ran.stdout)["status"]["response"]["statusCode"] == 200
    assert plugin("gatehouse", "version").stdout.startswith("gatehouse ")
    # kubectl's own completion asks kubectl_complete-gatehouse.
    assert plugin("__complete", "gatehouse", "service", "de").stdout == "deploy\n:4\n"


def test_a_passing_test_is_saved_as_a_sample_after_its_result_was_seen(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}))
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, linkPolicy="AdminsOnly"),
    )
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    members = project_members(cluster, namespace)
    tests = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connectiontests"
    for name, path in (("seen", "/echo/seen"), ("cli", "/echo/cli"), ("api", "/echo/api")):
        apply(cluster, namespace, connection_test(name, "vendor", path=path))
    apply(cluster, namespace, connection_test("broken", "vendor", path="/status/500"))
    for name in ("seen", "cli", "api", "broken"):
        body = finished(cluster, namespace, name)
        assert SECRET not in json.dumps(body)
    assert finished(cluster, namespace, "seen")["status"]["sampleBody"]["path"] == "/echo/seen"

    # kubectl, the CLI and the service API ask in the same way: the annotation, which the operator
    # removes once it answered. A refused request can be asked again, and Passed stays.
    def annotate(test: str, label: str) -> dict[str, Any]:
        cluster.kubectl(
            "annotate",
            "--overwrite",
            "-n",
            namespace,
            f"connectiontest/{test}",
            f"gatehouse.dev/save-as-sample={label}",
        )

        def answered() -> dict[str, Any] | None:
            body = get(cluster, namespace, f"connectiontest/{test}") or {}
            asked = "gatehouse.dev/save-as-sample" in body["metadata"].get("annotations", {})
            return None if asked else body

        return wait_for(answered, timeout=20, interval=0.2, what=f"the answer for {test}")

    refused = annotate("seen", "x" * 201)
    assert condition_of(refused, "SampleSaved")["reason"] == "InvalidLabel"
    assert condition_of(refused, "Passed")["status"] == "True"
    accepted = annotate("seen", "Seen")
    assert accepted["status"]["sample"] == "seen"
    assert condition_of(accepted, "SampleSaved")["reason"] == "Saved"
    assert condition_of(accepted, "Passed")["status"] == "True"
    # The label is optional, as in the reference.
    saved = gatehouse_cli(cluster, "save-sample", "cli", "-n", namespace)
    assert (saved.returncode, saved.stdout.strip()) == (0, "saved as sample 'cli'"), saved.stderr
    by_api = httpx.post(
        f"{tests}/api/sample", json={"label": "From the API"}, headers=members["admin"].headers()
    )
    assert by_api.status_code == 201, by_api.text
    assert by_api.json()["sample"] == "api"
    again = httpx.post(f"{tests}/api/sample", json={"label": "Again"}, **_as(members["admin"]))
    assert (again.status_code, again.json()["reason"]) == (409, "AlreadySaved")

    unsaved = gatehouse_cli(cluster, "save-sample", "broken", "--label", "No", "-n", namespace)
    assert unsaved.returncode == 1
    assert unsaved.stdout.startswith("NOT SAVED TestFailed"), unsaved.stdout
    as_yaml = gatehouse_cli(
        cluster, "save-sample", "broken", "--label", "No", "-n", namespace, "-o", "yaml"
    )
    assert as_yaml.returncode == 1
    assert yaml.safe_load(as_yaml.stdout) | {"message": ""} == {
        "saved": False,
        "sample": "",
        "reason": "TestFailed",
        "message": "",
    }
    failed = httpx.post(f"{tests}/broken/sample", json={"label": "No"}, **_as(members["admin"]))
    assert (failed.status_code, failed.json()["reason"]) == (409, "TestFailed")
    too_long = httpx.post(f"{tests}/api/sample", json={"label": "x" * 201}, **_as(members["admin"]))
    assert too_long.status_code == 400
    assert too_long.json()["error"]["message"].startswith("label:")
    assert (
        httpx.post(f"{tests}/gone/sample", json={"label": "x"}, **_as(members["admin"])).status_code
        == 404
    )
    for member in ("builder", "viewer", "nobody"):
        denied = httpx.post(f"{tests}/seen/sample", json={"label": "x"}, **_as(members[member]))
        assert denied.status_code == 403, member

    detail_url = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections/vendor"
    detail = httpx.get(detail_url, **_as(members["admin"])).json()
    assert {(s["id"], s["label"]) for s in detail["samples"]} == {
        ("seen", "Seen"),
        ("cli", ""),
        ("api", "From the API"),
    }
    assert detail["canManage"] is True
    assert detail["auth"]["secretRef"] == {"name": "vendor", "key": "api-key"}
    assert SECRET not in json.dumps(detail)
    # AdminsOnly: a builder is told nothing of it, not even that it exists.
    assert httpx.get(detail_url, **_as(members["builder"])).status_code == 404
    assert httpx.delete(f"{detail_url}/samples/cli", **_as(members["builder"])).status_code == 403
    assert httpx.delete(f"{detail_url}/samples/cli", **_as(members["admin"])).status_code == 204
    assert httpx.delete(f"{detail_url}/samples/cli", **_as(members["admin"])).status_code == 404
    assert samples_of(cluster, namespace, "vendor") == {"seen", "api"}

    # What a tester types is kept scrubbed in the ConnectionTest itself.
    run = httpx.post(
        f"{detail_url}/tests",
        json={"method": "GET", "path": "/echo/typed?api_key=typed-by-me&page=2"},
        **_as(members["admin"]),
    )
    assert run.status_code == 201, run.text
    made = get(cluster, namespace, f"connectiontest/{run.json()['name']}")
    assert made is not None
    assert made["spec"]["path"] == "/echo/typed?api_key=[redacted]&page=2"
    assert "typed-by-me" not in json.dumps(made)


def samples_of(cluster: Cluster, namespace: str, connection: str) -> set[str]:
    listing = cluster.kubectl("get", "connectionsamples", "-n", namespace, "-o", "json").stdout
    return {
        item["metadata"]["name"]
        for item in json.loads(listing)["items"]
        if item["spec"]["connection"] == connection
    }


def condition_of(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in body["status"]["conditions"] if c["type"] == kind)


def _as(member: Member) -> dict[str, Any]:
    return {"headers": member.headers(), "timeout": 40}


def test_the_build_spec_hands_off_connections_samples_and_image_policy(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    members = project_members(cluster, namespace)
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}))
    apply(
        cluster,
        namespace,
        connection(
            "vendor",
            stack.upstream,
            API_KEY_AUTH,
            allowedPaths=["/echo"],
            instructions="Paginate with ?page=.",
            headers=[{"name": "X-Api-Version", "value": "2024-06-01"}],
            allowedContentTypes=["application/json"],
        ),
        connection("tiles", "http://127.0.0.1:18099", {"type": "none"}, allowPublicImages=True),
    )
    apply(
        cluster,
        namespace,
        connection_test("shape", "vendor", path="/echo/items", saveAsSample={"label": "Items"}),
    )
    finished(cluster, namespace, "shape")
    apply(cluster, namespace, data_app("sales", {"api": "vendor", "map": "tiles"}))

    url = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/dataapps/sales/build-spec"
    reply = httpx.get(url, headers=members["builder"].headers(), timeout=10)
    assert reply.status_code == 200, reply.text
    spec = reply.json()
    assert SECRET not in reply.text
    by_alias = {link["alias"]: link for link in spec["connections"]}
    api = by_alias["api"]
    assert api["origin"] == stack.upstream
    assert api["allowedMethods"] == ["GET"]
    assert api["allowedPaths"] == ["/echo"]
    assert api["instructions"] == "Paginate with ?page=."
    assert api["fetchPath"] == "/v1/fetch/api/"
    # What the proxy adds and allows, so the app neither sends those headers nor expects
    # another type.
    assert api["headers"] == [{"name": "X-Api-Version", "value": "2024-06-01"}]
    assert api["allowedContentTypes"] == ["application/json"]
    assert [sample["label"] for sample in api["samples"]] == ["Items"]
    assert api["samples"][0]["body"]["headers"]["x-api-key"] == "[redacted]"
    assert spec["imagePolicy"] == {
        "origins": ["http://127.0.0.1:18099"],
        "imgSrc": "'self' http://127.0.0.1:18099",
    }
    assert httpx.get(url, headers=members["nobody"].headers(), timeout=10).status_code == 403
    missing = url.replace("/sales/", "/absent/")
    assert httpx.get(missing, headers=members["builder"].headers(), timeout=10).status_code == 404

    # The connection endpoints say the same, and what linking it lets apps do.
    connections = f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections"
    detail = httpx.get(f"{connections}/vendor", **_as(members["builder"])).json()
    assert detail["headers"] == [{"name": "X-Api-Version", "value": "2024-06-01"}]
    assert detail["allowedContentTypes"] == ["application/json"]
    warning = "Apps linked to this connection can send any data they can query to {}."
    assert detail["connection"]["linkWarning"] == warning.format(stack.upstream)
    listed = httpx.get(connections, **_as(members["builder"])).json()["items"]
    warnings = {item["name"]: item["linkWarning"] for item in listed}
    assert warnings["tiles"] == warning.format("http://127.0.0.1:18099")


def test_the_openapi_document_lists_every_endpoint(stack: Stack) -> None:
    document = httpx.get(f"{stack.local.api_url}/openapi.json", timeout=10).json()
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == {
        "/api/v1/namespaces/{namespace}/connections",
        "/api/v1/namespaces/{namespace}/connections/{name}/tests",
        "/api/v1/namespaces/{namespace}/connection-drafts/tests",
        "/api/v1/namespaces/{namespace}/connections/{name}",
        "/api/v1/namespaces/{namespace}/connections/{name}/samples/{sample}",
        "/api/v1/namespaces/{namespace}/connections/{name}/requests",
        "/api/v1/namespaces/{namespace}/connections/{name}/usage",
        "/api/v1/namespaces/{namespace}/connections/{name}/connect",
        "/api/v1/namespaces/{namespace}/connections/{name}/grants",
        "/api/v1/namespaces/{namespace}/connections/{name}/cache/purge",
        "/api/v1/namespaces/{namespace}/dataapps/{name}/requests",
        "/api/v1/namespaces/{namespace}/charttypes/{name}/requests",
        "/api/v1/namespaces/{namespace}/connectiontests/{name}/sample",
        "/api/v1/namespaces/{namespace}/dataapps/{name}/build-spec",
        "/api/v1/namespaces/{namespace}/charttypes/{name}/build-spec",
        "/api/v2/projects/{projectUuid}/defaults",
    }
    assert "ConnectionList" in document["components"]["schemas"]
