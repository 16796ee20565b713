"""The controller's housekeeping: each duty its own task, on its own period.

A duty that fails (an API server away, refused connections, not only HTTP errors) is logged and
tried again at its next turn; none ends, and none waits for another.

- publish the first table once the start-up gate opens (every second until it is published);
- follow the keyring: when its active key moves, re-key the channel and re-seal every credential
  (every second), and read the keyring Secret again, for a rotation made by hand (every 10 s);
- follow the sealing keys: when the active one moves, reconcile the connections with sealed
  values, whose status then offers them resealed (every second); and keep their public halves
  published in their ConfigMap (every 5 s);
- make the bundled store's password Secret when the chart names one and it is absent (every 10 s
  until it is there);
- delete ConnectionTests whose time to live has passed (every 10 s);
- read again the Secrets a watch event named but that could not be read then (every 10 s);
- drop routes whose resources were deleted while no watch saw it (every minute);
- read again the Secrets the watch does not see: unlabelled, or forbidden (every minute);
- take the usage the proxy replicas counted into the usage history (every 10 s).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.aio import client

from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.controllers import connection_tests, external_connections, linked_apps
from gatehouse_operator.keys.keyring_secret import KeyringSecret
from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE
from gatehouse_operator.keys.sealing_secret import SealingKeysSecret
from gatehouse_operator.keys.store_secret import StoreSecret
from gatehouse_operator.kube import API_ERRORS, failure
from gatehouse_operator.runtime import Runtime, app_key, resource_key
from gatehouse_operator.table.gather import USAGE_SECONDS

log = logging.getLogger("gatehouse.operator")

TEST_SWEEP_SECONDS = 10
RESYNC_SECONDS = 60
# How soon a keyring Secret edited by hand (a rotation) is noticed; one GET each time.
KEYRING_POLL_SECONDS = 10
# How often the published public sealing keys are compared with the keys (one GET), so that a
# rotation, or a ConfigMap deleted or edited by hand, is put right.
PUBLISH_SECONDS = 5


@dataclass(frozen=True)
class Duty:
    what: str  # as in "cannot <what>"
    every: float
    work: Callable[[], Awaitable[None]]
    # A turn as soon as the controller starts, not one period later.
    at_start: bool = False

    async def run(self) -> None:
        if self.at_start:
            await self.turn()
        while True:
            await asyncio.sleep(self.every)
            await self.turn()

    async def turn(self) -> None:
        try:
            await self.work()
        except Exception as error:  # any: a duty must outlive one failed turn
            log.warning("cannot %s (%s); trying again later", self.what, failure(error))


def duties(runtime: Runtime) -> list[Duty]:
    rotation = Rotation(runtime)
    sealing = SealingKeysFollower(runtime)

    async def first_table() -> None:
        if not runtime.journal.version:
            runtime.channel.flush()  # does nothing until the start-up gate opens

    async def sweep_tests() -> None:
        await connection_tests.expire_finished(runtime)

    async def read_unread() -> None:
        await reconcile_connections(runtime, _unread(runtime))

    async def find_deletions() -> None:
        await drop_vanished(runtime)

    async def read_unwatched() -> None:
        await reconcile_connections(runtime, unwatched(runtime))

    found = [
        Duty("publish the first table", 1.0, first_table),
        Duty("follow the keyring", 1.0, rotation.follow),
        Duty("follow the sealing keys", 1.0, sealing.follow),
        # At once: a user may seal right after installing.
        Duty("publish the sealing keys", PUBLISH_SECONDS, sealing.publish, at_start=True),
        Duty("sweep expired ConnectionTests", TEST_SWEEP_SECONDS, sweep_tests),
        Duty("read Secrets again", TEST_SWEEP_SECONDS, read_unread),
        Duty("find missed deletions", RESYNC_SECONDS, find_deletions),
        Duty("read unwatched Secrets", RESYNC_SECONDS, read_unwatched),
        Duty("collect usage", USAGE_SECONDS, runtime.gatherer.collect_usage),
    ]
    keyring = runtime.keyring
    if isinstance(keyring, KeyringSecret):

        async def read_keyring() -> None:
            await keyring.refresh(runtime.kube)

        found.append(Duty("read the keyring Secret", KEYRING_POLL_SECONDS, read_keyring))
    keys = runtime.sealing
    if isinstance(keys, SealingKeysSecret):

        async def read_sealing_keys() -> None:
            await keys.refresh(runtime.kube)

        found.append(Duty("read the sealing keys Secret", KEYRING_POLL_SECONDS, read_sealing_keys))
    if runtime.settings.store_secret:
        namespace, _, name = runtime.settings.store_secret.partition("/")
        store = StoreSecret(namespace, name)

        async def make_store_secret() -> None:
            await store.ensure(runtime.kube)

        found.append(
            Duty(
                "make the shared store's password Secret",
                KEYRING_POLL_SECONDS,
                make_store_secret,
                at_start=True,
            )
        )
    return found


async def existing(runtime: Runtime) -> tuple[dict[str, str], dict[str, str]]:
    """The connections and the apps in the cluster now: their uids by key."""
    connections = {
        resource_key(item): item["metadata"]["uid"]
        for item in await runtime.kube.existing(EXTERNAL_CONNECTION)
    }
    apps = {
        app_key(kind, item): item["metadata"]["uid"]
        for kind in (DATA_APP, CHART_TYPE)
        for item in await runtime.kube.existing(kind)
    }
    return connections, apps


async def drop_vanished(runtime: Runtime) -> None:
    """Forgets the routes the store holds and the cluster no longer has.

    A watch that restarts lists again and never reports what vanished meanwhile, so a missed
    deletion would keep a route (and its credential) alive until the operator restarts. Only
    what the store held before the listing is compared: anything newer may not be in it yet.
    """
    routes = runtime.routes
    held = {key: _uid(routes.connection_body(key)) for key in routes.connection_keys()}
    held_apps = {key: _uid(routes.app_body(key)) for key in routes.app_keys()}
    connections, apps = await existing(runtime)
    for key, uid in held.items():
        body = routes.connection_body(key)
        if connections.get(key) != uid and body is not None and body["metadata"]["uid"] == uid:
            log.info("connection %s was deleted while unwatched: dropping its route", key)
            await external_connections.forget(runtime, body)
    for key, uid in held_apps.items():
        body = routes.app_body(key)
        if apps.get(key) != uid and body is not None and body["metadata"]["uid"] == uid:
            log.info("app %s was deleted while unwatched: dropping its route", key)
            await linked_apps.forget(runtime, linked_apps.KINDS[key.split("/")[1]], body)


def _uid(body: dict[str, Any] | None) -> str:
    return str(body["metadata"]["uid"]) if body else ""


async def reconcile_connections(runtime: Runtime, keys: list[str]) -> None:
    """Reconciles these connections again; one the API server cannot serve now keeps its route
    as it is and is tried again in 10 s (runtime.unread), as are all that are left when the
    API server cannot be reached at all."""
    for index, key in enumerate(keys):
        body = runtime.routes.connection_body(key)
        if body is None:
            continue
        try:
            await external_connections.reconcile(runtime, body)
        except client.ApiException as error:
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
    """Connections whose Secret the watch does not see, or the operator may not read: read
    again every resync (a right granted later, or a rotation, shows within a minute)."""
    return [
        key
        for key in runtime.routes.connection_keys()
        if runtime.status.condition(key, ConditionType.CREDENTIAL_WATCHED).get("status") == "False"
        or runtime.status.condition(key, ConditionType.CREDENTIAL_READY).get("reason")
        == Reason.SECRET_FORBIDDEN
    ]


def _unread(runtime: Runtime) -> list[str]:
    """Connections whose Secret could not be read when its watch event came: taken off the list
    here, and put back by a read that fails again."""
    keys, runtime.unread = sorted(runtime.unread), set()
    return keys


class Rotation:
    """Re-seals every credential, and re-keys the channel, when the keyring's active key moves."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.active = runtime.keyring.current().active

    async def follow(self) -> None:
        runtime = self.runtime
        try:
            now_active = runtime.keyring.current().active
        except (OSError, ValueError) as error:
            log.error("cannot read the keyring (%s); keeping the current key", type(error).__name__)
            return
        if now_active == self.active:
            return
        log.info("keyring rotated to key %r: re-sealing every credential", now_active)
        self.active = now_active
        runtime.channel.tls.use(runtime.keyring.current())
        await reconcile_connections(runtime, runtime.routes.connection_keys())


