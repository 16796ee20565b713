"""The page's routes: sign-in, the connections list, a connection's detail, tests, samples, links.

GET handlers render; POST handlers change something and answer with a redirect (or a page saying
why not). Every POST is refused unless it comes from this origin with the caller's CSRF token.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from kubernetes.aio import client
from markdown_it import MarkdownIt
from markupsafe import Markup
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gatehouse_operator.access import Access, User
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection_test import CONNECTION_TEST, SAMPLE_LABEL_CHARS
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.service_api.app import ApiError, ServiceApi, refusal, validation_message
from gatehouse_operator.service_api.models import ConnectionTestRequest
from gatehouse_operator.web.as_user import as_user
from gatehouse_operator.web.session import MAX_TOKEN_CHARS, Credentials, Sessions, same_origin

APP_KINDS = {DATA_APP.kind: DATA_APP, CHART_TYPE.kind: CHART_TYPE}
# No script at all: the page works with forms alone. Styles and images from this origin only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
CROSS_SITE = "refused: the form was sent by another site"
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
# Raw HTML off: markup in instructions is shown as text. Links keep markdown-it's own check,
# which drops javascript:, vbscript:, file: and data: URLs.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text))  # noqa: S704 (escaped by markdown-it: html is off)


def _templates() -> Environment:
    env = Environment(
        loader=PackageLoader("gatehouse_operator.web", "templates"),
        autoescape=select_autoescape(default=True),
    )
    env.filters["markdown"] = markdown
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    return env


@dataclass(frozen=True)
class Visitor:
    user: User
    credentials: Credentials
    csrf: str


class SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response


class Refused(Exception):
    """A form the page will not act on; the message is shown to the visitor."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


Handler = Callable[[Request, Visitor], Awaitable[Response]]


