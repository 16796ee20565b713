"""``python -m gatehouse_proxy``: serve the proxy, and its readiness and metrics on a port of their
own (``--metrics-port``), which apps are not given."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
from collections.abc import Iterator

import uvicorn

from gatehouse_contract.request_deadline import with_head_deadline
from gatehouse_contract.sealing import KeyringFile
from gatehouse_proxy import logs
from gatehouse_proxy.app import create_admin_app, create_app
from gatehouse_proxy.settings import ProxySettings


class AdminServer(uvicorn.Server):
    """Runs beside the app server, which alone owns the process's signals and stops both."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(app: uvicorn.Config, admin: uvicorn.Config) -> None:
    admin_server = AdminServer(admin)
    admin_task = asyncio.create_task(admin_server.serve(), name="admin")
    try:
        await uvicorn.Server(app).serve()
    finally:
        admin_server.should_exit = True
        await admin_task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-proxy", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 (a server in a Pod)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--metrics-port", type=int, default=9090, help="readiness (/readyz) and /metrics"
    )
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=logs.FORMATS, default="text")
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    try:
        settings = ProxySettings.from_env()
        KeyringFile(settings.keyring_file).check()
    except ValueError as error:
        print(f"gatehouse-proxy: {error}", file=sys.stderr)
        return 2
    # log_config=None: uvicorn's loggers propagate to ours, in the chosen format.
    proxy_app = create_app(settings)
    app = uvicorn.Config(
        proxy_app,
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
    admin = uvicorn.Config(
        create_admin_app(proxy_app.state.proxy),
        host=args.host,
        port=args.metrics_port,
        log_config=None,
        log_level=args.log_level,
        access_log=False,
        server_header=False,
        lifespan="off",
    )
    # What start-up made (modules, classes: most of the heap) lives as long as the process; frozen,
    # the collector stops scanning it, and its full collections under load shrink from tens of
    # milliseconds, when every tenant's requests wait, to a few.
    gc.freeze()
    asyncio.run(serve(app, admin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
