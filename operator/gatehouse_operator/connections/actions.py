"""What a caller may do with connections, as the caller's RBAC allows: list and read them, run a
test and wait for it, try a draft, save and delete samples, and hand an app's links to its build.

The service API and the connections page both call these; neither holds a rule of its own. A
caller is authenticated by them (a TokenReview); what the caller may do is asked here
(SubjectAccessReviews), and the operator's own identity does the work once they may.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from kubernetes.aio import client

from gatehouse_operator.access.as_user import as_user, refusal
from gatehouse_operator.access.reviews import Access, User
from gatehouse_operator.api import link_policy
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.connection import (
    EXTERNAL_CONNECTION,
    allowed_methods_of,
    link_policy_of,
)
from gatehouse_operator.api.connection_test import CONNECTION_TEST, SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.api.link_policy import LINK_VERB, MANAGE_VERB
from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.connections import drafts, handoff, runs
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.exfiltration import connection_warning
from gatehouse_operator.connections.models import (
    BuildSpec,
    ConnectionDetail,
    ConnectionList,
    ConnectionTestOutcome,
    ConnectionTestRequest,
    DraftTestOutcome,
    DraftTestRequest,
    LinkableConnection,
    SampleSaveOutcome,
)
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.status import condition

APPS = {DATA_APP.plural: DATA_APP, CHART_TYPE.plural: CHART_TYPE}
# What one caller may have running at once: each holds the operator's attention (a test polls
# its ConnectionTest until it finishes; a draft runs a dry run and a test).
MAX_TESTS_PER_CALLER = 4
MAX_DRAFTS_PER_CALLER = 2


class AppLists:
    """A namespace's data apps and chart types, each listed once (with the operator's identity)
    however many parts of one answer read them: a page shows who links a connection and what the
    visitor may link it into."""

    def __init__(self, runtime: Runtime, namespace: str) -> None:
        self.runtime = runtime
        self.namespace = namespace
        self._listed: dict[str, list[dict[str, Any]]] = {}

    async def of(self, kind: Kind) -> list[dict[str, Any]]:
        listed = self._listed.get(kind.plural)
        if listed is None:
            listed = await self.runtime.kube.list_custom(kind, self.namespace)
            self._listed[kind.plural] = listed
        return listed


class PerCaller:
    """At most ``limit`` operations of one kind per caller at once; more are refused (429)."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self._running: Counter[str] = Counter()

    @contextlib.contextmanager
    def slot(self, user: User) -> Iterator[None]:
        if self._running[user.name] >= self.limit:
            raise Refused(
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


class Connections:
    def __init__(self, runtime: Runtime, access: Access) -> None:
        self.runtime = runtime
        self.access = access
        self.tests = PerCaller("connection tests", MAX_TESTS_PER_CALLER)
        self.drafts = PerCaller("draft tests", MAX_DRAFTS_PER_CALLER)

    async def require(
        self, user: User, verb: str, kind: Kind, namespace: str, name: str = ""
    ) -> None:
        if not await self.access.allowed(user, verb, kind.plural, namespace, name):
            target = f"{kind.plural}/{name}" if name else kind.plural
            raise Refused(
                403, "forbidden", f"{user.name} may not {verb} {target} in namespace {namespace}"
            )

    async def may_manage(self, user: User, namespace: str, name: str = "") -> bool:
        return await self.access.allowed(
            user, MANAGE_VERB, EXTERNAL_CONNECTION.plural, namespace, name
        )

    def permission(
        self, user: User, namespace: str, *, whole_namespace: bool = False
    ) -> link_policy.Permission:
        """The caller's rights on the namespace's connections, for link_policy: on each one by
        name, or (``whole_namespace``) on all of them at once, whatever the name asked. Each is
        asked once (a SubjectAccessReview) however often the rule asks it."""
        known: dict[tuple[str, str], bool] = {}

        async def may(verb: str, name: str) -> bool:
            name = "" if whole_namespace else name
            if (verb, name) not in known:
                known[verb, name] = await self.access.allowed(
                    user, verb, EXTERNAL_CONNECTION.plural, namespace, name
                )
            return known[verb, name]

        return may

    # --- Listing and reading -------------------------------------------------------------------

    async def visible_connections(
        self, user: User, namespace: str, apps: AppLists | None = None
    ) -> ConnectionList:
        """The connections the caller could link: all for admins, Builders ones for others.
        A list is decided by the caller's rights on the whole namespace's connections."""
        may = self.permission(user, namespace, whole_namespace=True)
        all_visible = await may(MANAGE_VERB, "")
        if not all_visible:
            await self.require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        linked_by = await self._linked_by(apps or AppLists(self.runtime, namespace))
        items = [
            linkable(body, linked_by)
            for body in await self.runtime.kube.list_custom(EXTERNAL_CONNECTION, namespace)
            if await link_policy.may_see_connection(may, body["metadata"]["name"], body)
        ]
        items.sort(key=lambda item: item.name)
        return ConnectionList(items=items, all_visible=all_visible)

    async def _linked_by(self, apps: AppLists) -> dict[str, list[str]]:
        """Connection name to the apps linking it (Kind/name), read with the operator's identity:
        the callers who may see a connection may not be allowed to list every app."""
        found: dict[str, set[str]] = {}
        for kind in APPS.values():
            for app in await apps.of(kind):
                for link in app.get("spec", {}).get("connections") or []:
                    found.setdefault(link["connection"], set()).add(
                        f"{kind.kind}/{app['metadata']['name']}"
                    )
        return {name: sorted(apps) for name, apps in found.items()}

    async def visible(self, user: User, namespace: str, name: str) -> tuple[dict[str, Any], bool]:
        """A connection the caller may see (link_policy.may_see), and whether they may manage
        it. Others are 404 alike, so a builder learns nothing of AdminsOnly connections, not
        even that they exist; a caller who may link nothing at all is told that (403)."""
        may = self.permission(user, namespace)
        can_manage = await may(MANAGE_VERB, name)
        if not can_manage:
            await self.require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        body = await self.runtime.kube.get_custom(EXTERNAL_CONNECTION, namespace, name)
        if body is None or not await link_policy.may_see_connection(may, name, body):
            raise Refused(404, "not_found", f"no connection {name!r} you may see in {namespace}")
        return body, can_manage

    async def connection_detail(
        self, user: User, namespace: str, name: str, apps: AppLists | None = None
    ) -> ConnectionDetail:
        """One connection the caller may see, with its samples."""
        body, can_manage = await self.visible(user, namespace, name)
        spec = body.get("spec", {})
        linked_by = await self._linked_by(apps or AppLists(self.runtime, namespace))
        return ConnectionDetail(
            connection=linkable(body, linked_by),
            auth=dict(spec.get("auth") or {"type": "none"}),
            headers=handoff.headers_of(spec),
            allowed_content_types=list(spec.get("allowedContentTypes") or []),
            limits=dict(spec.get("limits") or {}),
            samples=handoff.samples_from(await self.runtime.kube.samples(namespace, name)),
            can_manage=can_manage,
        )

    # --- Samples -------------------------------------------------------------------------------

    async def delete_sample(self, user: User, namespace: str, name: str, sample: str) -> None:
        if not await self.may_manage(user, namespace, name):
            raise Refused(
                403,
                "forbidden",
                f"{user.name} may not delete samples of {name} in namespace {namespace}",
            )
        if not await self.runtime.kube.delete_sample(namespace, name, sample):
            raise Refused(404, "not_found", f"connection {name!r} has no sample {sample!r}")

    async def may_save_sample(self, user: User, namespace: str, test: str) -> dict[str, Any]:
        """The ConnectionTest, if the caller may save it: patch on it, and its connection one
        they may see."""
        await self.require(user, "patch", CONNECTION_TEST, namespace, test)
        found = await self.runtime.kube.get_custom(CONNECTION_TEST, namespace, test)
        if found is None:
            raise Refused(404, "not_found", f"no ConnectionTest {test!r} in {namespace}")
        await self.visible(user, namespace, found.get("spec", {}).get("connection", ""))
        return found

    async def save_sample(
        self, namespace: str, found: dict[str, Any], label: str
    ) -> SampleSaveOutcome:
        """Keeps a finished, passing test (``found``, as may_save_sample gave it) as a sample:
        the annotation the operator acts on, as ``kubectl annotate`` or ``gatehouse
        save-sample`` would set it, so one rule decides."""
        test = found["metadata"]["name"]
        refused = runs.save_request(found, label)
        if refused is not None:
            return refused
        kube = self.runtime.kube
        await kube.annotate(
            CONNECTION_TEST, namespace, test, SAVE_AS_SAMPLE_ANNOTATION, label.strip()
        )
        return await runs.wait_until_saved(
            test, lambda: kube.get_custom(CONNECTION_TEST, namespace, test)
        )

    # --- Tests ---------------------------------------------------------------------------------

    async def may_test(self, user: User, namespace: str, connection: str) -> dict[str, Any]:
        """The connection, if the caller may test it: create on connectiontests, and a
        connection they may see."""
        await self.require(user, "create", CONNECTION_TEST, namespace)
        body, _ = await self.visible(user, namespace, connection)
        return body

    async def run_test(
        self, user: User, namespace: str, connection: str, wanted: ConnectionTestRequest
    ) -> ConnectionTestOutcome:
        """Runs the test for a caller may_test allowed, and waits for its outcome."""
        with self.tests.slot(user):
            spec = wanted.model_dump(by_alias=True, exclude_none=True, mode="json")
            body = runs.new_test(connection, spec, requested_by=user.name)
            name = body["metadata"]["name"]
            kube = self.runtime.kube
            try:
                await kube.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, CONNECTION_TEST.plural, body
                )
            except client.ApiException as error:
                if error.status in (400, 422):
                    # The admission webhook's or the schema's refusal, which names the field.
                    raise Refused(422, "invalid_request", refusal(error)) from None
                raise
            return await runs.wait_for_outcome(
                name, lambda: kube.get_custom(CONNECTION_TEST, namespace, name)
            )

    async def may_draft(self, user: User, namespace: str) -> None:
        """A test of a saved connection needs create on connectiontests; so does a draft's."""
        await self.require(user, "create", CONNECTION_TEST, namespace)

    async def test_draft(
        self, user: User, token: str, namespace: str, draft: DraftTestRequest
    ) -> DraftTestOutcome:
        """Tries a connection that is not saved, for a caller may_draft allowed. The API server
        decides, as the caller, whether they could apply it (see drafts): its admission lets a
        draft name a Secret, or move a stored one to another baseURL, only for those who may
        read that Secret (see gatehouse_operator.access.secret_use)."""
        with self.drafts.slot(user):
            async with as_user(self.runtime.kube.core.api_client, token) as kube:
                try:
                    spec = await drafts.checked_spec(kube, namespace, draft)
                except drafts.DraftRefused as refused:
                    raise Refused(*_draft_refusal(refused.status), refused.message) from None
            return await drafts.try_draft(self.runtime, namespace, draft, spec)

    # --- Linking -------------------------------------------------------------------------------

    async def build_spec(self, user: User, kind: Kind, namespace: str, name: str) -> BuildSpec:
        """The app-build hand-off: per alias, what the app generator needs to know, of each
        linked connection only as much as the caller may see of it (link_policy.may_see): the
        app's own alias and fetch path for the others, whether they exist or not."""
        await self.require(user, "get", kind, namespace, name)
        kube = self.runtime.kube
        app = await kube.get_custom(kind, namespace, name)
        if app is None:
            raise Refused(404, "not_found", f"no {kind.kind} {name!r} in namespace {namespace}")
        wanted = {link["connection"] for link in app.get("spec", {}).get("connections") or []}
        found = {
            body["metadata"]["name"]: body
            for body in await kube.list_custom(EXTERNAL_CONNECTION, namespace)
            if body["metadata"]["name"] in wanted
        }
        may = self.permission(user, namespace)
        connections = {}
        for connection in sorted(wanted):
            body = found.get(connection)
            # A manager sees a link to a missing connection too: may_see, not may_see_connection.
            if await link_policy.may_see(may, connection, link_policy.policy_of(body)):
                connections[connection] = body
        samples = {
            connection: handoff.samples_from(await kube.samples(namespace, connection))
            for connection, body in connections.items()
            if body is not None
        }
        return handoff.build_spec(kind.kind, app, connections, samples)


def _draft_refusal(status: int) -> tuple[int, str]:
    """The API server's answer to a draft's dry run, as a refusal's status and code."""
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
    ready = condition(status, ConditionType.READY)
    return LinkableConnection(
        name=body["metadata"]["name"],
        display_name=spec.get("displayName", ""),
        origin=status.get("origin") or spec.get("baseURL", ""),
        allowed_methods=allowed_methods_of(spec),
        allowed_paths=spec.get("allowedPaths") or [],
        auth_type=spec.get("auth", {}).get("type", "none"),
        has_secret=bool(status.get("hasSecret")),
        link_policy=link_policy_of(spec),
        allow_public_images=bool(spec.get("allowPublicImages")),
        instructions=spec.get("instructions", ""),
        ready=ready.get("status") == "True",
        ready_reason=ready.get("reason", ""),
        ready_message=ready.get("message", ""),
        linked_by=linked_by.get(body["metadata"]["name"], []),
        link_warning=connection_warning(body),
    )
