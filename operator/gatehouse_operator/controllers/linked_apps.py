"""DataApp and ChartType: issue each app a proxy credential and route its aliases.

The credential lives in a Secret the app owns (``<kind>-<name>-gatehouse``, key ``token``); the
routing table holds only its SHA-256. A Secret of that name the operator did not make for the app
is never used, changed or deleted: whoever may create an app must not thereby take over a Secret
(``SecretConflict``). Conditions: ``CredentialIssued``, ``LinksReady`` (every
alias names a connection that is Ready) and ``Ready``.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from gatehouse_contract.routes import AppRoute, EntryKind, token_sha256
from gatehouse_operator.api.apps import (
    CHART_TYPE,
    DATA_APP,
    LinkedAppSpec,
    LinkedAppStatus,
    LinkStatus,
)
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.meta import GROUP, VERSION, Kind, spec_error
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.kube import CREDENTIAL_LABEL, SECRET_TAKEN_RETRY_SECONDS, SecretTaken
from gatehouse_operator.kube.errors import Forbidden
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime, forget_resource, kind_key
from gatehouse_operator.status import Verdict, ready
from gatehouse_operator.table import budget
from gatehouse_operator.table.rollout import Routed

KINDS = {DATA_APP.kind: DATA_APP, CHART_TYPE.kind: CHART_TYPE}


def credential_secret_name(kind: Kind, name: str) -> str:
    return f"{kind.singular}-{name}-gatehouse"


def _link_statuses(runtime: Runtime, route: AppRoute) -> list[LinkStatus]:
    statuses = []
    for alias, connection_key in sorted(route.links.items()):
        connection = runtime.routes.connection(connection_key)
        name = connection_key.split("/", 1)[1]
        reason: Reason | None = None
        if connection is None:
            reason = Reason.CONNECTION_NOT_FOUND
        elif connection.unavailable:
            reason = Reason.CONNECTION_NOT_READY
        statuses.append(
            LinkStatus(
                alias=alias, connection=name, ready=not reason, reason=reason or Reason.ROUTED
            )
        )
    return statuses


async def _write_status(runtime: Runtime, kind: Kind, app: Resource, route: AppRoute) -> None:
    links = _link_statuses(runtime, route)
    broken = [link for link in links if not link.ready]
    secret = credential_secret_name(kind, app.name)
    verdicts = [
        Verdict(
            ConditionType.CREDENTIAL_ISSUED,
            "True",
            Reason.SECRET_CREATED,
            f"the proxy credential is in {secret}",
        ),
        Verdict(
            ConditionType.LINKS_READY,
            "True",
            Reason.ALL_LINKS_READY,
            f"{len(links)} connection(s) routed",
        )
        if not broken
        else Verdict(
            ConditionType.LINKS_READY,
            "False",
            broken[0].reason,
            "; ".join(f"{link.alias} -> {link.connection}: {link.reason}" for link in broken),
        ),
    ]
    message = "every alias is routed by the proxy"
    summary = ready(verdicts, "Routed", message)
    fields = LinkedAppStatus(credential_secret=secret, links=links)
    if summary.ok:
        entry: tuple[EntryKind, str] = ("app", route.key)
        await runtime.rollout.report(Routed(kind, app, verdicts, fields, route.key, entry, message))
    else:
        await runtime.rollout.report_not_ready(kind, app, [*verdicts, summary], fields, route.key)


async def reconcile(runtime: Runtime, kind: Kind, app: Resource) -> None:
    key = kind_key(kind, app)
    try:
        spec = LinkedAppSpec.model_validate(app.spec)
    except ValidationError as error:
        runtime.routes.drop_app(key, seen_as=key)
        runtime.channel.schedule_flush()
        verdict = Verdict(ConditionType.READY, "False", Reason.INVALID_SPEC, spec_error(error))
        await runtime.rollout.report_not_ready(kind, app, [verdict], LinkedAppStatus(), key)
        return
    owner = {"kind": kind.kind, "name": app.name, "uid": app.uid}
    secret = credential_secret_name(kind, app.name)
    try:
        token = await runtime.kube.tokens.app_token(app.namespace, secret, owner)
    except SecretTaken as taken:
        runtime.routes.drop_app(key, seen_as=key)
        runtime.channel.schedule_flush()
        verdict = Verdict(
            ConditionType.CREDENTIAL_ISSUED, "False", Reason.SECRET_CONFLICT, str(taken)
        )
        await runtime.rollout.report_not_ready(
            kind, app, [verdict, ready([verdict], "", "")], LinkedAppStatus(), key
        )
        # Nothing the operator watches changes when that Secret goes: asked again.
        raise kopf.TemporaryError(str(taken), delay=SECRET_TAKEN_RETRY_SECONDS) from None
    except Forbidden:  # anything else is retried: the API server may be away for a moment
        # A right the chart grants is missing (RBAC edited, or watchNamespaces without this
        # namespace): said on the app, since the log is not where its owner looks.
        verdict = Verdict(
            ConditionType.CREDENTIAL_ISSUED,
            "False",
            Reason.SECRET_FORBIDDEN,
            f"the operator may not read or write Secret {secret!r} (HTTP 403): its "
            "ServiceAccount needs get, create and update on secrets in this namespace",
        )
        await runtime.rollout.report_not_ready(
            kind, app, [verdict, ready([verdict], "", "")], LinkedAppStatus(), key
        )
        return
    route = AppRoute(
        key=key,
        token_sha256=token_sha256(token),
        uid=app.uid,
        links={link.alias: f"{app.namespace}/{link.connection}" for link in spec.connections},
    )
    size = budget.entry_size(route)
    refusal = budget.check(
        route, size, runtime.routes.budget.total_with("app", key, size), ConditionType.READY
    )
    if refusal is not None:
        runtime.routes.drop_app(key, seen_as=key)
        runtime.channel.schedule_flush()
        await runtime.rollout.report_not_ready(kind, app, [refusal], LinkedAppStatus(), key)
        return
    runtime.routes.put_app(route, app, seen_as=key, size=size)
    runtime.channel.schedule_flush()
    await _write_status(runtime, kind, app, route)


async def refresh_statuses(runtime: Runtime, keys: list[str]) -> None:
    """Re-reports apps whose links changed state because a connection did."""
    for key in keys:
        route = runtime.routes.app(key)
        app = runtime.routes.app_resource(key)
        if route is not None and app is not None:
            await _write_status(runtime, KINDS[key.split("/")[1]], app, route)


def _kind(body: kopf.Body) -> Kind:
    return KINDS[body["kind"]]


@kopf.on.resume(GROUP, VERSION, DATA_APP.plural)
@kopf.on.create(GROUP, VERSION, DATA_APP.plural)
@kopf.on.update(GROUP, VERSION, DATA_APP.plural)
@kopf.on.resume(GROUP, VERSION, CHART_TYPE.plural)
@kopf.on.create(GROUP, VERSION, CHART_TYPE.plural)
@kopf.on.update(GROUP, VERSION, CHART_TYPE.plural)
async def app_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reconcile(memo.runtime, _kind(body), resource_of(body))


async def forget(runtime: Runtime, kind: Kind, app: Resource) -> None:
    """Takes a deleted app out of the table, with its proxy credential."""
    key = kind_key(kind, app)
    runtime.routes.drop_app(key, seen_as=key)
    forget_resource(runtime, key)
    runtime.channel.schedule_flush()
    # Garbage collection removes the owned Secret in a real cluster; deleting it here as well
    # means the credential is gone with the app even where no controller-manager runs. Only
    # the Secret made for this app: one of that name it never used is someone else's.
    owner = {"kind": kind.kind, "name": app.name, "uid": app.uid}
    await runtime.kube.tokens.delete_credential_secret(
        app.namespace, credential_secret_name(kind, app.name), owner
    )


# On the watch rather than on.delete, which would need a finalizer (see external_connections).
@kopf.on.event(GROUP, VERSION, DATA_APP.plural)
@kopf.on.event(GROUP, VERSION, CHART_TYPE.plural)
async def app_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    if event.get("type") == "DELETED":
        await forget(memo.runtime, _kind(body), resource_of(body))


def app_for_credential_secret(labels: dict[str, str], namespace: str) -> str | None:
    """The app key a credential Secret belongs to, from the label the operator put on it."""
    owner = labels.get(CREDENTIAL_LABEL, "")
    kind, _, name = owner.partition(".")
    return f"{namespace}/{kind}/{name}" if kind in KINDS and name else None
