"""What the auth kinds a header cannot carry cost a fetch, against bearer in the same run: a
client certificate (mTLS) to an upstream that requires one.

One proxy with the shared store, holding a table written here (gatehouse_dev.proxy_with_table:
the operator does not compile ``spec.tls`` into the table on this branch yet), and three nginx
upstreams answering the same small JSON body: plain HTTP, TLS, and TLS requiring a client
certificate from a CA made for the run (its own certificate signed by that private CA, given as
the connections' ``caBundle``). Every connection injects the same bearer token; like is compared
with like: mTLS against bearer over TLS to the same kind of upstream, and bearer over plain HTTP
as the usual baseline. wrk at 1 and CONNECTIONS connections through each in turn, ROUNDS times,
each round in another order, and each figure's median, with the proxy's CPU per request. The
proxy keeps its upstream connections alive, so a handshake is paid per new connection, not per
request: what the rows compare is the steady state.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Callable
from functools import partial

import httpx

from gatehouse_contract.frames import AppEntry, ConnectionEntry, Snapshot
from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import (
    AppRoute,
    ConnectionRoute,
    Credential,
    Limits,
    UpstreamTls,
    entry_digest,
    token_sha256,
)
from gatehouse_dev import nginx
from gatehouse_dev.pki import CertificateAuthority
from gatehouse_dev.processes import cpu_seconds, free_port
from gatehouse_dev.proxy_with_table import TABLE
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for

CONNECTIONS = 32
ROUNDS = 3
ROUND_SECONDS = 4
NAMESPACE = "bench-kinds"
APP_TOKEN = secrets.token_urlsafe(24)  # the bench app's, for this run
BEARER = "bearer, plain HTTP"
BEARER_TLS = "bearer over TLS (the vendor's private CA)"
MTLS = "bearer over mTLS (a client certificate, the vendor's private CA)"
LABELS = (BEARER, BEARER_TLS, MTLS)
ALIASES = {BEARER: "plain", BEARER_TLS: "tls", MTLS: "mtls"}

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
    """The proxy's table: a bearer connection per alias, ``mtls`` with its client certificate,
    and one app linking them all."""
    limits = Limits(
        timeout_seconds=30,
        max_request_bytes=1024 * 1024,
        max_response_bytes=1024 * 1024,
        requests_per_minute=100_000,  # the schema's largest: no timed run reaches it
    )
    routes = []
    for alias, origin in origins.items():
        uid = f"uid-{alias}"
        credential = Credential(type="bearer")
        token = keyring.encrypt(b"bench-bearer-token", credential.context(uid, origin))
        tls = None
        if alias != "plain":
            tls = UpstreamTls(ca_bundle=ca.cert_path.read_text())
        if alias == "mtls":
            certificate = keyring.encrypt(client, UpstreamTls.context(uid, origin))
            tls = UpstreamTls(ca_bundle=ca.cert_path.read_text(), client_certificate=certificate)
        routes.append(
            ConnectionRoute(
                key=f"{NAMESPACE}/{alias}",
                uid=uid,
                origin=origin,
                allowed_methods=frozenset({"GET"}),
                allowed_paths=("/",),
                credential=credential.model_copy(update={"encrypted": token}),
                limits=limits,
                tls=tls,
            )
        )
    app = AppRoute(
        key=f"{NAMESPACE}/DataApp/bench",
        token_sha256=token_sha256(APP_TOKEN),
        uid="uid-bench",
        links={route.key.partition("/")[2]: route.key for route in routes},
    )
    digest = entry_digest("app", app.key, 1)
    for route in routes:
        digest ^= entry_digest("connection", route.key, 1)
    return Snapshot(
        version=1,
        digest=f"{digest:x}",
        connections=tuple(ConnectionEntry(rev=1, route=route) for route in routes),
        apps=(AppEntry(rev=1, route=app),),
    )


def measure(local: LocalGatehouse, wrk: Wrk) -> dict[tuple[str, int], dict[str, float]]:
    folder = local.workdir / "kinds-ca"
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(folder, "bench-vendor-ca")
    client = ca.issue("proxy-client", "gatehouse-proxy", client=True)
    origins = {
        "plain": local.start_nginx("nginx-upstream", nginx.upstream_config).url,
        "tls": _tls_upstream(local, ca, mutual=False),
        "mtls": _tls_upstream(local, ca, mutual=True),
    }
    local.start_store()
    table = local.workdir / "kinds-table.json"
    keyring = Keyring.parse(local.keyring_file.read_bytes())
    pem = client.cert_path.read_bytes() + client.key_path.read_bytes()
    table.write_text(snapshot(keyring, origins, ca, pem).model_dump_json())
    client.key_path.unlink()  # the proxy's copy is the table's, encrypted
    proxy = local.start_proxy(module="gatehouse_dev.proxy_with_table", settings={TABLE: str(table)})
    headers = {"Authorization": f"Bearer {APP_TOKEN}"}
    urls = {label: f"{proxy.url}/v1/fetch/{alias}/items" for label, alias in ALIASES.items()}
    with httpx.Client(timeout=5, headers=headers) as http:
        for label in LABELS:
            wait_for(partial(_answers, http, urls[label]), timeout=30, what=f"{label} routed")
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for round_ in range(ROUNDS):
        for connections in (1, CONNECTIONS):
            for label in LABELS[round_ % 3 :] + LABELS[: round_ % 3]:
                started = cpu_seconds(proxy.server.pid)
                result = wrk(urls[label], connections, headers, seconds=ROUND_SECONDS)
                if result["non_2xx"]:
                    # A refusal is cheaper than a fetch: the row would measure another thing.
                    raise RuntimeError(f"{label}: {result['non_2xx']:.0f} answers not 200")
                used = cpu_seconds(proxy.server.pid) - started
                result["cpu_us"] = used / (result["rps"] * ROUND_SECONDS) * 1e6
                runs.setdefault((label, connections), []).append(result)
    return {
        key: {figure: statistics.median(run[figure] for run in measured) for figure in measured[0]}
        for key, measured in runs.items()
    }


def _answers(http: httpx.Client, url: str) -> bool:
    return http.get(url).status_code == 200


def table(results: dict[tuple[str, int], dict[str, float]]) -> str:
    lines = [
        "| connection | connections | req/s | p50 ms | p99 ms | proxy CPU µs a request "
        "| req/s vs bearer, plain | req/s vs bearer over TLS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (label, connections), result in sorted(
        results.items(), key=lambda item: (item[0][1], LABELS.index(item[0][0]))
    ):
        plain = results[(BEARER, connections)]["rps"]
        tls = results[(BEARER_TLS, connections)]["rps"]
        versus_tls = f"{result['rps'] / tls:.2f}" if label != BEARER else ""
        lines.append(
            f"| {label} | {connections} | {result['rps']:,.0f} | {result['p50']:.2f} "
            f"| {result['p99']:.2f} | {result['cpu_us']:.0f} | {result['rps'] / plain:.2f} "
            f"| {versus_tls} |"
        )
    return "\n".join(lines)
