"""Tenants sharing a replica: one namespace's traffic never makes another's wait or fail, and
nothing on the app port describes other tenants. A real proxy, real upstreams on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from starlette.types import Receive, Scope, Send

from gatehouse_dev import upstream as dev_upstream
from gatehouse_proxy.door.entrance import FirstTurn
from gatehouse_proxy.limits.tenancy import TenantLimits, Turns
from tests.proxy.serving import Running, Tenant, running_proxy, table, upstream

SMALL = TenantLimits(
    concurrent_per_namespace=8,
    concurrent_per_app=8,
    concurrent_per_connection=8,
    wait_seconds=0.5,
    request_bytes_per_namespace=3 * 1024 * 1024,
    request_bytes_total=8 * 1024 * 1024,
)


def _fetch(
    client: httpx.AsyncClient,
    base: str,
    tenant: Tenant,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    content: bytes | AsyncIterator[bytes] | None = None,
) -> asyncio.Task[httpx.Response]:
    return asyncio.ensure_future(
        client.request(
            method,
            f"{base}/v1/fetch/api{path}",
            headers={"Authorization": f"Bearer {tenant.token}", **(headers or {})},
            params=params,
            content=content,
        )
    )


def _code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"]) if response.status_code >= 400 else "ok"


@contextlib.asynccontextmanager
async def _one_tenant(
    tmp_path: Path, app: web.Application | None = None, limits: TenantLimits | None = None
) -> AsyncIterator[tuple[Running, httpx.AsyncClient, Tenant]]:
    """A proxy with one tenant, namespace ``one``, in front of a real upstream, and a client."""
    async with upstream(app) as origin:
        tenant = Tenant("one", origin)
        async with (
            running_proxy(tmp_path, [tenant], limits) as proxy,
            httpx.AsyncClient(timeout=10) as client,
        ):
            yield proxy, client, tenant


def test_a_tenant_with_slow_upstreams_waits_on_its_own_caps_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            noisy, quiet = Tenant("noisy", origin), Tenant("quiet", origin)
            async with (
                running_proxy(tmp_path, [noisy, quiet], SMALL) as proxy,
                httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as client,
            ):
                slow = [
                    _fetch(client, proxy.url, noisy, "/slow", params={"seconds": "3"})
                    for _ in range(20)
                ]
                await asyncio.sleep(0.3)
                assert proxy.proxy.concurrency.in_flight("namespace", "noisy") == 20
                started = time.perf_counter()
                answer = await _fetch(client, proxy.url, quiet, "/echo/quiet")
                quiet_seconds = time.perf_counter() - started
                assert answer.status_code == 200
                assert dev_upstream.RECEIVED[answer.json()["id"]]["path"] == "/echo/quiet"
                codes = [_code(response) for response in await asyncio.gather(*slow)]
                assert codes.count("ok") == 8
                assert codes.count("concurrency_limited") == 12
                assert quiet_seconds < 1.0, quiet_seconds
                # Every place was given back, and idle gates are dropped.
                assert proxy.proxy.concurrency.in_flight("namespace", "noisy") == 0

    asyncio.run(scenario())


def test_request_bodies_are_budgeted_per_namespace(tmp_path: Path) -> None:
    body = b"x" * (1024 * 1024)

    async def scenario() -> None:
        async with upstream() as origin:
            noisy, quiet = Tenant("noisy", origin), Tenant("quiet", origin)
            async with (
                running_proxy(tmp_path, [noisy, quiet], SMALL) as proxy,
                httpx.AsyncClient(timeout=30) as client,
            ):
                held = [
                    _fetch(
                        client,
                        proxy.url,
                        noisy,
                        "/slow",
                        method="POST",
                        params={"seconds": "2"},
                        content=body,
                    )
                    for _ in range(6)
                ]
                await asyncio.sleep(0.5)
                assert proxy.proxy.request_bytes.held("noisy") == 3 * len(body)
                answer = await _fetch(
                    client, proxy.url, quiet, "/slow", method="POST", content=body
                )
                assert answer.json() == {"slow": True, "received": len(body)}
                codes = [_code(response) for response in await asyncio.gather(*held)]
                assert sorted(codes) == ["ok"] * 3 + ["request_bytes_limited"] * 3
                assert proxy.proxy.request_bytes.total == 0

    asyncio.run(scenario())


def test_readiness_and_metrics_are_not_on_the_app_port(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _one_tenant(tmp_path) as (proxy, client, tenant):
            for path in ("/readyz", "/metrics"):
                assert (await client.get(f"{proxy.url}{path}")).status_code == 404
            ready = (await client.get(f"{proxy.admin_url}/readyz")).json()
            assert ready["connections"] == 1
            for status in (299, 577, 418):
                await _fetch(client, proxy.url, tenant, f"/status/{status}")
            metrics = (await client.get(f"{proxy.admin_url}/metrics")).text
            for label in ('status="2xx"', 'status="5xx"', 'status="4xx"'):
                assert label in metrics
            for raw in ('status="299"', 'status="577"', 'status="418"'):
                assert raw not in metrics

    asyncio.run(scenario())


def test_a_header_that_is_not_latin_1_passes_as_bytes_and_frees_its_socket(
    tmp_path: Path,
) -> None:
    async def disposition(request: web.Request) -> web.Response:
        return web.Response(
            text="{}", headers={"Content-Disposition": 'attachment; filename="résumé-€.pdf"'}
        )

    app = web.Application()
    app.router.add_get("/file", disposition)
    # One socket for the namespace: a leaked one would leave the next request waiting.
    one = TenantLimits(
        concurrent_per_namespace=1, concurrent_per_app=1, concurrent_per_connection=1
    )

    async def scenario() -> None:
        async with _one_tenant(tmp_path, app, one) as (proxy, client, tenant):
            for _ in range(3):
                answer = await _fetch(client, proxy.url, tenant, "/file")
                assert answer.status_code == 200
                raw = dict(answer.headers.raw)[b"content-disposition"]
                assert raw == 'attachment; filename="résumé-€.pdf"'.encode()

    asyncio.run(scenario())


def test_underscore_and_array_spellings_never_reach_the_upstream(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            header = Tenant("header", origin, "apiKey", "sk-header-1234", "X-Api-Key", "header")
            query = Tenant("query", origin, "apiKey", "sk-query-1234", "api_key", "query")
            async with (
                running_proxy(tmp_path, [header, query]) as proxy,
                httpx.AsyncClient(timeout=10) as client,
            ):
                answer = await _fetch(
                    client,
                    proxy.url,
                    header,
                    "/echo/",
                    headers={
                        "X_Api_Key": "forged",
                        "X-Original-Host": "elsewhere",
                        "Range": "bytes=0-3",
                        "Accept_Encoding": "gzip",
                    },
                )
                seen = dev_upstream.RECEIVED[answer.json()["id"]]
                assert seen["headers"]["x-api-key"] == "sk-header-1234"
                assert "x_api_key" not in seen["headers"]
                assert "x-original-host" not in seen["headers"]
                assert "range" not in seen["headers"]
                assert "accept_encoding" not in seen["headers"]
                assert seen["headers"]["accept-encoding"] == "identity"
                answer = await client.get(
                    f"{proxy.url}/v1/fetch/api/echo/?a=1&api_key[]=forged&API_KEY=forged",
                    headers={"Authorization": f"Bearer {query.token}"},
                )
                seen = dev_upstream.RECEIVED[answer.json()["id"]]
                assert seen["query"] == "a=1&api_key=sk-query-1234"

    asyncio.run(scenario())


def test_a_burst_of_one_tenant_is_spread_over_the_loop_so_another_waits_a_few_turns() -> None:
    async def scenario() -> None:
        turns = Turns(per_round=2)
        order: list[tuple[str, int]] = []

        async def request(tenant: str, number: int) -> None:
            await turns.take(tenant)
            order.append((tenant, number))

        burst = [asyncio.create_task(request("noisy", number)) for number in range(50)]
        await asyncio.sleep(0)  # the burst has become ready: 2 turns taken, 48 waiting
        assert turns.waiting("noisy") == 48
        quiet = asyncio.create_task(request("quiet", 0))
        await asyncio.gather(*burst, quiet)
        # First come, first served, the quiet request would have run 51st.
        assert order.index(("quiet", 0)) <= 2
        assert [number for tenant, number in order if tenant == "noisy"] == list(range(50))

    asyncio.run(scenario())


def test_a_tenant_alone_takes_more_turns_per_iteration_until_another_waits() -> None:
    async def scenario() -> None:
        turns = Turns(per_round=2, alone=8, within=1.0)  # stretches far shorter than 1 s
        order: list[tuple[str, int]] = []

        async def request(tenant: str, number: int) -> None:
            await turns.take(tenant)
            order.append((tenant, number))

        burst = [asyncio.create_task(request("noisy", number)) for number in range(50)]
        await asyncio.sleep(0)  # alone: 8 turns taken, 42 waiting
        assert turns.waiting("noisy") == 42
        quiet = [asyncio.create_task(request("quiet", number)) for number in range(6)]
        await asyncio.sleep(0)  # the burst waits: the quiet tenant takes two, like it
        assert turns.waiting("quiet") == 4
        await asyncio.gather(*burst, *quiet)
        # Behind the burst, the quiet tenant's first request waited for 8 of it, not 50.
        assert order.index(("quiet", 0)) <= 8
        # Both waiting, two turns each per iteration: the quiet tenant's last is not left
        # behind the rest of the burst.
        assert order.index(("quiet", 5)) < order.index(("noisy", 30))
        assert [number for tenant, number in order if tenant == "noisy"] == list(range(50))

    asyncio.run(scenario())


def test_a_tenant_alone_takes_more_turns_only_while_its_stretches_are_short() -> None:
    async def scenario() -> None:
        turns = Turns(per_round=2, alone=8, within=0.001)

        async def request() -> None:
            await turns.take("noisy")
            _busy(0.0006)  # a stretch of work that does not wait

        burst = [asyncio.create_task(request()) for _ in range(50)]
        await asyncio.sleep(0)
        # Two turns, then 1.2 ms taken: past ``within``, the rest wait as they did before.
        assert turns.waiting("noisy") == 48
        await asyncio.gather(*burst)

    asyncio.run(scenario())


def _busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_a_burst_of_requests_is_spread_before_any_of_them_is_routed() -> None:
    noisy, quiet = Tenant("noisy", "http://127.0.0.1:9"), Tenant("quiet", "http://127.0.0.1:9")
    routes = table([noisy, quiet])

    async def scenario() -> None:
        turns = Turns(per_round=2)
        routed: list[str] = []

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            routed.append(scope["who"])

        first_turn = FirstTurn(app, turns, lambda: routes)

        def request(
            who: str, authorization: bytes, path: str = "/v1/fetch/api/x"
        ) -> asyncio.Task[None]:
            scope = {
                "type": "http",
                "who": who,
                "path": path,
                "headers": [(b"authorization", authorization)],
            }
            return asyncio.create_task(first_turn(scope, _nothing, _nothing))

        # A hundred of one tenant's requests parsed in one iteration, as a retried burst is.
        burst = [request("noisy", b"Bearer " + noisy.token.encode()) for _ in range(100)]
        strangers = [request("stranger", b"Bearer made-up") for _ in range(20)]
        await asyncio.sleep(0)
        assert turns.waiting("noisy") == 98
        assert turns.waiting("") == 18  # unknown tokens share one tenant: spread as well
        late = request("quiet", b"bearer " + quiet.token.encode())
        # The liveness answer takes no turn: it never queues behind a flood.
        liveness = request("kubelet", b"", path="/healthz")
        await asyncio.gather(*burst, *strangers, late, liveness)
        assert routed.index("quiet") <= 5, routed[:10]
        assert routed.index("kubelet") <= 5, routed[:10]

    asyncio.run(scenario())


async def _nothing(*_: Any) -> Any:
    return None


def test_a_request_cancelled_while_it_waits_for_a_turn_holds_up_nobody() -> None:
    async def scenario() -> None:
        turns = Turns(per_round=1)
        done: list[int] = []

        async def request(number: int) -> None:
            await turns.take("noisy")
            done.append(number)

        waiting = [asyncio.create_task(request(number)) for number in range(10)]
        await asyncio.sleep(0)
        for task in waiting[3:6]:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert done == [0, 1, 2, 6, 7, 8, 9]
        assert turns.waiting("noisy") == 0

    asyncio.run(scenario())


def test_a_body_sent_in_small_pieces_reaches_the_upstream_whole_with_its_length(
    tmp_path: Path,
) -> None:
    piece = bytes(range(32, 127)) * 10

    async def trickle() -> AsyncIterator[bytes]:
        for _ in range(300):
            yield piece

    async def scenario() -> None:
        async with _one_tenant(tmp_path) as (proxy, client, tenant):
            answer = await _fetch(
                client, proxy.url, tenant, "/echo/", method="POST", content=trickle()
            )
            seen = dev_upstream.RECEIVED[answer.json()["id"]]
            assert seen["body"] == (piece * 300).decode()
            # Sent as read (in pieces), but with its length, not chunked.
            assert seen["headers"]["content-length"] == str(len(piece) * 300)
            assert "transfer-encoding" not in seen["headers"]

    asyncio.run(scenario())


def test_one_tls_context_serves_every_tenants_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the trust store takes tens of milliseconds of CPU: a pool per namespace must not
    load it again, on the event loop, for each new tenant."""
    made: list[str] = []
    create_default_context: Callable[..., ssl.SSLContext] = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(sys._getframe(1).f_globals["__name__"])
        return create_default_context(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)

    async def scenario() -> None:
        async with upstream() as origin:
            tenants = [Tenant(f"tenant-{number}", origin) for number in range(3)]
            async with (
                running_proxy(tmp_path, tenants) as proxy,
                httpx.AsyncClient(timeout=10) as client,
            ):
                for tenant in tenants:
                    answer = await _fetch(client, proxy.url, tenant, "/echo/")
                    assert answer.status_code == 200
        assert [module for module in made if module.startswith("gatehouse_proxy")] == [
            "gatehouse_proxy.upstream.forwarder"
        ]

    asyncio.run(scenario())
