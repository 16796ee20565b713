"""What a caller may do with connections, as the caller's RBAC allows: list and read them, run a
test and wait for it, try a draft, save and delete samples, and hand an app's links to its build.

The service API and the connections page both call these; neither holds a rule of its own. A
caller is authenticated by them (a TokenReview); what the caller may do is asked here
(SubjectAccessReviews), and the operator's own identity does the work once they may.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from gatehouse_operator.access.as_user import UserObject, as_user, refusal
from gatehouse_operator.access.reviews import Access, User
from gatehouse_operator.api import link_policy
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_test import CONNECTION_TEST, SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.api.link_policy import LINK_VERB, MANAGE_VERB
from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.api.stored import StoredApp, StoredConnection, StoredConnectionTest
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
    Paused,
    SampleSaveOutcome,
)
from gatehouse_operator.kube.errors import Invalid
from gatehouse_operator.runtime import Runtime

APPS = {DATA_APP.plural: DATA_APP, CHART_TYPE.plural: CHART_TYPE}
# What one caller may have running at once: each holds the operator's attention (a test polls
# its ConnectionTest until it finishes; a draft runs a dry run and a test).
MAX_TESTS_PER_CALLER = 4
MAX_DRAFTS_PER_CALLER = 2


@dataclass(frozen=True)
class Managed:
    """A connection as read, with what changes it: the version an edit replaces, the uid a
    delete is for."""

    connection: StoredConnection
    resource_version: str
    uid: str


class AppLists:
    """A namespace's data apps and chart types, each listed once (with the operator's identity)
    however many parts of one answer read them: a page shows who links a connection and what the
    visitor may link it into."""

    def __init__(self, runtime: Runtime, namespace: str) -> None:
        self.runtime = runtime
        self.namespace = namespace
        self._listed: dict[str, list[StoredApp]] = {}

    async def of(self, kind: Kind) -> list[StoredApp]:
        listed = self._listed.get(kind.plural)
        if listed is None:
            listed = [
                StoredApp.of(body)
                for body in await self.runtime.kube.resources.list_custom(kind, self.namespace)
            ]
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
        stored = await self.runtime.kube.resources.list_custom(EXTERNAL_CONNECTION, namespace)
        items = [
            linkable(connection, linked_by)
            for connection in map(StoredConnection.of, stored)
            if await link_policy.may_see_connection(may, connection.name, connection)
        ]
        items.sort(key=lambda item: item.name)
        return ConnectionList(items=items, all_visible=all_visible)

    async def _linked_by(self, apps: AppLists) -> dict[str, list[str]]:
        """Connection name to the apps linking it (Kind/name), read with the operator's identity:
        the callers who may see a connection may not be allowed to list every app."""
        found: dict[str, set[str]] = {}
        for kind in APPS.values():
            for app in await apps.of(kind):
                for connection in app.linked:
                    found.setdefault(connection, set()).add(f"{kind.kind}/{app.name}")
        return {name: sorted(apps) for name, apps in found.items()}

    async def visible(self, user: User, namespace: str, name: str) -> tuple[StoredConnection, bool]:
        """A connection the caller may see (link_policy.may_see), and whether they may manage
        it. Others are 404 alike, so a builder learns nothing of AdminsOnly connections, not
        even that they exist; a caller who may link nothing at all is told that (403)."""
        managed, can_manage = await self.visible_to_manage(user, namespace, name)
        return managed.connection, can_manage

    async def visible_to_manage(
        self, user: User, namespace: str, name: str
    ) -> tuple[Managed, bool]:
        """As visible, with the version read and the uid: for an edit that replaces the version
        read, or a delete of the object read."""
        may = self.permission(user, namespace)
        can_manage = await may(MANAGE_VERB, name)
        if not can_manage:
            await self.require(user, LINK_VERB, EXTERNAL_CONNECTION, namespace)
        body = await self.runtime.kube.resources.get_custom(EXTERNAL_CONNECTION, namespace, name)
        if body is not None:
            connection = StoredConnection.of(body)
            if await link_policy.may_see_connection(may, name, connection):
                meta = UserObject.model_validate(body).metadata
                return Managed(connection, meta.resource_version, meta.uid), can_manage
        raise Refused(404, "not_found", f"no connection {name!r} you may see in {namespace}")

    async def connection_detail(
        self, user: User, namespace: str, name: str, apps: AppLists | None = None
    ) -> ConnectionDetail:
        """One connection the caller may see, with its samples."""
        connection, can_manage = await self.visible(user, namespace, name)
        spec = connection.spec
        linked_by = await self._linked_by(apps or AppLists(self.runtime, namespace))
        return ConnectionDetail(
            connection=linkable(connection, linked_by),
            auth=dict(spec.auth or {"type": "none"}),
            headers=handoff.headers_of(spec),
            allowed_content_types=list(spec.allowed_content_types),
            limits=dict(spec.limits),
            paused=[
                Paused(
                    scope=pause.scope,
                    endpoint=pause.endpoint,
                    status=pause.status,
                    retry_after_seconds=pause.seconds,
                    until=pause.until,
                )
                for pause in self.runtime.channel.throttles.paused(f"{namespace}/{name}")
            ],
            samples=handoff.samples_from(await self.runtime.kube.samples.saved(namespace, name)),
            can_manage=can_manage,
            cache=spec.cache,
            cache_purged_at=connection.cache_purged_at,
            tls=spec.tls,
            client_certificate=connection.status.client_certificate,
        )

    # --- Samples -------------------------------------------------------------------------------

    async def delete_sample(self, user: User, namespace: str, name: str, sample: str) -> None:
        if not await self.may_manage(user, namespace, name):
            raise Refused(
                403,
                "forbidden",
                f"{user.name} may not delete samples of {name} in namespace {namespace}",
            )
        if not await self.runtime.kube.samples.delete(namespace, name, sample):
            raise Refused(404, "not_found", f"connection {name!r} has no sample {sample!r}")

    async def may_save_sample(self, user: User, namespace: str, test: str) -> StoredConnectionTest:
        """The ConnectionTest, if the caller may save it: patch on it, and its connection one
        they may see."""
        await self.require(user, "patch", CONNECTION_TEST, namespace, test)
        found = await self.runtime.kube.resources.get_custom(CONNECTION_TEST, namespace, test)
        if found is None:
            raise Refused(404, "not_found", f"no ConnectionTest {test!r} in {namespace}")
        stored = StoredConnectionTest.of(found)
        await self.visible(user, namespace, stored.spec.connection)
        return stored

    async def save_sample(
        self, namespace: str, found: StoredConnectionTest, label: str
    ) -> SampleSaveOutcome:
        """Keeps a finished, passing test (``found``, as may_save_sample gave it) as a sample:
        the annotation the operator acts on, as ``kubectl annotate`` or ``gatehouse
        save-sample`` would set it, so one rule decides."""
        test = found.name
        refused = runs.save_request(found, label)
        if refused is not None:
            return refused
        kube = self.runtime.kube
        await kube.resources.annotate(
            CONNECTION_TEST, namespace, test, SAVE_AS_SAMPLE_ANNOTATION, label.strip()
        )
        return await runs.wait_until_saved(test, self._test_reader(namespace, test))

    # --- Tests ---------------------------------------------------------------------------------

    def _test_reader(self, namespace: str, name: str) -> runs.Read:
        """Reads the ConnectionTest as stored now, parsed as read."""

        async def read() -> StoredConnectionTest | None:
            found = await self.runtime.kube.resources.get_custom(CONNECTION_TEST, namespace, name)
            return StoredConnectionTest.of(found) if found is not None else None

        return read

    async def may_test(self, user: User, namespace: str, connection: str) -> StoredConnection:
        """The connection, if the caller may test it: create on connectiontests, and a
        connection they may see."""
        await self.require(user, "create", CONNECTION_TEST, namespace)
        found, _ = await self.visible(user, namespace, connection)
        return found

    async def run_test(
        self, user: User, namespace: str, connection: str, wanted: ConnectionTestRequest
    ) -> ConnectionTestOutcome:
        """Runs the test for a caller may_test allowed, and waits for its outcome."""
        with self.tests.slot(user):
            spec = wanted.model_dump(by_alias=True, exclude_none=True, mode="json")
            test = runs.new_test(connection, spec, requested_by=user.name)
            name = test.metadata.name
            kube = self.runtime.kube
            try:
                await kube.resources.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, CONNECTION_TEST.plural, test.body()
                )
            except Invalid as error:
                # The admission webhook's or the schema's refusal, which names the field.
                raise Refused(422, "invalid_request", refusal(error)) from None
            return await runs.wait_for_outcome(name, self._test_reader(namespace, name))

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
            # No token: a session signed in with a one-time code, which acts as the user.
            async with as_user(self.runtime.kube.api, token, None if token else user) as kube:
                try:
                    spec = await drafts.checked_spec(kube, namespace, draft)
                except drafts.DraftRefused as refused:
                    raise Refused(
                        *_draft_refusal(refused.status), refused.message, refused.causes
                    ) from None
            if isinstance(spec, DraftTestOutcome):
                return spec
            return await drafts.try_draft(self.runtime, namespace, draft, spec)

    # --- Linking -------------------------------------------------------------------------------

    async def seen(
        self, user: User, namespace: str, names: Collection[str]
    ) -> dict[str, StoredConnection | None]:
        """Of the connections ``names`` (an app's links, the connections its requests went
        through), those whose details the caller may see (link_policy.may_see), as read: None
        for a name with no connection, which only a manager sees. What is left out is shown as
        build-spec shows a hidden link, by everything that shows an app's connections."""
        wanted = set(names)
        if not wanted:
            return {}
        found = {
            connection.name: connection
            for connection in map(
                StoredConnection.of,
                await self.runtime.kube.resources.list_custom(EXTERNAL_CONNECTION, namespace),
            )
            if connection.name in wanted
        }
        may = self.permission(user, namespace)
        seen: dict[str, StoredConnection | None] = {}
        for connection in sorted(wanted):
            stored = found.get(connection)
            # A manager sees a link to a missing connection too: may_see, not may_see_connection.
            if await link_policy.may_see(may, connection, link_policy.policy_of(stored)):
                seen[connection] = stored
        return seen

    async def build_spec(self, user: User, kind: Kind, namespace: str, name: str) -> BuildSpec:
        """The app-build hand-off: per alias, what the app generator needs to know, of each
        linked connection only as much as the caller may see of it (link_policy.may_see): the
        app's own alias and fetch path for the others, whether they exist or not."""
        await self.require(user, "get", kind, namespace, name)
        kube = self.runtime.kube
        body = await kube.resources.get_custom(kind, namespace, name)
        if body is None:
            raise Refused(404, "not_found", f"no {kind.kind} {name!r} in namespace {namespace}")
        app = StoredApp.of(body)
        connections = await self.seen(user, namespace, app.linked)
        samples = {
            connection: handoff.samples_from(await kube.samples.saved(namespace, connection))
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


def linkable(connection: StoredConnection, linked_by: dict[str, list[str]]) -> LinkableConnection:
    """A connection as the list shows it; ``linked_by`` maps names to the apps linking them."""
    spec = connection.spec
    ready = connection.status.condition(ConditionType.READY)
    return LinkableConnection.model_validate(
        {
            "name": connection.name,
            "display_name": spec.display_name,
            "origin": connection.origin,
            "allowed_methods": spec.allowed_methods,
            "allowed_paths": spec.allowed_paths,
            "auth_type": spec.auth_type,
            "has_secret": connection.status.has_secret,
            "link_policy": spec.link_policy,
            "allow_public_images": spec.allow_public_images,
            "forward_viewer_identity": spec.forward_viewer_identity,
            "instructions": spec.instructions,
            "ready": ready.status == "True",
            "ready_reason": ready.reason,
            "ready_message": ready.message,
            "settled": connection.settled,
            "linked_by": linked_by.get(connection.name, []),
            "link_warning": connection_warning(connection),
        }
    )
