"""The page's handlers: sign-in, the connections list, a connection's detail, tests, samples,
links (the wizard's are in connection_forms).

GET handlers render; POST handlers change something and answer with a redirect (or a page saying
why not). Each runs behind the guards (guards.py): every POST is refused unless it comes from
this origin with the caller's CSRF token. How a page looks is rendering.py's.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from markupsafe import Markup
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gatehouse_operator.access.as_user import OperatorClient, as_user, refusal
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    DEFAULT_TEST_METHOD,
    DEFAULT_TEST_PATH,
    MAX_TEST_PATH_CHARS,
    SAMPLE_LABEL_CHARS,
)
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.api.stored import StoredAppSpec
from gatehouse_operator.connections import errors
from gatehouse_operator.connections.actions import AppLists, Connections, linkable
from gatehouse_operator.connections.activity import Activity, window_of
from gatehouse_operator.connections.errors import check_names, validation_message
from gatehouse_operator.connections.exfiltration import (
    ANY_CONNECTION,
    connection_warning,
    write_methods,
)
from gatehouse_operator.connections.grants import Grants
from gatehouse_operator.connections.linking import link_change, linked_by
from gatehouse_operator.connections.models import (
    ConnectionTestRequest,
    ConnectionUsage,
    HiddenRequestView,
    RecentRequests,
    RecentRequestView,
    TrialRequest,
)
from gatehouse_operator.connections.samples import typed
from gatehouse_operator.kube.errors import Conflict, Forbidden, Invalid, NotFound
from gatehouse_operator.web.cache_section import CacheSection, cache_view
from gatehouse_operator.web.charts import Chart, bar_chart
from gatehouse_operator.web.grants_section import GrantsSection
from gatehouse_operator.web.guards import Guards, Handler, Visitor, fields_of, page_refusal
from gatehouse_operator.web.session import MAX_TOKEN_CHARS
from gatehouse_operator.web.tls_section import tls_view
from gatehouse_operator.web.wizard import AUTH_TYPE_TITLES, LIMIT_TITLES

APP_KINDS = {DATA_APP.kind: DATA_APP, CHART_TYPE.kind: CHART_TYPE}


@dataclass(frozen=True)
class Typed:
    """A form the page would not act on, shown again on the page it was sent from: what was
    typed, and why not, beside it."""

    fields: dict[str, str]
    refusal: str = ""


# The Requests tab's status filter: its choices, in words.
STATUS_FILTERS = {"": "any status", "ok": "2xx and 3xx", "4xx": "4xx", "5xx": "5xx"}


@dataclass(frozen=True)
class RequestFilter:
    """What the Requests tab shows of the fetches the replicas remember: an app's, a status
    class's, those whose path holds some text (the page's own choice among what the inspector
    answered, newest first)."""

    app: str = ""
    status: str = ""
    path: str = ""

    @classmethod
    def of(cls, request: Request) -> RequestFilter:
        query = request.query_params
        status = query.get("status", "")
        return cls(
            app=query.get("app", "").strip()[:300],
            status=status if status in STATUS_FILTERS else "",
            path=query.get("path", "").strip()[:MAX_TEST_PATH_CHARS],
        )

    def keeps(self, item: RecentRequestView | HiddenRequestView) -> bool:
        if self.app and item.app != self.app:
            return False
        if self.status and _status_class(item.status) != self.status:
            return False
        return not (self.path and (item.details_hidden or self.path not in item.path))

    def query(self) -> str:
        """As the page's URLs carry it."""
        return urlencode({key: value for key, value in vars(self).items() if value})


def _status_class(status: int) -> str:
    return "5xx" if status >= 500 else "4xx" if status >= 400 else "ok"


