"""What the watches missed, caught up with: routes whose resources were deleted while no watch
saw it, and connections whose Secret could not be read when its event came or that the watch does
not see. The housekeeping runs them on its periods; the controller lists what exists at its start.
"""

from __future__ import annotations

import datetime
import logging

from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.controllers import external_connections, linked_apps
from gatehouse_operator.keys.client_certificates import CheckedCertificate
from gatehouse_operator.kube import API_ERRORS, failure
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime, kind_key
from gatehouse_operator.status import Condition

log = logging.getLogger("gatehouse.operator")


async def existing(runtime: Runtime) -> tuple[dict[str, str], dict[str, str]]:
    """The connections and the apps in the cluster now: their uids by key."""
    connections = {
        connection.key: connection.uid
        for connection in map(
            resource_of, await runtime.kube.resources.existing(EXTERNAL_CONNECTION)
        )
    }
    apps = {
        kind_key(kind, app): app.uid
        for kind in (DATA_APP, CHART_TYPE)
        for app in map(resource_of, await runtime.kube.resources.existing(kind))
    }
    return connections, apps


async def drop_vanished(runtime: Runtime) -> None:
    """Forgets the routes the store holds and the cluster no longer has.

    A watch that restarts lists again and never reports what vanished meanwhile, so a missed
    deletion would keep a route (and its credential) alive until the operator restarts. Only
    what the store held before the listing is compared: anything newer may not be in it yet.
    """
    routes = runtime.routes
    held = {key: _uid(routes.connection_resource(key)) for key in routes.connection_keys()}
    held_apps = {key: _uid(routes.app_resource(key)) for key in routes.app_keys()}
    connections, apps = await existing(runtime)
    for key, uid in held.items():
        connection = routes.connection_resource(key)
        if connections.get(key) != uid and connection is not None and connection.uid == uid:
            log.info("connection %s was deleted while unwatched: dropping its route", key)
            await external_connections.forget(runtime, connection)
    for key, uid in held_apps.items():
        app = routes.app_resource(key)
        if apps.get(key) != uid and app is not None and app.uid == uid:
            log.info("app %s was deleted while unwatched: dropping its route", key)
            await linked_apps.forget(runtime, linked_apps.KINDS[key.split("/")[1]], app)


def _uid(resource: Resource | None) -> str:
    return resource.uid if resource else ""


async def reconcile_connections(runtime: Runtime, keys: list[str]) -> None:
    """Reconciles these connections again; one the API server cannot serve now keeps its route
    as it is and is tried again in 10 s (runtime.unread), as are all that are left when the
    API server cannot be reached at all."""
    for index, key in enumerate(keys):
        connection = runtime.routes.connection_resource(key)
        if connection is None:
            continue
        try:
            await external_connections.reconcile(runtime, connection)
        except ApiError as error:
            log.warning("cannot reconcile connection %s now (%s)", key, failure(error))
            runtime.unread.add(key)
        except API_ERRORS as error:
            log.warning(
                "cannot reach the API server (%s); %d connections left for later",
                failure(error),
                len(keys) - index,
            )
            runtime.unread.update(keys[index:])
            return


def unwatched(runtime: Runtime) -> list[str]:
    """Connections whose Secret the watch does not see, or the operator may not read, and those
    with a client certificate (its expiry): read again every resync (a right granted later, or a
    rotation, shows within a minute)."""
    return [key for key in runtime.routes.connection_keys() if _read_again(runtime, key)]


def _read_again(runtime: Runtime, key: str) -> bool:
    watched = runtime.status.condition(key, ConditionType.CREDENTIAL_WATCHED)
    credential = runtime.status.condition(key, ConditionType.CREDENTIAL_READY)
    tls = runtime.status.condition(key, ConditionType.UPSTREAM_TLS_READY)
    # A client certificate's expiry moves with the clock, not with its Secret: judged again
    # (ClientCertificateCurrent, then UpstreamTLSReady) once the clock moves its verdict. So
    # does the start of one refused as not valid yet (an issuer's clock a little ahead of ours):
    # no event of its Secret would bring it back. That reason also covers a malformed one, read
    # again alike.
    certificate = runtime.status.condition(key, ConditionType.CLIENT_CERTIFICATE_CURRENT)
    return (
        (watched is not None and watched.status == "False")
        or any(c is not None and c.reason == Reason.SECRET_FORBIDDEN for c in (credential, tls))
        or (certificate is not None and _clock_moved(runtime, key, certificate))
        or (tls is not None and tls.reason == Reason.INVALID_CLIENT_CERTIFICATE)
    )


def _clock_moved(runtime: Runtime, key: str, written: Condition) -> bool:
    """Whether the clock has moved the connection's client certificate's verdict from the one
    written (its renewal due, or it expired): the certificate itself comes by its Secret's
    event (an unwatched one's is read every resync anyway), so only then is it read again."""
    connection = runtime.routes.connection_resource(key)
    checked = runtime.encrypter.checked_certificate(connection.uid) if connection else None
    if not isinstance(checked, CheckedCertificate):
        return True  # not checked by this process: read it
    now = datetime.datetime.now(datetime.UTC)
    return checked.not_after <= now or checked.expiry_verdict(now).reason != written.reason


def unread_connections(runtime: Runtime) -> list[str]:
    """Connections whose Secret could not be read when its watch event came: taken off the list
    here, and put back by a read that fails again."""
    keys, runtime.unread = sorted(runtime.unread), set()
    return keys
