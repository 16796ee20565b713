"""The service API and the connections page: one Starlette app, and how it is served.

The controller serves it in kopf's event loop; the dev page server serves it alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette

from gatehouse_contract.request_deadline import with_head_deadline
from gatehouse_operator.access.reviews import Access
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.service_api import app as service_api
from gatehouse_operator.web import routes as connections_page

# How long the service API and page wait for a request's head (a browser or client sends it at
# once); bodies have their own bound (service_api.models.BODY_SECONDS).
API_HEAD_SECONDS = 10.0


def app(runtime: Runtime, access: Access) -> Starlette:
    connections = Connections(runtime, access)
    return service_api.create_app(connections, connections_page.mount(connections))


def config(app: Starlette, host: str, port: int) -> uvicorn.Config:
    # The proxy's protocol: a deadline for each request head, and bounds on its size and on
    # pipelined requests, so trickled heads cannot hold the API's connections (and the one loop)
    # for as long as a client likes.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=with_head_deadline(API_HEAD_SECONDS),
    )


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside kopf's event loop: kopf, not uvicorn, owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
