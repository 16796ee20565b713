"""What the auth kinds a header cannot carry cost a fetch, against bearer in the same run: a
client certificate (mTLS) to an upstream that requires one, and AWS Signature Version 4.

One proxy with the shared store, holding a table written here (gatehouse_dev.proxy_with_table:
the proxy's cost alone, no operator beside it on the two cores), and three nginx
upstreams answering the same small JSON body: plain HTTP, TLS, and TLS requiring a client
certificate from a CA made for the run (its own certificate signed by that private CA, given as
the connections' ``caBundle``). Like is compared with like (each row's ``like``): mTLS against
bearer over TLS to the same kind of upstream; SigV4 (its payload signed: the body hashed) against
bearer with the same small POST body; and bearer over plain HTTP as the usual baseline. wrk at 1
and CONNECTIONS connections through each in turn, ROUNDS times, each round in another order, and
each figure's median, with the proxy's CPU per request. The proxy keeps its upstream connections
alive, so a handshake is paid per new connection, not per request: what the rows compare is the
steady state. nginx checks no signature: the SigV4 row is the proxy's signing, not AWS's check.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import httpx

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.frames import Snapshot
from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import (
    AwsSigning,
    ConnectionRoute,
    Credential,
    Limits,
    UpstreamTls,
)
from gatehouse_dev import nginx
from gatehouse_dev.pki import CertificateAuthority
from gatehouse_dev.processes import cpu_seconds, free_port
from gatehouse_dev.proxy_with_table import TABLE, snapshot_of
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for

CONNECTIONS = 32
ROUNDS = 3
ROUND_SECONDS = 4
NAMESPACE = "bench-kinds"
APP_TOKEN = secrets.token_urlsafe(24)  # the bench app's, for this run
# A small JSON body (no "]]": it goes in a Lua long string), as an AWS API's request.
POST_BODY = '{"TableName":"bench","Key":{"id":{"S":"42"}},"ConsistentRead":true}'


@dataclass(frozen=True)
class Row:
    label: str
    alias: str  # the connection fetched through
    post: bool  # POST_BODY, else a GET
    like: str = ""  # the row it is compared with, like for like


BEARER = Row("bearer, GET, plain HTTP", "plain", post=False)
BEARER_TLS = Row("bearer, GET, over TLS (the vendor's private CA)", "tls", False, BEARER.label)
MTLS = Row("mTLS and bearer, GET (a client certificate)", "mtls", False, BEARER_TLS.label)
BEARER_POST = Row(f"bearer, POST of {len(POST_BODY)} bytes, plain HTTP", "plain", post=True)
SIGV4 = Row(
    f"AWS SigV4, POST of {len(POST_BODY)} bytes, payload signed", "sigv4", True, BEARER_POST.label
)
ROWS = (BEARER, BEARER_TLS, MTLS, BEARER_POST, SIGV4)
# Keys of AWS's documentation examples: nginx checks no signature.
AWS_KEYS = AwsKeys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")

Wrk = Callable[..., dict[str, float]]


def _tls_upstream(local: LocalGatehouse, ca: CertificateAuthority, mutual: bool) -> str:
    """An nginx upstream over TLS, its certificate signed by ``ca`` (which signs the clients it
    requires, if ``mutual``); its URL."""
    pair = ca.issue(f"upstream-{int(mutual)}", "upstream", hosts=("127.0.0.1",))
    tls_port = free_port()
    config = partial(
        nginx.tls_upstream_config,
        tls_port=tls_port,
        certificate=pair.cert_path,
        key=pair.key_path,
        client_ca=ca.cert_path if mutual else None,
    )
    local.start_nginx(f"nginx-upstream-tls-{int(mutual)}", config)
    return f"https://127.0.0.1:{tls_port}"


def snapshot(
    keyring: Keyring, origins: dict[str, str], ca: CertificateAuthority, client: bytes
) -> Snapshot:
    """The proxy's table: a connection per alias (bearer; ``mtls`` with its client certificate,
    ``sigv4`` signing instead), and one app linking them all."""
    limits = Limits(
        timeout_seconds=30,
        max_request_bytes=1024 * 1024,
        max_response_bytes=1024 * 1024,
        requests_per_minute=100_000,  # the schema's largest: no timed run reaches it
    )
    routes = []
    for alias, origin in origins.items():
        uid = f"uid-{alias}"
        credential, secret = Credential(type="bearer"), b"bench-bearer-token"
        if alias == "sigv4":
            aws = AwsSigning(region="us-east-1", service="dynamodb", payload="signed")
            credential, secret = Credential(type="awsSigV4", aws=aws), AWS_KEYS.stored().encode()
        token = keyring.encrypt(secret, credential.context(uid, origin))
        tls = None
        if origin.startswith("https:"):
            tls = UpstreamTls(ca_bundle=ca.cert_path.read_text())
        if alias == "mtls":
            certificate = keyring.encrypt(client, UpstreamTls.context(uid, origin))
            tls = UpstreamTls(ca_bundle=ca.cert_path.read_text(), client_certificate=certificate)
        routes.append(
            ConnectionRoute(
                key=f"{NAMESPACE}/{alias}",
                uid=uid,
                origin=origin,
                allowed_methods=frozenset({"GET", "POST"}),
                allowed_paths=("/",),
                credential=credential.model_copy(update={"encrypted": token}),
                limits=limits,
                tls=tls,
            )
        )
    return snapshot_of(routes, APP_TOKEN)


def measure(local: LocalGatehouse, wrk: Wrk) -> dict[tuple[str, int], dict[str, float]]:
    folder = local.workdir / "kinds-ca"
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(folder, "bench-vendor-ca")
    client = ca.issue("proxy-client", "gatehouse-proxy", client=True)
    plain = local.start_nginx("nginx-upstream", nginx.upstream_config).url
    origins = {
        "plain": plain,
        "tls": _tls_upstream(local, ca, mutual=False),
        "mtls": _tls_upstream(local, ca, mutual=True),
        "sigv4": plain,
    }
    local.start_store()
    table = local.workdir / "kinds-table.json"
    keyring = Keyring.parse(local.keyring_file.read_bytes())
    pem = client.cert_path.read_bytes() + client.key_path.read_bytes()
    table.write_text(snapshot(keyring, origins, ca, pem).model_dump_json())
    client.key_path.unlink()  # the proxy's copy is the table's, encrypted
    proxy = local.start_proxy(module="gatehouse_dev.proxy_with_table", settings={TABLE: str(table)})
    headers = {"Authorization": f"Bearer {APP_TOKEN}", "Content-Type": "application/json"}
    with httpx.Client(timeout=5, headers=headers) as http:
        for row in ROWS:
            wait_for(partial(_answers, http, proxy.url, row), timeout=30, what=f"{row.label}")
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for round_ in range(ROUNDS):
        for connections in (1, CONNECTIONS):
            for row in ROWS[round_ % len(ROWS) :] + ROWS[: round_ % len(ROWS)]:
                started = cpu_seconds(proxy.server.pid)
                result = wrk(
                    f"{proxy.url}/v1/fetch/{row.alias}/items",
                    connections,
                    headers,
                    seconds=ROUND_SECONDS,
                    body=POST_BODY if row.post else "",
                )
                if result["non_2xx"]:
                    # A refusal is cheaper than a fetch: the row would measure another thing.
                    raise RuntimeError(f"{row.label}: {result['non_2xx']:.0f} answers not 200")
                used = cpu_seconds(proxy.server.pid) - started
                result["cpu_us"] = used / (result["rps"] * ROUND_SECONDS) * 1e6
                runs.setdefault((row.label, connections), []).append(result)
    return {
        key: {figure: statistics.median(run[figure] for run in measured) for figure in measured[0]}
        for key, measured in runs.items()
    }


def _answers(http: httpx.Client, proxy: str, row: Row) -> bool:
    url = f"{proxy}/v1/fetch/{row.alias}/items"
    said = http.post(url, content=POST_BODY) if row.post else http.get(url)
    return said.status_code == 200


def table(results: dict[tuple[str, int], dict[str, float]]) -> str:
    lines = [
        "| connection | connections | req/s | p50 ms | p99 ms | proxy CPU µs a request "
        "| req/s vs bearer, plain HTTP, same method | req/s vs like for like |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for connections in (1, CONNECTIONS):
        for row in ROWS:
            result = results[(row.label, connections)]
            baseline = BEARER_POST if row.post else BEARER
            plain = result["rps"] / results[(baseline.label, connections)]["rps"]
            like = ""
            if row.like:
                like = f"{result['rps'] / results[(row.like, connections)]['rps']:.2f}"
            lines.append(
                f"| {row.label} | {connections} | {result['rps']:,.0f} | {result['p50']:.2f} "
                f"| {result['p99']:.2f} | {result['cpu_us']:.0f} | {plain:.2f} | {like} |"
            )
    return "\n".join(lines)
