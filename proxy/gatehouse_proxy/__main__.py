"""``python -m gatehouse_proxy``: serve the proxy, and its readiness and metrics on a port of their
own (``--metrics-port``), which apps are not given. ``--workers N`` runs N proxy processes
accepting from one socket of the port (see gatehouse_proxy.workers)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import socket
import sys
import tempfile
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.observability import version
from gatehouse_contract.request_deadline import with_head_deadline
from gatehouse_proxy.app import Proxy, admin_app, create_app
from gatehouse_proxy.observation import logs
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.workers import (
    Supervisor,
    Worker,
    create_supervisor_admin_app,
    shared_socket,
    worker_argv,
)

log = logging.getLogger("gatehouse.proxy")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
# Allocations between the collector's young collections (Python's default: 700); see main.
YOUNG_COLLECTION_THRESHOLD = 7_000


class AdminServer(uvicorn.Server):
    """Runs beside the app server (or the supervisor), which alone owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(
    app: uvicorn.Config, admin: uvicorn.Config, sockets: list[socket.socket] | None = None
) -> None:
    admin_server = AdminServer(admin)
    admin_task = asyncio.create_task(admin_server.serve(), name="admin")
    try:
        await uvicorn.Server(app).serve(sockets=sockets)
    finally:
        admin_server.should_exit = True
        await admin_task


async def supervise(supervisor: Supervisor, admin: uvicorn.Config) -> None:
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, supervisor.stop)
    admin_server = AdminServer(admin)
    admin_task = asyncio.create_task(admin_server.serve(), name="admin")
    try:
        await supervisor.run()
    finally:
        admin_server.should_exit = True
        await admin_task


def run(main: Coroutine[Any, Any, None], event_loop: str) -> None:
    """Runs ``main`` on uvloop (libuv's loop: the proxy's sockets cost less CPU on it, see
    docs/development/performance.md, "Where a request's time goes (the profile)") where it is
    installed, else on asyncio's own loop."""
    if event_loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if event_loop == "uvloop":
                main.close()
                raise SystemExit("gatehouse-proxy: uvloop is not installed") from None
        else:
            log.info("serving on uvloop's event loop")
            uvloop.run(main)
            return
    log.info("serving on asyncio's event loop")
    asyncio.run(main)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-proxy", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 (a server in a Pod)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--metrics-port", type=int, default=9090, help="readiness (/readyz) and /metrics"
    )
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=logs.FORMATS, default="text")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="proxy processes sharing the port's one socket; give the Pod as many cores",
    )
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto")
    # Internal: this process is worker INDEX of a supervisor, its admin answers on SOCKET, and
    # it accepts apps' connections from the supervisor's socket, inherited as descriptor FD.
    parser.add_argument("--worker", metavar="INDEX:SOCKET", help=argparse.SUPPRESS)
    parser.add_argument("--listen-fd", type=int, metavar="FD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    if args.workers < 1:
        print("gatehouse-proxy: --workers must be 1 or more", file=sys.stderr)
        return 2
    try:
        settings = ProxySettings.from_env()
        KeyringFile(settings.keyring_file).check()
    except ValueError as error:
        print(f"gatehouse-proxy: {error}", file=sys.stderr)
        return 2
    log.info("gatehouse-proxy %s", version())
    admin = {
        "log_config": None,
        "log_level": args.log_level,
        "access_log": False,
        "server_header": False,
        "lifespan": "off",
    }
    if args.worker is None and args.workers > 1:
        with (
            tempfile.TemporaryDirectory(prefix="gatehouse-proxy-") as folder,
            shared_socket(args.host, args.port) as listener,
        ):
            passed = list(argv if argv is not None else sys.argv[1:])
            fd = listener.fileno()
            workers = [
                Worker(index, worker_argv(passed, index, path, fd), path, fd)
                for index in range(args.workers)
                for path in [Path(folder) / f"worker-{index}.sock"]
            ]
            config = uvicorn.Config(
                create_supervisor_admin_app(workers),
                host=args.host,
                port=args.metrics_port,
                **admin,
            )
            asyncio.run(supervise(Supervisor(workers, listener), config))
        return 0

    sockets = None
    admin_address: dict[str, Any] = {"host": args.host, "port": args.metrics_port}
    if args.worker is not None:
        index, _, admin_socket = args.worker.partition(":")
        settings = dataclasses.replace(settings, replica=f"{settings.replica}-w{index}")
        sockets = [socket.socket(fileno=args.listen_fd)]
        admin_address = {"uds": admin_socket}
    proxy = Proxy(settings)
    # log_config=None: uvicorn's loggers propagate to ours, in the chosen format.
    app = uvicorn.Config(
        create_app(proxy),
        host=args.host,
        port=args.port,
        log_config=None,
        log_level=args.log_level,
        access_log=False,  # access lines would carry query strings, and so API keys
        server_header=False,
        proxy_headers=False,
        timeout_keep_alive=5,
        http=with_head_deadline(settings.request_read_timeout_seconds),
    )
    admin_config = uvicorn.Config(admin_app(proxy), **admin_address, **admin)
    # What start-up made (modules, classes: most of the heap) lives as long as the process; frozen,
    # the collector stops scanning it, and its full collections under load shrink from tens of
    # milliseconds, when every tenant's requests wait, to a few.
    gc.freeze()
    # Young collections a tenth as often. Each one promotes what the requests in flight hold at
    # that moment, and a full collection (every object made since start-up: the table, pools,
    # the inspector's records) follows once those promotions reach a quarter of what it
    # scanned last: under load, every few hundred requests. Most of a request's objects are
    # gone before a collection anyway (reference counting frees them).
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD)
    run(serve(app, admin_config, sockets), args.event_loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