class Pages:
    def __init__(
        self, api: ServiceApi, sessions: Sessions, operator: client.ApiClient, read_only: bool
    ) -> None:
        self.api = api
        self.sessions = sessions
        self.operator = operator
        self.read_only = read_only
        self.env = _templates()

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            request=request, read_only=self.read_only, **context
        )
        return HTMLResponse(html, status_code=status)

    async def visitor(self, request: Request) -> Visitor | None:
        credentials = self.sessions.credentials(request)
        if credentials is None:
            return None
        user = await self.api.access.authenticate(credentials.token)
        if user is None:
            return None
        return Visitor(user, credentials, self.sessions.csrf_token(credentials))

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET: signed-out visitors are sent to sign in and see nothing else."""

        async def handle(request: Request) -> Response:
            visitor = await self.visitor(request)
            if visitor is None:
                return RedirectResponse("/ui/sign-in", status_code=303)
            return await self._answer(request, visitor, handler)

        return handle

    def form(
        self, handler: Handler, *, writes_resources: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """A POST: refused unless same-origin, signed in, with the visitor's CSRF token."""

        async def handle(request: Request) -> Response:
            if not same_origin(request):
                return self._refused(
                    request, None, 403, "refused: the form was sent by another site"
                )
            visitor = await self.visitor(request)
            if visitor is None:
                return self._refused(request, None, 401, "sign in first")
            fields = await request.form()
            if not self.sessions.csrf_valid(visitor.credentials, str(fields.get("csrf", ""))):
                return self._refused(
                    request, visitor, 403, "the form has expired: reload the page and try again"
                )
            if writes_resources and self.read_only:
                return self._refused(
                    request,
                    visitor,
                    403,
                    "this page is read-only: connections and apps are managed in Git here",
                )
            return await self._answer(request, visitor, handler)

        return handle

    async def _answer(self, request: Request, visitor: Visitor, handler: Handler) -> Response:
        try:
            return await handler(request, visitor)
        except ApiError as error:
            return self._refused(request, visitor, error.status, error.message)
        except Refused as error:
            return self._refused(request, visitor, error.status, error.message)
        except client.ApiException as error:
            # The API server's own words may quote the request, never a secret of ours; only
            # refusals of the user's own changes are shown (see link), others by status alone.
            return self._refused(
                request, visitor, 502, f"the Kubernetes API answered {error.status}"
            )

    def _refused(
        self, request: Request, visitor: Visitor | None, status: int, message: str
    ) -> HTMLResponse:
        return self.render(request, "refused.html", status, visitor=visitor, message=message)

    # Sign-in and out.

    async def sign_in_form(self, request: Request) -> Response:
        if await self.visitor(request) is not None:
            return RedirectResponse("/ui/", status_code=303)
        return self.render(request, "sign_in.html", visitor=None, error="")

    async def sign_in(self, request: Request) -> Response:
        if not same_origin(request):
            return self._refused(request, None, 403, CROSS_SITE)
        token = str((await request.form()).get("token", "")).strip()
        error = ""
        if not token or len(token) > MAX_TOKEN_CHARS:
            error = f"token: paste a Kubernetes token of 1 to {MAX_TOKEN_CHARS} characters"
        elif await self.api.access.authenticate(token) is None:
            error = "token: the Kubernetes API server did not accept this token"
        if error:
            return self.render(request, "sign_in.html", 401, visitor=None, error=error)
        response = RedirectResponse("/ui/", status_code=303)
        self.sessions.start(response, token)
        return response

    async def sign_out(self, request: Request, visitor: Visitor) -> Response:
        response = RedirectResponse("/ui/sign-in", status_code=303)
        self.sessions.end(response)
        return response

    # Pages.

    async def home(self, request: Request, visitor: Visitor) -> Response:
        chosen = request.query_params.get("namespace", "").strip()
        if chosen:
            return RedirectResponse(f"/ui/namespaces/{chosen}/connections", status_code=303)
        parts = visitor.user.name.split(":")
        own = parts[2] if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else ""
        return self.render(request, "home.html", visitor=visitor, namespace=own)

    async def _may(self, visitor: Visitor, verb: str, plural: str, namespace: str) -> bool:
        return await self.api.access.allowed(visitor.user, verb, plural, namespace)

    async def _linkable_apps(self, visitor: Visitor, namespace: str) -> list[str]:
        """The apps the visitor may change (Kind/name), for the Link form; none when read-only."""
        if self.read_only:
            return []
        apps = []
        for kind in APP_KINDS.values():
            if await self._may(visitor, "update", kind.plural, namespace):
                apps += [
                    f"{kind.kind}/{body['metadata']['name']}"
                    for body in await self.api.runtime.kube.list_custom(kind, namespace)
                ]
        return sorted(apps)

    async def connections(self, request: Request, visitor: Visitor) -> Response:
        namespace = request.path_params["namespace"]
        listing = await self.api.visible_connections(visitor.user, namespace)
        return self.render(
            request,
            "list.html",
            visitor=visitor,
            namespace=namespace,
            listing=listing,
            apps=await self._linkable_apps(visitor, namespace),
            notice=request.query_params.get("notice", ""),
        )

    async def connection(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        detail = await self.api.connection_detail(visitor.user, namespace, name)
        return self.render(
            request,
            "detail.html",
            visitor=visitor,
            namespace=namespace,
            detail=detail,
            can_test=await self._may(visitor, "create", CONNECTION_TEST.plural, namespace),
            apps=await self._linkable_apps(visitor, namespace),
            notice=request.query_params.get("notice", ""),
        )

    # Forms.

    async def test(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        fields = await request.form()
        detail = await self.api.connection_detail(visitor.user, namespace, name)
        method = str(fields.get("method", "GET"))
        if method not in detail.connection.allowed_methods:
            allowed = ", ".join(detail.connection.allowed_methods)
            raise Refused(422, f"method: must be one of the connection's methods ({allowed})")
        path = str(fields.get("path", "")).strip() or "/"
        raw_body = str(fields.get("body", "")).strip()
        wanted: dict[str, Any] = {"method": method, "path": "/" + path.lstrip("/")}
        if raw_body and method != "GET":
            try:
                wanted["body"] = json.loads(raw_body)
            except json.JSONDecodeError as error:
                where = f"{error.msg} at character {error.pos}"
                raise Refused(422, f"body: not JSON ({where})") from None
        try:
            test = ConnectionTestRequest.model_validate(wanted)
        except ValidationError as error:
            raise Refused(422, validation_message(error)) from None
        outcome = await self.api.run_test(visitor.user, namespace, name, test)
        return self.render(
            request,
            "test_result.html",
            visitor=visitor,
            namespace=namespace,
            detail=detail,
            request_sent=test,
            outcome=outcome,
            can_save=outcome.passed
            and await self.api.access.allowed(
                visitor.user, "patch", CONNECTION_TEST.plural, namespace, outcome.name
            ),
            label_chars=SAMPLE_LABEL_CHARS,
        )

    async def save_sample(self, request: Request, visitor: Visitor) -> Response:
        namespace, test = request.path_params["namespace"], request.path_params["test"]
        fields = await request.form()
        label = str(fields.get("label", "")).strip()
        if not 1 <= len(label) <= SAMPLE_LABEL_CHARS:
            raise Refused(422, f"label: 1 to {SAMPLE_LABEL_CHARS} characters")
        connection = str(fields.get("connection", ""))
        outcome = await self.api.save_sample(visitor.user, namespace, test, label)
        if not outcome.saved:
            raise Refused(409, f"not saved ({outcome.reason}): {outcome.message}")
        return self._back_to(namespace, connection, f"Saved sample “{label}”.")

    async def delete_sample(self, request: Request, visitor: Visitor) -> Response:
        params = request.path_params
        namespace, name = params["namespace"], params["name"]
        await self.api.delete_sample(visitor.user, namespace, name, params["sample"])
        return self._back_to(namespace, name, "Sample deleted.")

    async def link(self, request: Request, visitor: Visitor) -> Response:
        """Links a connection to an app as the visitor: RBAC and the admission webhook decide,
        and the webhook's message is shown as it is."""
        namespace = request.path_params["namespace"]
        fields = await request.form()
        kind_name, _, app_name = str(fields.get("app", "")).partition("/")
        kind = APP_KINDS.get(kind_name)
        alias = str(fields.get("alias", "")).strip()
        connection = str(fields.get("connection", "")).strip()
        if kind is None or not app_name:
            raise Refused(422, "app: choose a DataApp or ChartType")
        if not alias or not connection:
            raise Refused(422, "alias and connection: both are required")
        async with as_user(self.operator, visitor.credentials.token) as kube:
            try:
                app = await kube.get_custom(kind, namespace, app_name)
                links = list(app.get("spec", {}).get("connections") or [])
                if any(link.get("alias") == alias for link in links):
                    raise Refused(
                        422, f"alias: {alias!r} is already used in {kind.kind} {app_name}"
                    )
                app.setdefault("spec", {})["connections"] = [
                    *links,
                    {"alias": alias, "connection": connection},
                ]
                await kube.replace_custom(kind, namespace, app)
            except client.ApiException as error:
                if error.status in (400, 403, 404, 409, 422):
                    raise Refused(error.status, f"not linked: {refusal(error)}") from None
                raise
        notice = f"Linked {connection} to {kind.kind} {app_name} as “{alias}”."
        back = connection if fields.get("back") == "detail" else ""
        return self._back_to(namespace, back, notice)

    def _back_to(self, namespace: str, connection: str, notice: str) -> Response:
        """To the connection's page, or the list without one, with a notice to show."""
        url = f"/ui/namespaces/{namespace}/connections"
        if connection:
            url += f"/{connection}"
        return RedirectResponse(f"{url}?{urlencode({'notice': notice})}", status_code=303)


def mount(runtime: Runtime, access: Access) -> Mount:
    """The page at /ui, served with the service API (see service_api.app.create_app)."""
    pages = Pages(
        ServiceApi(runtime, access),
        Sessions(runtime.keyring),
        runtime.kube.core.api_client,
        runtime.settings.web_read_only,
    )
    prefix = "/namespaces/{namespace}"
    page = Starlette(
        routes=[
            Route("/", pages.page(pages.home)),
            Route("/sign-in", pages.sign_in_form, methods=["GET"]),
            Route("/sign-in", pages.sign_in, methods=["POST"]),
            Route("/sign-out", pages.form(pages.sign_out), methods=["POST"]),
            Route(f"{prefix}/connections", pages.page(pages.connections)),
            Route(f"{prefix}/connections/{{name}}", pages.page(pages.connection)),
            Route(f"{prefix}/connections/{{name}}/test", pages.form(pages.test), methods=["POST"]),
            Route(
                f"{prefix}/connections/{{name}}/samples/{{sample}}/delete",
                pages.form(pages.delete_sample),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connectiontests/{{test}}/sample",
                pages.form(pages.save_sample),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/links",
                pages.form(pages.link, writes_resources=True),
                methods=["POST"],
            ),
            Mount("/static", StaticFiles(packages=[("gatehouse_operator.web", "static")])),
        ],
        middleware=[Middleware(SecurityHeaders)],
    )
    return Mount("/ui", page)