class SealingKeysFollower:
    """Keeps the sealing keys' public halves published, and reconciles the connections with
    sealed values whenever the keys change: a new active key (their status offers them
    resealed), or keys that appear or come back (a restore), which values waiting on them open
    with."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.seen: tuple[str, frozenset[str]] | None = None
        self.missing_said = False

    async def publish(self) -> None:
        keys = self.runtime.sealing.sealing_keys()
        target = self.runtime.settings.sealing_keys_config_map
        if keys is None or not target:
            return
        namespace, _, name = target.partition("/")
        data = {SEALING_KEYS_FILE: keys.public().dump(), "active": keys.active}
        try:
            written = await self.runtime.kube.publish_config_map(namespace, name, data)
        except LookupError as missing:
            if not self.missing_said:  # said once, not every 5 s
                log.error("cannot publish the sealing keys: %s", missing)
            self.missing_said = True
            return
        self.missing_said = False
        if written:
            log.info("published the sealing keys (active %s) in ConfigMap %s", keys.active, target)

    async def follow(self) -> None:
        keys = self.runtime.sealing.sealing_keys()
        now = (keys.active, keys.fingerprints) if keys else ("", frozenset[str]())
        if now == self.seen:
            return
        first, self.seen = self.seen is None, now
        if not first:
            log.info(
                "sealing keys changed (active %s): reconciling sealed values", now[0] or "none"
            )
            await reconcile_connections(self.runtime, sealed_connections(self.runtime))


def sealed_connections(runtime: Runtime) -> list[str]:
    return [
        key
        for key in runtime.routes.connection_keys()
        if ((runtime.routes.connection_body(key) or {}).get("spec", {}).get("auth") or {}).get(
            "sealedSecret"
        )
    ]
