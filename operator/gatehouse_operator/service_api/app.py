"""The service API's endpoints (Starlette, served in the operator's process).

Every endpoint but ``/healthz`` and ``/openapi.json`` wants ``Authorization: Bearer <a Kubernetes
token>``: a TokenReview says who the caller is, SubjectAccessReviews say what they may do, and the
operator's own identity does the work once they may. The OpenAPI document lists the endpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from gatehouse_contract.connecting import LINK_SECONDS, OWNER_DIGEST
from gatehouse_contract.errors import error_body
from gatehouse_contract.numerals import whole_number
from gatehouse_operator.access.reviews import User
from gatehouse_operator.api.connection_test import SampleRequest
from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.api.project_config import PROJECT_CONFIG
from gatehouse_operator.api.stored import StoredProjectConfig
from gatehouse_operator.connections import cache_purging, request_cursor
from gatehouse_operator.connections.actions import APPS, Connections
from gatehouse_operator.connections.activity import Activity, limit_of, since_of, window_of
from gatehouse_operator.connections.errors import Refused, check_names, validation_message
from gatehouse_operator.connections.grants import Grants
from gatehouse_operator.connections.models import ConnectionTestRequest, DraftTestRequest
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.project_config.compiler import effective_defaults
from gatehouse_operator.service_api import openapi
from gatehouse_operator.service_api.models import (
    BODY_SECONDS,
    MAX_BODY_BYTES,
    ConnectLink,
    DefaultsResult,
    DefaultsUpdate,
    Revoked,
)

DEFAULTS_MANAGER = "gatehouse-defaults-api"

Endpoint = Callable[[Request, User], Awaitable[Response]]
Body = TypeVar("Body", bound=BaseModel)


def _refusal_response(refused: Refused) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if refused.status == 401 else {}
    if refused.status == 429:
        headers["Retry-After"] = "1"
    return JSONResponse(
        error_body(refused.code, refused.message),
        status_code=refused.status,
        headers={**headers, "Cache-Control": "no-store"},
    )


def _too_large() -> Refused:
    return Refused(413, "request_too_large", f"body: at most {MAX_BODY_BYTES:,} bytes of JSON")


async def _body(request: Request) -> bytes:
    """The request's body, refused past MAX_BODY_BYTES: by its declared length before any of it
    is read, and while it streams (a chunked body, or one longer than it said); and past
    BODY_SECONDS."""
    length = request.headers.get("content-length")
    if length is not None:
        declared = whole_number(length)
        if declared is None or declared > MAX_BODY_BYTES:
            raise _too_large()
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _too_large()
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(
            408, "request_timeout", f"body: not received within {BODY_SECONDS:g} s"
        ) from None
    return b"".join(chunks)


async def _parsed(request: Request, model: type[Body], if_empty: bytes = b"") -> Body:
    """The request's JSON body as ``model``; 400 naming the field and the rule otherwise. Call
    it once the caller is known to be allowed what the body asks."""
    try:
        return model.model_validate_json(await _body(request) or if_empty)
    except ValidationError as error:
        raise Refused(400, "invalid_request", validation_message(error)) from None


def _json(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(
        model.model_dump(by_alias=True, mode="json"),
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


class ServiceApi:
    """The HTTP side of the use cases: who calls (a TokenReview), what they send (bodies read
    only once they may), and how the answer travels. What they may do is ``Connections``'."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.runtime = connections.runtime
        self.access = connections.access
        self.activity = Activity(connections)
        self.grants = Grants(connections)

    def authenticated(self, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                check_names(request.path_params)
                scheme, _, token = request.headers.get("authorization", "").partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    raise Refused(401, "unauthenticated", "send a Kubernetes bearer token")
                user = await self.access.authenticate(token.strip())
                if user is None:
                    raise Refused(401, "unauthenticated", "the token was not accepted")
                return await endpoint(request, user)
            except Refused as refused:
                return _refusal_response(refused)
            except ApiError as error:
                # The Kubernetes API's own refusal; its body may quote the request, so only
                # the status travels on.
                answer = f"the API server answered {error.status}"
                return _refusal_response(Refused(502, "kubernetes_error", answer))

        return handle

    async def list_connections(self, request: Request, user: User) -> Response:
        namespace = request.path_params["namespace"]
        return _json(await self.connections.visible_connections(user, namespace))

    async def get_connection(self, request: Request, user: User) -> Response:
        params = request.path_params
        detail = await self.connections.connection_detail(user, params["namespace"], params["name"])
        return _json(detail)

    async def shared_connect_link(self, request: Request, user: User) -> Response:
        """``gatehouse connect``: a link for the shared account, for its admin to open."""
        params = request.path_params
        link = await self.grants.shared_link(user, params["namespace"], params["name"])
        return _json(ConnectLink(connect_url=link, expires_in_seconds=LINK_SECONDS), status=201)

    async def purge_cache(self, request: Request, user: User) -> Response:
        """``gatehouse cache purge``: the connection's cached answers never served again."""
        params = request.path_params
        return _json(
            await cache_purging.purge_cache(
                self.connections, user, params["namespace"], params["name"]
            )
        )

    async def connection_grants(self, request: Request, user: User) -> Response:
        """The connection's connected accounts (GET), or revoked (DELETE; ``?owner=`` one)."""
        params = request.path_params
        namespace, name = params["namespace"], params["name"]
        if request.method == "DELETE":
            owner = request.query_params.get("owner", "")
            if owner and not OWNER_DIGEST.match(owner):
                raise Refused(400, "invalid_request", "owner: an owner's digest, as listed")
            dropped = await self.grants.revoke(user, namespace, name, owner)
            return _json(Revoked(revoked=dropped))
        return _json(await self.grants.summary(user, namespace, name))

    async def delete_sample(self, request: Request, user: User) -> Response:
        params = request.path_params
        await self.connections.delete_sample(
            user, params["namespace"], params["name"], params["sample"]
        )
        return Response(status_code=204, headers={"Cache-Control": "no-store"})

    async def connection_requests(self, request: Request, user: User) -> Response:
        params, query = request.path_params, request.query_params
        found = await self.activity.connection_requests(
            user,
            params["namespace"],
            params["name"],
            since_of(query.get("since")),
            limit_of(query.get("limit")),
            request_cursor.read(query.get("after")),
        )
        return _json(found)

    async def connection_usage(self, request: Request, user: User) -> Response:
        params = request.path_params
        window = window_of(request.query_params.get("window"))
        found = await self.activity.connection_usage(
            user, params["namespace"], params["name"], window
        )
        return _json(found)

    def app_requests(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request, user: User) -> Response:
            params, query = request.path_params, request.query_params
            found = await self.activity.app_requests(
                user,
                params["namespace"],
                kind,
                params["name"],
                since_of(query.get("since")),
                limit_of(query.get("limit")),
                request_cursor.read(query.get("after")),
            )
            return _json(found)

        return endpoint

    def build_spec(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request, user: User) -> Response:
            params = request.path_params
            spec = await self.connections.build_spec(
                user, kind, params["namespace"], params["name"]
            )
            return _json(spec)

        return endpoint

    async def test_connection(self, request: Request, user: User) -> Response:
        """Creates a ConnectionTest for the caller and answers with its outcome."""
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        await self.connections.may_test(user, namespace, name)
        wanted = await _parsed(request, ConnectionTestRequest)
        return _json(await self.connections.run_test(user, namespace, name, wanted), 201)

    async def test_draft(self, request: Request, user: User) -> Response:
        namespace = request.path_params["namespace"]
        await self.connections.may_draft(user, namespace)
        draft = await _parsed(request, DraftTestRequest)
        token = request.headers["authorization"].partition(" ")[2].strip()
        return _json(await self.connections.test_draft(user, token, namespace, draft))

    async def save_sample(self, request: Request, user: User) -> Response:
        namespace, test = request.path_params["namespace"], request.path_params["name"]
        found = await self.connections.may_save_sample(user, namespace, test)
        wanted = await _parsed(request, SampleRequest, if_empty=b"{}")  # the label is optional
        outcome = await self.connections.save_sample(namespace, found, wanted.label)
        return _json(outcome, 201 if outcome.saved else 409)

    async def project_defaults(self, request: Request, user: User) -> Response:
        """``GET`` or ``PUT /api/v2/projects/{projectUuid}/defaults``.

        A projectUuid names a ProjectConfig only to those who may read it: anyone else gets the
        answer a projectUuid of no ProjectConfig gets, so holding one tells them nothing (its
        namespace and name are for readers). A reader who may not patch it is told so."""
        uuid_ = request.path_params["project_uuid"]
        found = self.runtime.projects.get(uuid_)
        if found is None or not await self.access.allowed(
            user, "get", PROJECT_CONFIG.plural, *found
        ):
            raise Refused(
                404, "not_found", f"no ProjectConfig you may read has projectUuid {uuid_}"
            )
        namespace, name = found
        if request.method == "PUT":
            await self.connections.require(
                user, "patch", PROJECT_CONFIG, namespace, name
            )  # before the body
            await self._update_defaults(request, namespace, name)
        body = await self.runtime.kube.resources.get_custom(PROJECT_CONFIG, namespace, name)
        if body is None:
            raise Refused(404, "not_found", f"ProjectConfig {namespace}/{name} is gone")
        stored = dict(StoredProjectConfig.model_validate(body).spec.defaults)
        effective = effective_defaults(stored)
        return JSONResponse(
            DefaultsResult(results={**stored, **effective}).model_dump(mode="json"),
            headers={"Cache-Control": "no-store"},
        )

    async def _update_defaults(self, request: Request, namespace: str, name: str) -> None:
        update = await _parsed(request, DefaultsUpdate, if_empty=b"null")
        given = update.model_dump(exclude_none=True)
        if not given:
            raise Refused(
                400,
                "invalid_request",
                "body: give column_totals and/or pre_aggregate_execution_fallback (booleans)",
            )
        # A merge patch changes only the keys given (the reference replaced the whole object).
        # Its field manager takes ownership of them, so a later `service deploy` keeps these
        # values unless the file sets the same keys.
        await self.runtime.kube.resources.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PROJECT_CONFIG.plural,
            name,
            {"spec": {"defaults": given}},
            field_manager=DEFAULTS_MANAGER,
            _content_type="application/merge-patch+json",
        )


