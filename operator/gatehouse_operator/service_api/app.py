"""The service API's endpoints (Starlette, served in the operator's process).

Every endpoint but ``/healthz`` and ``/openapi.json`` wants ``Authorization: Bearer <a Kubernetes
token>``: a TokenReview says who the caller is, SubjectAccessReviews say what they may do, and the
operator's own identity does the work once they may. The OpenAPI document lists the endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from kubernetes.aio import client
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from gatehouse_operator import drafts, samples
from gatehouse_operator.access import Access, User
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    SAVE_AS_SAMPLE_ANNOTATION,
    SampleRequest,
)
from gatehouse_operator.api.meta import API_VERSION, GROUP, VERSION, Kind, Model
from gatehouse_operator.api.project_config import PROJECT_CONFIG
from gatehouse_operator.as_user import as_user, refusal
from gatehouse_operator.link_policy import LINK_VERB, MANAGE_VERB
from gatehouse_operator.project_config.compiler import effective_defaults
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.service_api import handoff, openapi
from gatehouse_operator.service_api.models import (
    BODY_SECONDS,
    MAX_BODY_BYTES,
    ConnectionDetail,
    ConnectionList,
    ConnectionTestOutcome,
    ConnectionTestRequest,
    DefaultsResult,
    DefaultsUpdate,
    DraftTestOutcome,
    DraftTestRequest,
    LinkableConnection,
    SampleSaveOutcome,
)
from gatehouse_operator.status import condition

APPS = {DATA_APP.plural: DATA_APP, CHART_TYPE.plural: CHART_TYPE}
DEFAULTS_MANAGER = "gatehouse-defaults-api"
# A test answers within the connection's timeout (at most 120 s) once the connection is Ready.
TEST_WAIT_SECONDS = 150.0
# Saving is one ConnectionSample written by the operator once it sees the annotation.
SAVE_WAIT_SECONDS = 30.0
# What one caller may have running at once: each holds the operator's attention (a test through
# the API polls its ConnectionTest until it finishes; a draft runs a dry run and a test).
MAX_TESTS_PER_CALLER = 4
MAX_DRAFTS_PER_CALLER = 2

Endpoint = Callable[[Request, User], Awaitable[Response]]
Body = TypeVar("Body", bound=BaseModel)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}
        if self.status == 429:
            headers["Retry-After"] = "1"
        return JSONResponse(
            {"error": {"code": self.code, "message": self.message}},
            status_code=self.status,
            headers={**headers, "Cache-Control": "no-store"},
        )


def _too_large() -> ApiError:
    return ApiError(413, "request_too_large", f"body: at most {MAX_BODY_BYTES:,} bytes of JSON")


async def _body(request: Request) -> bytes:
    """The request's body, refused past MAX_BODY_BYTES: by its declared length before any of it
    is read, and while it streams (a chunked body, or one longer than it said); and past
    BODY_SECONDS."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
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
        raise ApiError(
            408, "request_timeout", f"body: not received within {BODY_SECONDS:g} s"
        ) from None
    return b"".join(chunks)


async def _parsed(request: Request, model: type[Body], if_empty: bytes = b"") -> Body:
    """The request's JSON body as ``model``; 400 naming the field and the rule otherwise. Call
    it once the caller is known to be allowed what the body asks."""
    try:
        return model.model_validate_json(await _body(request) or if_empty)
    except ValidationError as error:
        raise ApiError(400, "invalid_request", validation_message(error)) from None


