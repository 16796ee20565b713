"""Instructions per fetch, counted: what the proxy, one of its guarantees or a floor costs a fetch,
the same from run to run whatever else the machine does (docs/development/performance.md, "What
each guarantee costs, counted").

callgrind (valgrind) runs one process serving fetches: the proxy (uvicorn with the proxy's
protocol and app, its table installed directly as ``tests/proxy/serving.py`` does, an API key
injected), optionally with one guarantee's step replaced by nothing (``--without``), or a floor
(``floor_passthrough``, ``floor_raw_client``). A client in this process sends it 320 fetches to
warm up, has callgrind's counts zeroed, sends ``--fetches`` more at ``--concurrency`` at a time
and has them dumped: the instructions over the fetches. From the repository's root, with nginx
(the bench's upstream) and valgrind installed::

    python -m gatehouse_dev.count_fetch proxy --without scrubber
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from gatehouse_dev import nginx
from gatehouse_dev.processes import free_port

WARM_UP = 320
# What --without replaces by nothing, each a guarantee's step of a fetch.
STEPS = ("scrubber", "observers", "quota", "turns", "deadline", "caps")


def _without(steps: set[str]) -> None:
    """Each named step of the proxy made to do nothing (for this process only)."""
    if "scrubber" in steps:
        from gatehouse_proxy.door import fetch_endpoint

        vars(fetch_endpoint)["Redactor"] = lambda secrets: None
    if "observers" in steps:
        from gatehouse_proxy.observation import observers

        vars(observers)["listed"] = lambda *parts: ()
    if "quota" in steps:
        from gatehouse_contract.routes import ConnectionRoute
        from gatehouse_proxy.limits.quotas import NO_LIMIT, Quotas, Standing

        async def admit(
            self: Quotas, connection: ConnectionRoute, app_uid: str, endpoint: str = ""
        ) -> Standing:
            return NO_LIMIT

        Quotas.admit = admit  # type: ignore[method-assign]
    if "turns" in steps:
        from gatehouse_proxy.limits.tenancy import Turns

        async def take(self: Turns, tenant: str) -> None:
            return None

        Turns.take = take  # type: ignore[method-assign]
    if "caps" in steps:
        from gatehouse_proxy.limits.tenancy import ConcurrencyLimits, Place

        async def enter(
            self: ConcurrencyLimits, namespace: str, app: str, connection: str
        ) -> Place:
            return Place(lambda: None)

        ConcurrencyLimits.enter = enter  # type: ignore[method-assign]
    if "deadline" in steps:
        from tests.proxy import serving
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        vars(serving)["with_head_deadline"] = lambda seconds: HttpToolsProtocol


async def _serve(target: str, upstream: str) -> None:
    """Serves fetches until SIGTERM; prints the fetch URL and token on one line first."""
    from tests.proxy import serving

    from gatehouse_proxy.table.feed import TableFeed

    async def no_feed(self: Any) -> None:  # the table is installed directly: no operator
        await asyncio.Event().wait()

    TableFeed.run = no_feed  # type: ignore[method-assign]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if target != "proxy":
        module = __import__(f"gatehouse_dev.{target}", fromlist=["app"])
        server, task = await serving._serve(type(module.app)(upstream), free_port(), "httptools")
        print(f"http://127.0.0.1:{server.config.port}/items", flush=True)
        await stop.wait()
        server.should_exit = True
        await task
        return
    tenant = serving.Tenant("bench", upstream, "apiKey", "bench-key", "X-API-Key", "header")
    with tempfile.TemporaryDirectory() as folder:
        async with serving.running_proxy(Path(folder), [tenant]) as running:
            gc.freeze()  # as the proxy's __main__ does
            gc.set_threshold(7000)
            print(f"{running.url}/v1/fetch/api/items {tenant.token}", flush=True)
            await stop.wait()


async def _fetch(url: str, token: str, fetches: int, concurrency: int) -> int:
    """``fetches`` fetches, ``concurrency`` at a time; how many were not 200."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    failed = 0
    async with aiohttp.ClientSession() as session:

        async def one_after_another() -> None:
            nonlocal failed
            for _ in range(fetches // concurrency):
                async with session.get(url, headers=headers) as answer:
                    await answer.read()
                    failed += answer.status != 200

        await asyncio.gather(*(one_after_another() for _ in range(concurrency)))
    return failed


def count(target: str, without: set[str], fetches: int, concurrency: int) -> int:
    """Instructions per fetch of ``target`` (proxy, floor_passthrough, floor_raw_client)."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        port = free_port()
        binary = nginx.binary()
        assert binary is not None, "nginx is not installed"
        upstream = subprocess.Popen(
            nginx.argv(binary, work / "nginx", nginx.upstream_config(work / "nginx", port))
        )
        argv = [sys.executable, "-m", "gatehouse_dev.count_fetch", target, "--serve"]
        argv += [f"--upstream=http://127.0.0.1:{port}"]
        argv += [f"--without={step}" for step in sorted(without)]
        served = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / 'out'}", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert served.stdout is not None
            url, _, token = served.stdout.readline().strip().partition(" ")
            asyncio.run(_fetch(url, token, WARM_UP, concurrency))
            subprocess.run(
                ["callgrind_control", "--zero", str(served.pid)], check=True, capture_output=True
            )
            failed = asyncio.run(_fetch(url, token, fetches, concurrency))
            subprocess.run(
                ["callgrind_control", "--dump", str(served.pid)], check=True, capture_output=True
            )
            served.terminate()
            served.wait(timeout=300)
        finally:
            served.kill()
            upstream.terminate()
            upstream.wait()
        if failed:
            raise RuntimeError(f"{failed} fetches were not answered 200")
        dumped = next(work.glob("out.*"))  # the dump; "out" itself is the rest, after it
        summary = next(
            line for line in dumped.read_text().splitlines() if line.startswith("summary:")
        )
        return int(summary.split()[1]) // fetches


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m gatehouse_dev.count_fetch")
    parser.add_argument("target", choices=("proxy", "floor_passthrough", "floor_raw_client"))
    parser.add_argument("--without", action="append", choices=STEPS, default=[])
    parser.add_argument("--fetches", type=int, default=1600)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        import uvloop

        _without(set(args.without))
        uvloop.run(_serve(args.target, args.upstream))
        return 0
    counted = count(args.target, set(args.without), args.fetches, args.concurrency)
    without = f" without {', '.join(args.without)}" if args.without else ""
    print(f"{args.target}{without}: {counted:,} instructions per fetch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
