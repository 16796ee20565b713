"""``python -m gatehouse_proxy``: serve the proxy with uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from gatehouse_proxy.app import create_app
from gatehouse_proxy.request_deadline import with_head_deadline
from gatehouse_proxy.sealing import KeyringFile
from gatehouse_proxy.settings import ProxySettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-proxy", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 (a server in a Pod)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = ProxySettings.from_env()
        KeyringFile(settings.keyring_file).check()
    except ValueError as error:
        print(f"gatehouse-proxy: {error}", file=sys.stderr)
        return 2
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,  # access lines would carry query strings, and so API keys
        server_header=False,
        proxy_headers=False,
        timeout_keep_alive=5,
        http=with_head_deadline(settings.request_read_timeout_seconds),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