class PerCaller:
    """At most ``limit`` operations of one kind per caller at once; more are refused (429)."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self._running: Counter[str] = Counter()

    @contextlib.contextmanager
    def slot(self, user: User) -> Iterator[None]:
        if self._running[user.name] >= self.limit:
            raise ApiError(
                429,
                "too_many_requests",
                f"{user.name} has {self.limit} {self.what} running, the most one caller may "
                "run at once: try again when one has finished",
            )
        self._running[user.name] += 1
        try:
            yield
        finally:
            self._running[user.name] -= 1
            if not self._running[user.name]:
                del self._running[user.name]


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
        self.tests = PerCaller("connection tests", MAX_TESTS_PER_CALLER)
        self.drafts = PerCaller("draft tests", MAX_DRAFTS_PER_CALLER)

    def authenticated(self, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                check_names(request.path_params)
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

    async def may_manage(self, user: User, namespace: str, name: str = "") -> bool:
        return await self.access.allowed(
            user, MANAGE_VERB, EXTERNAL_CONNECTION.plural, namespace, name
        )

    async def visible_connections(self, user: User, namespace: str) -> ConnectionList:
        """The connections the caller could link: all for admins, Builders ones for others."""
        all_visible = await self.may_manage(user, namespace)
        if not all_visible:
            await self._require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        linked_by = await self._linked_by(namespace)
        items = [
            linkable(body, linked_by)
            for body in await self.runtime.kube.list_custom(EXTERNAL_CONNECTION, namespace)
            if all_visible or body.get("spec", {}).get("linkPolicy") == "Builders"
        ]
        items.sort(key=lambda item: item.name)
        return ConnectionList(items=items, all_visible=all_visible)

    async def _linked_by(self, namespace: str) -> dict[str, list[str]]:
        """Connection name to the apps linking it (Kind/name), read with the operator's identity:
        the callers who may see a connection may not be allowed to list every app."""
        found: dict[str, set[str]] = {}
        for kind in APPS.values():
            for app in await self.runtime.kube.list_custom(kind, namespace):
                for link in app.get("spec", {}).get("connections") or []:
                    found.setdefault(link["connection"], set()).add(
                        f"{kind.kind}/{app['metadata']['name']}"
                    )
        return {name: sorted(apps) for name, apps in found.items()}

    async def visible(self, user: User, namespace: str, name: str) -> tuple[dict[str, Any], bool]:
        """A connection the caller may see, and whether they may manage it. Others are 404
        alike, so a builder learns nothing of AdminsOnly connections, not even that they exist."""
        can_manage = await self.may_manage(user, namespace, name)
        if not can_manage:
            await self._require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        body = await self.runtime.kube.get_custom(EXTERNAL_CONNECTION, namespace, name)
        if body is None or not (can_manage or body.get("spec", {}).get("linkPolicy") == "Builders"):
            raise ApiError(404, "not_found", f"no connection {name!r} you may see in {namespace}")
        return body, can_manage

    async def connection_detail(self, user: User, namespace: str, name: str) -> ConnectionDetail:
        """One connection the caller may see, with its samples."""
        body, can_manage = await self.visible(user, namespace, name)
        spec = body.get("spec", {})
        return ConnectionDetail(
            connection=linkable(body, await self._linked_by(namespace)),
            auth=dict(spec.get("auth") or {"type": "none"}),
            limits=dict(spec.get("limits") or {}),
            samples=handoff.samples_from(await self.runtime.kube.samples(namespace, name)),
            can_manage=can_manage,
        )

    async def delete_sample(self, user: User, namespace: str, name: str, sample: str) -> None:
        if not await self.may_manage(user, namespace, name):
            raise ApiError(
                403,
                "forbidden",
                f"{user.name} may not delete samples of {name} in namespace {namespace}",
            )
        if not await self.runtime.kube.delete_sample(namespace, name, sample):
            raise ApiError(404, "not_found", f"connection {name!r} has no sample {sample!r}")

    async def list_connections(self, request: Request, user: User) -> Response:
        return _json(await self.visible_connections(user, request.path_params["namespace"]))

    async def get_connection(self, request: Request, user: User) -> Response:
        params = request.path_params
        return _json(await self.connection_detail(user, params["namespace"], params["name"]))

    async def delete_sample_endpoint(self, request: Request, user: User) -> Response:
        params = request.path_params
        await self.delete_sample(user, params["namespace"], params["name"], params["sample"])
        return Response(status_code=204, headers={"Cache-Control": "no-store"})

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
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        await self.may_test(user, namespace, name)
        wanted = await _parsed(request, ConnectionTestRequest)
        return _json(await self.run_test(user, namespace, name, wanted), 201)

    async def may_test(self, user: User, namespace: str, connection: str) -> dict[str, Any]:
        """The connection, if the caller may test it: create on connectiontests, and a
        connection they may see."""
        await self._require(user, "create", CONNECTION_TEST, namespace)
        body, _ = await self.visible(user, namespace, connection)
        return body

    async def run_test(
        self, user: User, namespace: str, connection: str, wanted: ConnectionTestRequest
    ) -> ConnectionTestOutcome:
        """Runs the test for a caller may_test allowed, and waits for its outcome."""
        with self.tests.slot(user):
            return await self._run_test(user, namespace, connection, wanted)

    async def _run_test(
        self, user: User, namespace: str, connection: str, wanted: ConnectionTestRequest
    ) -> ConnectionTestOutcome:
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
                raise ApiError(422, "invalid_request", refusal(error)) from None
            raise
        return await self._outcome(namespace, name)

    async def test_draft_endpoint(self, request: Request, user: User) -> Response:
        namespace = request.path_params["namespace"]
        await self.may_draft(user, namespace)
        draft = await _parsed(request, DraftTestRequest)
        token = request.headers["authorization"].partition(" ")[2].strip()
        return _json(await self.test_draft(user, token, namespace, draft))

    async def may_draft(self, user: User, namespace: str) -> None:
        """A test of a saved connection needs create on connectiontests; so does a draft's."""
        await self._require(user, "create", CONNECTION_TEST, namespace)

    async def test_draft(
        self, user: User, token: str, namespace: str, draft: DraftTestRequest
    ) -> DraftTestOutcome:
        """Tries a connection that is not saved, for a caller may_draft allowed. The API server
        decides, as the caller, whether they could apply it (see gatehouse_operator.drafts): its
        admission lets a draft name a Secret, or move a stored one to another baseURL, only for
        those who may read that Secret (see gatehouse_operator.secret_use)."""
        with self.drafts.slot(user):
            async with as_user(self.runtime.kube.core.api_client, token) as kube:
                try:
                    spec = await drafts.checked_spec(kube, namespace, draft)
                except drafts.DraftRefused as refused:
                    raise ApiError(*_draft_refusal(refused.status), refused.message) from None
            return await drafts.try_draft(self.runtime, namespace, draft, spec)

    async def save_sample_endpoint(self, request: Request, user: User) -> Response:
        namespace, test = request.path_params["namespace"], request.path_params["name"]
        found = await self.may_save_sample(user, namespace, test)
        wanted = await _parsed(request, SampleRequest, if_empty=b"null")
        outcome = await self.save_sample(namespace, found, wanted.label)
        return _json(outcome, 201 if outcome.saved else 409)

    async def may_save_sample(self, user: User, namespace: str, test: str) -> dict[str, Any]:
        """The ConnectionTest, if the caller may save it: patch on it, and its connection one
        they may see."""
        await self._require(user, "patch", CONNECTION_TEST, namespace, test)
        found = await self.runtime.kube.get_custom(CONNECTION_TEST, namespace, test)
        if found is None:
            raise ApiError(404, "not_found", f"no ConnectionTest {test!r} in {namespace}")
        await self.visible(user, namespace, found.get("spec", {}).get("connection", ""))
        return found

    async def save_sample(
        self, namespace: str, found: dict[str, Any], label: str
    ) -> SampleSaveOutcome:
        """Keeps a finished, passing test (``found``, as may_save_sample gave it) as a sample:
        the annotation the operator acts on, as ``kubectl annotate`` or ``gatehouse
        save-sample`` would set it, so one rule decides. The operator removes the annotation
        once it answered: then the status holds the answer."""
        test = found["metadata"]["name"]
        status = found.get("status", {})
        if not status.get("finishedAt"):
            return SampleSaveOutcome(
                saved=False, reason="NotFinished", message="the test has not finished yet"
            )
        refused = samples.save_refusal(status, label)
        if refused is not None:
            return SampleSaveOutcome(saved=False, reason=refused.reason, message=refused.message)
        await self.runtime.kube.annotate(
            CONNECTION_TEST, namespace, test, SAVE_AS_SAMPLE_ANNOTATION, label.strip()
        )
        deadline = time.monotonic() + SAVE_WAIT_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            now = await self.runtime.kube.get_custom(CONNECTION_TEST, namespace, test)
            if now is None:
                raise ApiError(404, "not_found", f"ConnectionTest {test!r} was deleted")
            if SAVE_AS_SAMPLE_ANNOTATION in now["metadata"].get("annotations", {}):
                continue
            status = now.get("status", {})
            saved = condition(status, "SampleSaved")
            return SampleSaveOutcome(
                saved=bool(status.get("sample")),
                sample=status.get("sample", ""),
                reason=saved.get("reason", ""),
                message=saved.get("message", ""),
            )
        raise ApiError(504, "save_timeout", f"ConnectionTest {test} was not saved in time")

    async def _outcome(self, namespace: str, name: str) -> ConnectionTestOutcome:
        deadline = time.monotonic() + TEST_WAIT_SECONDS
        while time.monotonic() < deadline:
            found = await self.runtime.kube.get_custom(CONNECTION_TEST, namespace, name)
            status = (found or {}).get("status", {})
            if status.get("finishedAt"):
                passed = condition(status, "Passed")
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
        await self._require(user, verb, PROJECT_CONFIG, namespace, name)  # before the body
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
        update = await _parsed(request, DefaultsUpdate, if_empty=b"null")
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


