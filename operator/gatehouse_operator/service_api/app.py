"""The service API's endpoints (Starlette, served in the operator's process).

Every endpoint but ``/healthz`` and ``/openapi.json`` wants ``Authorization: Bearer <a Kubernetes
token>``: a TokenReview says who the caller is, SubjectAccessReviews say what they may do, and the
operator's own identity does the work once they may. The OpenAPI document lists the endpoints.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes.aio import client
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gatehouse_operator.access import Access, User
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.meta import API_VERSION, GROUP, VERSION, Kind, Model
from gatehouse_operator.api.project_config import PROJECT_CONFIG
from gatehouse_operator.link_policy import LINK_VERB, MANAGE_VERB
from gatehouse_operator.project_config.compiler import effective_defaults
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.service_api import handoff, openapi
from gatehouse_operator.service_api.models import (
    ConnectionList,
    ConnectionTestOutcome,
    ConnectionTestRequest,
    DefaultsResult,
    DefaultsUpdate,
    LinkableConnection,
)

APPS = {DATA_APP.plural: DATA_APP, CHART_TYPE.plural: CHART_TYPE}
DEFAULTS_MANAGER = "gatehouse-defaults-api"
# A test answers within the connection's timeout (at most 120 s) once the connection is Ready.
TEST_WAIT_SECONDS = 150.0

Endpoint = Callable[[Request, User], Awaitable[Response]]


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}
        return JSONResponse(
            {"error": {"code": self.code, "message": self.message}},
            status_code=self.status,
            headers={**headers, "Cache-Control": "no-store"},
        )


def _json(model: Model, status: int = 200) -> JSONResponse:
    return JSONResponse(
        model.model_dump(by_alias=True, mode="json"),
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


class ServiceApi:
    def __init__(self, runtime: Runtime, access: Access) -> None:
        self.runtime = runtime
        self.access = access

    def authenticated(self, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                scheme, _, token = request.headers.get("authorization", "").partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    raise ApiError(401, "unauthenticated", "send a Kubernetes bearer token")
                user = await self.access.authenticate(token.strip())
                if user is None:
                    raise ApiError(401, "unauthenticated", "the token was not accepted")
                return await endpoint(request, user)
            except ApiError as error:
                return error.response()
            except client.ApiException as error:
                # The Kubernetes API's own refusal; its body may quote the request, so only
                # the status travels on.
                answer = f"the API server answered {error.status}"
                return ApiError(502, "kubernetes_error", answer).response()

        return handle

    async def _require(
        self, user: User, verb: str, kind: Kind, namespace: str, name: str = ""
    ) -> None:
        if not await self.access.allowed(user, verb, kind.plural, namespace, name):
            target = f"{kind.plural}/{name}" if name else kind.plural
            raise ApiError(
                403, "forbidden", f"{user.name} may not {verb} {target} in namespace {namespace}"
            )

    async def list_connections(self, request: Request, user: User) -> Response:
        """The connections the caller could link: all for admins, Builders ones for others."""
        namespace = request.path_params["namespace"]
        all_visible = await self.access.allowed(
            user, MANAGE_VERB, EXTERNAL_CONNECTION.plural, namespace
        )
        if not all_visible:
            await self._require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        items = [
            _linkable(body)
            for body in await self.runtime.kube.list_custom(EXTERNAL_CONNECTION, namespace)
            if all_visible or body.get("spec", {}).get("linkPolicy") == "Builders"
        ]
        items.sort(key=lambda item: item.name)
        return _json(ConnectionList(items=items, all_visible=all_visible))

    def build_spec(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request, user: User) -> Response:
            return await self._build_spec(kind, request, user)

        return endpoint

    async def _build_spec(self, kind: Kind, request: Request, user: User) -> Response:
        """The app-build hand-off: per alias, what the app generator needs to know."""
        namespace = request.path_params["namespace"]
        name = request.path_params["name"]
        await self._require(user, "get", kind, namespace, name)
        app = await self.runtime.kube.get_custom(kind, namespace, name)
        if app is None:
            raise ApiError(404, "not_found", f"no {kind.kind} {name!r} in namespace {namespace}")
        wanted = {link["connection"] for link in app.get("spec", {}).get("connections") or []}
        connections = {
            body["metadata"]["name"]: body
            for body in await self.runtime.kube.list_custom(EXTERNAL_CONNECTION, namespace)
            if body["metadata"]["name"] in wanted
        }
        samples = {
            connection: handoff.samples_from(await self.runtime.kube.samples(namespace, connection))
            for connection in connections
        }
        return _json(handoff.build_spec(kind.kind, app, connections, samples))

    async def test_connection(self, request: Request, user: User) -> Response:
        """Creates a ConnectionTest for the caller and answers with its outcome."""
        namespace = request.path_params["namespace"]
        connection = request.path_params["name"]
        await self._require(user, "create", CONNECTION_TEST, namespace)
        try:
            wanted = ConnectionTestRequest.model_validate_json(await request.body())
        except ValidationError as error:
            raise ApiError(400, "invalid_request", _validation_message(error)) from None
        name = f"{connection[:40]}-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": API_VERSION,
            "kind": CONNECTION_TEST.kind,
            "metadata": {
                "name": name,
                "annotations": {"gatehouse.dev/requested-by": user.name[:253]},
            },
            "spec": {
                "connection": connection,
                **wanted.model_dump(by_alias=True, exclude_none=True, mode="json"),
            },
        }
        try:
            await self.runtime.kube.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, CONNECTION_TEST.plural, body
            )
        except client.ApiException as error:
            if error.status in (400, 422):
                # The admission webhook's or the schema's refusal, which names the field.
                raise ApiError(422, "invalid_request", _refusal(error)) from None
            raise
        return _json(await self._outcome(namespace, name), 201)

    async def _outcome(self, namespace: str, name: str) -> ConnectionTestOutcome:
        deadline = time.monotonic() + TEST_WAIT_SECONDS
        while time.monotonic() < deadline:
            found = await self.runtime.kube.get_custom(CONNECTION_TEST, namespace, name)
            status = (found or {}).get("status", {})
            if status.get("finishedAt"):
                passed: dict[str, Any] = next(
                    (c for c in status.get("conditions", []) if c["type"] == "Passed"), {}
                )
                return ConnectionTestOutcome(
                    name=name,
                    passed=passed.get("status") == "True",
                    reason=passed.get("reason", ""),
                    message=passed.get("message", ""),
                    response=status.get("response"),
                    sample=status.get("sample", ""),
                )
            await asyncio.sleep(0.2)
        raise ApiError(504, "test_timeout", f"ConnectionTest {name} did not finish in time")

    async def project_defaults(self, request: Request, user: User) -> Response:
        """``GET`` or ``PUT /api/v2/projects/{projectUuid}/defaults``."""
        uuid_ = request.path_params["project_uuid"]
        found = self.runtime.projects.get(uuid_)
        if found is None:
            raise ApiError(404, "not_found", f"no ProjectConfig has projectUuid {uuid_}")
        namespace, name = found
        verb = "get" if request.method == "GET" else "patch"
        await self._require(user, verb, PROJECT_CONFIG, namespace, name)
        if request.method == "PUT":
            await self._update_defaults(request, namespace, name)
        body = await self.runtime.kube.get_custom(PROJECT_CONFIG, namespace, name)
        if body is None:
            raise ApiError(404, "not_found", f"ProjectConfig {namespace}/{name} is gone")
        stored = dict(body.get("spec", {}).get("defaults") or {})
        effective = effective_defaults(stored)
        return JSONResponse(
            DefaultsResult(results={**stored, **effective}).model_dump(mode="json"),
            headers={"Cache-Control": "no-store"},
        )

    async def _update_defaults(self, request: Request, namespace: str, name: str) -> None:
        try:
            update = DefaultsUpdate.model_validate_json(await request.body() or b"null")
        except ValidationError as error:
            raise ApiError(400, "invalid_request", _validation_message(error)) from None
        given = update.model_dump(exclude_none=True)
        if not given:
            raise ApiError(
                400,
                "invalid_request",
                "body: give column_totals and/or pre_aggregate_execution_fallback (booleans)",
            )
        # A merge patch changes only the keys given (the reference replaced the whole object).
        # Its field manager takes ownership of them, so a later `service deploy` keeps these
        # values unless the file sets the same keys.
        await self.runtime.kube.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PROJECT_CONFIG.plural,
            name,
            {"spec": {"defaults": given}},
            field_manager=DEFAULTS_MANAGER,
            _content_type="application/merge-patch+json",
        )


def _linkable(body: dict[str, Any]) -> LinkableConnection:
    spec = body.get("spec", {})
    status = body.get("status", {})
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )
    return LinkableConnection(
        name=body["metadata"]["name"],
        display_name=spec.get("displayName", ""),
        origin=status.get("origin") or spec.get("baseURL", ""),
        allowed_methods=spec.get("allowedMethods") or ["GET"],
        allowed_paths=spec.get("allowedPaths") or [],
        auth_type=spec.get("auth", {}).get("type", "none"),
        has_secret=bool(status.get("hasSecret")),
        link_policy=spec.get("linkPolicy", "AdminsOnly"),
        allow_public_images=bool(spec.get("allowPublicImages")),
        instructions=spec.get("instructions", ""),
        ready=ready,
    )


def _validation_message(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


def _refusal(error: client.ApiException) -> str:
    try:
        return str(json.loads(error.body or "").get("message", ""))[:1024]
    except (ValueError, TypeError, AttributeError):
        return f"the API server refused the test ({error.status})"


def create_app(runtime: Runtime, access: Access) -> Starlette:
    api = ServiceApi(runtime, access)
    prefix = "/api/v1/namespaces/{namespace}"

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi_document(request: Request) -> Response:
        return JSONResponse(openapi.document())

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/openapi.json", openapi_document),
            Route(f"{prefix}/connections", api.authenticated(api.list_connections)),
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
        ]
    )