def create_app(connections: Connections, page: Mount | None = None) -> Starlette:
    """The API's endpoints, and the connections page (see gatehouse_operator.web) when given."""
    api = ServiceApi(connections)
    prefix = "/api/v1/namespaces/{namespace}"

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi_document(request: Request) -> Response:
        return JSONResponse(openapi.document())

    async def to_page(request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=303)

    return Starlette(
        routes=[
            *((Route("/", to_page), page) if page else ()),
            Route("/healthz", healthz),
            Route("/openapi.json", openapi_document),
            Route(f"{prefix}/connections", api.authenticated(api.list_connections)),
            Route(f"{prefix}/connections/{{name}}", api.authenticated(api.get_connection)),
            Route(
                f"{prefix}/connections/{{name}}/requests",
                api.authenticated(api.connection_requests),
            ),
            Route(f"{prefix}/connections/{{name}}/usage", api.authenticated(api.connection_usage)),
            Route(
                f"{prefix}/connections/{{name}}/connect",
                api.authenticated(api.shared_connect_link),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connections/{{name}}/cache/purge",
                api.authenticated(api.purge_cache),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connections/{{name}}/grants",
                api.authenticated(api.connection_grants),
                methods=["GET", "DELETE"],
            ),
            Route(
                f"{prefix}/connections/{{name}}/samples/{{sample}}",
                api.authenticated(api.delete_sample),
                methods=["DELETE"],
            ),
            Route(
                f"{prefix}/connection-drafts/tests",
                api.authenticated(api.test_draft),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connectiontests/{{name}}/sample",
                api.authenticated(api.save_sample),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connections/{{name}}/tests",
                api.authenticated(api.test_connection),
                methods=["POST"],
            ),
            Route(
                "/api/v2/projects/{project_uuid}/defaults",
                api.authenticated(api.project_defaults),
                methods=["GET", "PUT"],
            ),
            *(
                Route(
                    f"{prefix}/{kind.plural}/{{name}}/build-spec",
                    api.authenticated(api.build_spec(kind)),
                )
                for kind in APPS.values()
            ),
            *(
                Route(
                    f"{prefix}/{kind.plural}/{{name}}/requests",
                    api.authenticated(api.app_requests(kind)),
                )
                for kind in APPS.values()
            ),
        ]
    )
