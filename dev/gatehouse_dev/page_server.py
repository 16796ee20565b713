"""The service API and the connections page alone, without kopf: a second front end on a cluster
whose operator already runs, with settings of its own (the browser tests' read-only page).

``python -m gatehouse_dev.page_server --port PORT [--read-only]``, with KUBECONFIG and
GATEHOUSE_KEYRING_FILE set as for the operator (and GATEHOUSE_PAGE_URL, GATEHOUSE_OIDC_*, if any).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import uvicorn
from kubernetes.aio import config

from gatehouse_contract.keyring import KeyringFile
from gatehouse_operator.access.reviews import Access
from gatehouse_operator.kube import Kube
from gatehouse_operator.settings import OidcSettings, OperatorSettings
from gatehouse_operator.wiring import front_end
from gatehouse_operator.wiring.controller import assemble


async def serve(port: int, read_only: bool) -> None:
    keyring_file = Path(os.environ["GATEHOUSE_KEYRING_FILE"])
    api = await config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]
    settings = OperatorSettings(
        keyring_file=keyring_file,
        web_read_only=read_only,
        page_url=os.environ.get("GATEHOUSE_PAGE_URL", ""),
        oidc=OidcSettings.from_env(),
    )
    runtime = assemble(settings, Kube.of(api), KeyringFile(keyring_file))
    server = uvicorn.Server(
        front_end.config(front_end.app(runtime, Access(api)), "127.0.0.1", port)
    )
    await server.serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--read-only", action="store_true")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.read_only))


if __name__ == "__main__":
    main()
