"""The page's routes, at /ui beside the service API (see service_api.app.create_app)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.web.code_sign_in import CodeSignIn
from gatehouse_operator.web.connect_flow import ConnectFlow
from gatehouse_operator.web.connection_forms import (
    WIZARD_FIELDS,
    WIZARD_FORM_BYTES,
    ConnectionForms,
)
from gatehouse_operator.web.guards import Guards, Handler
from gatehouse_operator.web.oidc_sign_in import OidcSignIn
from gatehouse_operator.web.pages import Pages
from gatehouse_operator.web.rendering import Renderer, SecurityHeaders
from gatehouse_operator.web.session import Sessions


def mount(connections: Connections) -> Mount:
    runtime = connections.runtime
    renderer = Renderer(runtime.settings.web_read_only)
    guards = Guards(connections.access, Sessions(runtime.keyring), renderer, renderer.read_only)
    pages = Pages(connections, guards, runtime.kube.api)
    connect = ConnectFlow(guards, pages.grants.grants)
    forms = ConnectionForms(pages)
    codes = CodeSignIn(guards, runtime.kube.resources)
    oidc = OidcSignIn(guards, runtime.settings)
    # The sign-in form's "Sign in with ...", where the installation names an issuer.
    renderer.env.globals["oidc_name"] = runtime.settings.oidc.name if oidc.enabled else ""

    def wizard(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        return guards.form(handler, max_bytes=WIZARD_FORM_BYTES, max_fields=WIZARD_FIELDS)

    namespace = "/namespaces/{namespace}"
    connection = f"{namespace}/connections/{{name}}"
    page = Starlette(
        routes=[
            Route("/", guards.page(pages.home)),
            Route("/sign-in", pages.sign_in_form, methods=["GET"]),
            Route("/sign-in", pages.sign_in, methods=["POST"]),
            Route("/sign-out", pages.sign_out, methods=["POST"]),
            # gatehouse open: the link's page, and the code it posts.
            Route("/sign-in/link", codes.link, methods=["GET"]),
            Route("/sign-in/code", codes.exchange, methods=["POST"]),
            Route("/sign-in/oidc", oidc.start, methods=["GET"]),
            Route("/sign-in/oidc/callback", oidc.callback, methods=["GET"]),
            # A viewer's connect link, and the vendor's redirect back (no sign-in: the link and
            # the browser's cookie bind them).
            Route("/connect", connect.landing, methods=["GET"]),
            Route("/connect", connect.begin, methods=["POST"]),
            Route("/connect/callback", connect.callback, methods=["GET"]),
            Route(f"{namespace}/connections", guards.page(pages.connections)),
            # Not under connections/: "new" is a name a connection may have.
            Route(f"{namespace}/new-connection", guards.page(forms.new), methods=["GET"]),
            Route(
                f"{namespace}/new-connection",
                wizard(forms.new_posted),
                methods=["POST"],
            ),
            Route(connection, guards.page(pages.connection)),
            Route(f"{connection}/requests", guards.page(pages.connection_requests)),
            *(
                Route(f"{namespace}/{kind.plural}/{{name}}/requests", guards.page(handler))
                for kind, handler in pages.app_requests_pages()
            ),
            Route(f"{connection}/edit", guards.page(forms.edit), methods=["GET"]),
            Route(
                f"{connection}/edit",
                wizard(forms.edit_posted),
                methods=["POST"],
            ),
            Route(
                f"{connection}/delete",
                guards.form(forms.delete, writes_resources=True),
                methods=["POST"],
            ),
            Route(f"{connection}/test", guards.form(pages.test), methods=["POST"]),
            Route(
                f"{connection}/grants/revoke",
                guards.form(pages.grants.revoke),
                methods=["POST"],
            ),
            Route(
                f"{connection}/grants/connect",
                guards.form(pages.grants.connect_shared),
                methods=["POST"],
            ),
            Route(
                f"{connection}/cache/purge",
                guards.form(pages.cache.purge),
                methods=["POST"],
            ),
            Route(
                f"{connection}/samples/{{sample}}/delete",
                guards.form(pages.delete_sample),
                methods=["POST"],
            ),
            Route(
                f"{namespace}/connectiontests/{{test}}/sample",
                guards.form(pages.save_sample),
                methods=["POST"],
            ),
            Route(
                f"{namespace}/links",
                guards.form(pages.link, writes_resources=True),
                methods=["POST"],
            ),
            Mount("/static", StaticFiles(packages=[("gatehouse_operator.web", "static")])),
        ],
        middleware=[Middleware(SecurityHeaders)],
    )
    return Mount("/ui", page)