def trial(method: str, path: str, raw_body: str) -> TrialRequest:
    """A test's request from a form: a relative path, and a JSON body for methods but GET."""
    body: object = None
    raw_body = raw_body.strip()
    if raw_body and method != "GET":
        try:
            body = json.loads(raw_body)
        except json.JSONDecodeError as error:
            where = f"{error.msg} at character {error.pos}"
            raise page_refusal(422, f"body: not JSON ({where})") from None
        except (ValueError, RecursionError):
            raise page_refusal(422, "body: JSON this deep or this long is not accepted") from None
    path = "/" + (path.strip() or "/").lstrip("/")
    try:
        return TrialRequest.model_validate({"method": method, "path": path, "body": body})
    except ValidationError as error:
        raise page_refusal(422, validation_message(error)) from None


class Pages:
    """The page's handlers; each runs behind the guards, as the visitor the guards found."""

    def __init__(
        self,
        actions: Connections,
        guards: Guards,
        operator: OperatorClient,
    ) -> None:
        self.actions = actions
        self.guards = guards
        self.renderer = guards.renderer
        self.sessions = guards.sessions
        self.operator = operator
        self.read_only = guards.read_only
        self.activity = Activity(actions)
        self.grants = GrantsSection(Grants(actions), self.back_to)
        self.cache = CacheSection(actions, self.back_to)

    # Sign-in and out.

    async def sign_in_form(self, request: Request) -> Response:
        async def form(request: Request) -> Response:
            if await self.guards.visitor(request) is not None:
                return RedirectResponse("/ui/", status_code=303)
            return self.renderer.render("sign_in.html", visitor=None, error="")

        return await self.guards.answer(request, form)

    async def sign_in(self, request: Request) -> Response:
        return await self.guards.answer(request, self._sign_in)

    async def _sign_in(self, request: Request) -> Response:
        token = str((await fields_of(request)).get("token", "")).strip()
        error = ""
        if not token or len(token) > MAX_TOKEN_CHARS:
            error = f"token: paste a Kubernetes token of 1 to {MAX_TOKEN_CHARS} characters"
        elif await self.guards.access.authenticate(token) is None:
            error = "token: the Kubernetes API server did not accept this token"
        if error:
            return self.renderer.render("sign_in.html", 401, visitor=None, error=error)
        response = RedirectResponse("/ui/", status_code=303)
        if not self.sessions.start(response, token):
            error = "token: too long to keep in a cookie; sign in through your identity proxy"
            return self.renderer.render("sign_in.html", 422, visitor=None, error=error)
        return response

    async def sign_out(self, request: Request) -> Response:
        """Ends the session whatever state it is in (expired, revoked): same-origin is enough."""

        async def end(request: Request) -> Response:
            response = RedirectResponse("/ui/sign-in", status_code=303)
            self.sessions.end(response)
            return response

        return await self.guards.answer(request, end)

    # Pages.

    async def home(self, request: Request, visitor: Visitor) -> Response:
        chosen = request.query_params.get("namespace", "").strip()
        if chosen:
            check_names({"namespace": chosen})
            return RedirectResponse(f"/ui/namespaces/{chosen}/connections", status_code=303)
        parts = visitor.user.name.split(":")
        own = parts[2] if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else ""
        return self.renderer.render("home.html", visitor=visitor, namespace=own)

    async def may(self, visitor: Visitor, verb: str, plural: str, namespace: str) -> bool:
        return await self.actions.access.allowed(visitor.user, verb, plural, namespace)

    async def _linkable_apps(self, visitor: Visitor, apps: AppLists) -> list[str]:
        """The apps the visitor may change (Kind/name), for the Link form; none when read-only."""
        if self.read_only:
            return []
        found = []
        for kind in APP_KINDS.values():
            if await self.may(visitor, "update", kind.plural, apps.namespace):
                found += [f"{kind.kind}/{app.name}" for app in await apps.of(kind)]
        return sorted(found)

    async def connections(self, request: Request, visitor: Visitor) -> Response:
        return await self._list(request, visitor, request.path_params["namespace"])

    async def _list(
        self,
        request: Request,
        visitor: Visitor,
        namespace: str,
        status: int = 200,
        link: Typed | None = None,
    ) -> Response:
        apps = AppLists(self.actions.runtime, namespace)
        listing = await self.actions.visible_connections(visitor.user, namespace, apps)
        return self.renderer.render(
            "list.html",
            visitor=visitor,
            namespace=namespace,
            listing=listing,
            can_create=await self.may(visitor, "create", EXTERNAL_CONNECTION.plural, namespace),
            apps=await self._linkable_apps(visitor, apps),
            link_warning=ANY_CONNECTION,
            notice=self._notice(request, visitor),
            status=status,
            link=link or Typed({}),
        )

    async def connection(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        if request.query_params.get("part") == "fields":
            # The fields and status alone, for page.js to update the page with.
            detail = await self.actions.connection_detail(visitor.user, namespace, name)
            return self.renderer.render(
                "_fields.html",
                namespace=namespace,
                detail=detail,
                auth_types=AUTH_TYPE_TITLES,
                limit_titles=LIMIT_TITLES,
            )
        return await self._detail(request, visitor, namespace, name)

    async def _detail(
        self,
        request: Request,
        visitor: Visitor,
        namespace: str,
        name: str,
        status: int = 200,
        tested: Typed | None = None,
        link: Typed | None = None,
    ) -> Response:
        listed = AppLists(self.actions.runtime, namespace)
        detail = await self.actions.connection_detail(visitor.user, namespace, name, listed)
        apps = await self._linkable_apps(visitor, listed)
        # The reference's "Linked resources" tabs: data apps and chart types apart, each with the
        # apps linking the connection, then those the visitor may link it into.
        tabs = {
            kind.kind: linked_by(
                name,
                await listed.of(kind),
                {app.partition("/")[2] for app in apps if app.startswith(f"{kind.kind}/")},
            )
            for kind in APP_KINDS.values()
        }
        window = window_of(request.query_params.get("window"))
        usage = await self.activity.usage(namespace, name, window)
        return self.renderer.render(
            "detail.html",
            usage=usage_charts(usage),
            window=window,
            visitor=visitor,
            namespace=namespace,
            detail=detail,
            auth_types=AUTH_TYPE_TITLES,
            limit_titles=LIMIT_TITLES,
            test_path=DEFAULT_TEST_PATH,
            test_path_chars=MAX_TEST_PATH_CHARS,
            link_writes=bool(write_methods(detail.connection.allowed_methods)),
            can_test=await self.may(visitor, "create", CONNECTION_TEST.plural, namespace),
            apps=apps,
            linked_tabs=tabs,
            notice=self._notice(request, visitor),
            status=status,
            tested=tested or Typed({}),
            link=link or Typed({}),
            grants=await self.grants.view(visitor, namespace, name, detail.auth, detail.can_manage),
            cache=cache_view(detail),
            tls=tls_view(detail),
        )

    async def connection_requests(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        found = await self.activity.connection_requests(visitor.user, namespace, name)
        return self._requests_page(request, visitor, namespace, found, connection=name)

    def app_requests_pages(self) -> list[tuple[Kind, Handler]]:
        """Each app kind's Requests page (a handler per kind: a kind is no Kubernetes name)."""

        def page(kind: Kind) -> Handler:
            async def handler(request: Request, visitor: Visitor) -> Response:
                namespace, name = request.path_params["namespace"], request.path_params["name"]
                found = await self.activity.app_requests(visitor.user, namespace, kind, name)
                app = f"{kind.kind}/{name}"
                return self._requests_page(request, visitor, namespace, found, app=app)

            return handler

        return [(kind, page(kind)) for kind in APP_KINDS.values()]

    def _requests_page(
        self,
        request: Request,
        visitor: Visitor,
        namespace: str,
        found: RecentRequests,
        *,
        connection: str = "",
        app: str = "",
    ) -> Response:
        """The Requests tab, filtered; its rows alone (?part=rows) for page.js to follow."""
        chosen = RequestFilter.of(request)
        return self.renderer.render(
            "_request_rows.html" if request.query_params.get("part") == "rows" else "requests.html",
            visitor=visitor,
            namespace=namespace,
            found=found,
            shown=[item for item in found.items if chosen.keeps(item)],
            apps=sorted({item.app for item in found.items} | ({chosen.app} - {""})),
            chosen=chosen,
            status_filters=STATUS_FILTERS,
            connection=connection,
            app=app,
        )

    # Forms.

    async def test(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        fields = await fields_of(request)
        body = await self.actions.may_test(visitor.user, namespace, name)
        item = linkable(body, {})
        method = str(fields.get("method", DEFAULT_TEST_METHOD))
        sent = {key: str(fields.get(key, "")) for key in ("method", "path", "body")}
        try:
            if method not in item.allowed_methods:
                allowed = ", ".join(item.allowed_methods)
                raise page_refusal(
                    422, f"method: must be one of the connection's methods ({allowed})"
                )
            wanted = trial(method, sent["path"], sent["body"])
        except errors.Refused as refused:
            # The connection's page again, with what was typed and why not.
            tested = Typed(sent, refused.message)
            return await self._detail(request, visitor, namespace, name, refused.status, tested)
        test = ConnectionTestRequest.model_validate(wanted.model_dump())
        outcome = await self.actions.run_test(visitor.user, namespace, name, test)
        return self.renderer.render(
            "test_result.html",
            visitor=visitor,
            namespace=namespace,
            item=item,
            # As the ConnectionTest keeps it: what was typed, scrubbed.
            request_sent=test.model_copy(update={"path": typed(test.path)}),
            outcome=outcome,
            can_save=outcome.passed
            and await self.actions.access.allowed(
                visitor.user, "patch", CONNECTION_TEST.plural, namespace, outcome.name
            ),
            label_chars=SAMPLE_LABEL_CHARS,
        )

    async def save_sample(self, request: Request, visitor: Visitor) -> Response:
        namespace, test = request.path_params["namespace"], request.path_params["test"]
        fields = await fields_of(request)
        label = str(fields.get("label", "")).strip()
        if len(label) > SAMPLE_LABEL_CHARS:
            raise page_refusal(422, f"label: at most {SAMPLE_LABEL_CHARS} characters (or none)")
        connection = str(fields.get("connection", ""))
        found = await self.actions.may_save_sample(visitor.user, namespace, test)
        outcome = await self.actions.save_sample(namespace, found, label)
        if not outcome.saved:
            raise page_refusal(409, f"not saved ({outcome.reason}): {outcome.message}")
        saved = f"Saved sample “{label}”." if label else f"Saved sample {outcome.sample}."
        return self.back_to(visitor, namespace, connection, saved)

    async def delete_sample(self, request: Request, visitor: Visitor) -> Response:
        params = request.path_params
        namespace, name = params["namespace"], params["name"]
        await self.actions.delete_sample(visitor.user, namespace, name, params["sample"])
        return self.back_to(visitor, namespace, name, "Sample deleted.")

    async def link(self, request: Request, visitor: Visitor) -> Response:
        """Links a connection to an app as the visitor: RBAC and the admission webhook decide,
        and the webhook's message is shown as it is."""
        namespace = request.path_params["namespace"]
        fields = await fields_of(request)
        typed = {key: str(fields.get(key, "")) for key in ("app", "alias", "connection", "back")}
        try:
            return await self._link(visitor, namespace, fields)
        except errors.Refused as refused:
            # The page the form was on again, with what was typed and why not.
            link = Typed(typed, refused.message)
            back = typed["connection"].strip() if typed["back"] == "detail" else ""
            if back:
                with contextlib.suppress(errors.Refused):
                    check_names({"connection": back})
                    return await self._detail(
                        request, visitor, namespace, back, refused.status, link=link
                    )
            return await self._list(request, visitor, namespace, refused.status, link)

    async def _link(self, visitor: Visitor, namespace: str, fields: FormData) -> Response:
        kind_name, _, app_name = str(fields.get("app", "")).partition("/")
        kind = APP_KINDS.get(kind_name)
        alias = str(fields.get("alias", "")).strip()
        connection = str(fields.get("connection", "")).strip()
        if kind is None or not app_name:
            raise page_refusal(422, "app: choose a DataApp or ChartType")
        if not connection:
            raise page_refusal(422, "connection: required")
        async with as_user(
            self.operator, visitor.credentials.token, visitor.credentials.impersonated
        ) as kube:
            try:
                app = await kube.get_custom(kind, namespace, app_name)
                stored_links = StoredAppSpec.model_validate(app.spec).connections
                links = [link.model_dump() for link in stored_links]
                # No alias (the connection's own Link buttons): one made from its name.
                change = link_change(links, connection, alias, f"{kind.kind} {app_name}")
                alias = change.alias
                if change.links is None:
                    notice = f"{kind.kind} {app_name} links {connection} as “{alias}” already."
                    back = connection if fields.get("back") == "detail" else ""
                    return self.back_to(visitor, namespace, back, notice)
                spec = {**app.spec, "connections": change.links}
                # As the visitor: RBAC and the admission webhook decide, as for every link.
                await kube.replace_custom(
                    kind, namespace, app.model_copy(update={"spec": spec}).manifest()
                )
            except (Invalid, Forbidden, NotFound, Conflict) as error:
                raise page_refusal(error.status, f"not linked: {refusal(error)}") from None
        notice = f"Linked {connection} to {kind.kind} {app_name} as “{alias}”."
        try:
            # The link stood the admission webhook, so the visitor may see the connection.
            linked, _ = await self.actions.visible(visitor.user, namespace, connection)
            notice += " " + connection_warning(linked)
        except errors.Refused:
            pass
        back = connection if fields.get("back") == "detail" else ""
        return self.back_to(visitor, namespace, back, notice)

    def back_to(self, visitor: Visitor, namespace: str, connection: str, notice: str) -> Response:
        """To the connection's page, or the list without one, with a notice to show there."""
        url = f"/ui/namespaces/{quote(namespace, safe='')}/connections"
        if connection:
            url += f"/{quote(connection, safe='')}"
        signature = self.sessions.sign(visitor.credentials, notice)
        query = urlencode({"notice": notice, "signed": signature})
        return RedirectResponse(f"{url}?{query}", status_code=303)

    def _notice(self, request: Request, visitor: Visitor) -> str:
        """The notice a redirect of this page carried: only one this page signed for the visitor,
        so a link cannot put words on the page."""
        notice = request.query_params.get("notice", "")
        signed = request.query_params.get("signed", "")
        return notice if self.sessions.signed(visitor.credentials, notice, signed) else ""


def usage_charts(usage: ConnectionUsage) -> list[tuple[str, list[Markup]]]:
    """Per app, its requests, errors and p95 charts; beside them, where the connection's cache
    answered any of its requests in the window, the calls it saved."""
    period = "minute" if usage.window == "hour" else "hour"
    charts = []
    for app in usage.apps:
        starts = [point.start for point in app.points]
        shown: list[tuple[str, str, str, list[float | None]]] = [
            ("Requests", "", "#2f5bd3", [float(point.requests) for point in app.points]),
            ("Errors", "", "#a4262c", [float(point.errors) for point in app.points]),
            ("p95", " ms", "#17663a", [point.p95_ms for point in app.points]),
        ]
        if any(point.cached for point in app.points):
            saved: list[float | None] = [float(point.cached) for point in app.points]
            shown.insert(2, ("Calls saved (served from the cache)", "", "#6b4fbb", saved))
        drawn = [
            bar_chart(Chart(title, unit, colour, values, starts, period))
            for title, unit, colour, values in shown
        ]
        charts.append((app.app, drawn))
    return charts