def _draft_refusal(status: int) -> tuple[int, str]:
    """The API server's answer to a draft's dry run, as this API's status and code."""
    if status in (401, 403, 404, 409):
        names = {401: "unauthenticated", 403: "forbidden", 404: "not_found", 409: "conflict"}
        return status, names[status]
    if status in (400, 422):
        return 422, "invalid_request"
    return 502, "kubernetes_error"


def linkable(body: dict[str, Any], linked_by: dict[str, list[str]]) -> LinkableConnection:
    """A connection as the list shows it; ``linked_by`` maps names to the apps linking them."""
    spec = body.get("spec", {})
    status = body.get("status", {})
    ready = condition(status, "Ready")
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
        ready=ready.get("status") == "True",
        ready_reason=ready.get("reason", ""),
        ready_message=ready.get("message", ""),
        linked_by=linked_by.get(body["metadata"]["name"], []),
    )


# A namespace, resource or sample name as Kubernetes spells them (a DNS subdomain; projectUuid
# fits too). Anything else (``..``, ``%2F``) never reaches a permission check or an API path.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def check_names(params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        if not (isinstance(value, str) and len(value) <= 253 and _NAME.match(value)):
            raise ApiError(404, "not_found", f"{key}: not a Kubernetes name")


def validation_message(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


def create_app(runtime: Runtime, access: Access, page: Mount | None = None) -> Starlette:
    """The API's endpoints, and the connections page (see gatehouse_operator.web) when given."""
    api = ServiceApi(runtime, access)
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
                f"{prefix}/connections/{{name}}/samples/{{sample}}",
                api.authenticated(api.delete_sample_endpoint),
                methods=["DELETE"],
            ),
            Route(
                f"{prefix}/connection-drafts/tests",
                api.authenticated(api.test_draft_endpoint),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/connectiontests/{{name}}/sample",
                api.authenticated(api.save_sample_endpoint),
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
        ]
    )
