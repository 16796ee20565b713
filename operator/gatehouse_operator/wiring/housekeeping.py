"""The controller's housekeeping: each duty its own task, on its own period.

A duty that fails (an API server away, refused connections, not only HTTP errors) is logged and
tried again at its next turn; none ends, and none waits for another.

- publish the first table once the start-up gate opens (every second until it is published);
- follow the keyring: when its active key moves, re-key the channel and re-encrypt every credential
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

from gatehouse_operator.controllers import connection_tests, sign_in_requests
from gatehouse_operator.keys.keyring_secret import KeyringSecret
from gatehouse_operator.keys.sealing_secret import SealingKeysSecret
from gatehouse_operator.keys.store_secret import StoreSecret
from gatehouse_operator.kube import failure
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.table.gather import USAGE_SECONDS
from gatehouse_operator.wiring.key_following import Rotation, SealingKeysFollower
from gatehouse_operator.wiring.resync import (
    drop_vanished,
    reconcile_connections,
    unread_connections,
    unwatched,
)

log = logging.getLogger("gatehouse.operator")

TEST_SWEEP_SECONDS = 10
RESYNC_SECONDS = 60
# How soon a key Secret edited by hand (a rotation of the keyring or of the sealing keys) or
# deleted (the shared store's password) is noticed; one GET each time.
KEY_SECRETS_POLL_SECONDS = 10
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

    async def sweep_sign_ins() -> None:
        await sign_in_requests.expire_late(runtime)

    async def read_unread() -> None:
        await reconcile_connections(runtime, unread_connections(runtime))

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
        Duty("sweep late SignInRequests", TEST_SWEEP_SECONDS, sweep_sign_ins),
        Duty("read Secrets again", TEST_SWEEP_SECONDS, read_unread),
        Duty("find missed deletions", RESYNC_SECONDS, find_deletions),
        Duty("read unwatched Secrets", RESYNC_SECONDS, read_unwatched),
        Duty("collect usage", USAGE_SECONDS, runtime.gatherer.collect_usage),
    ]
    keyring = runtime.keyring
    if isinstance(keyring, KeyringSecret):

        async def read_keyring() -> None:
            await keyring.refresh(runtime.kube)

        found.append(Duty("read the keyring Secret", KEY_SECRETS_POLL_SECONDS, read_keyring))
    keys = runtime.sealing
    if isinstance(keys, SealingKeysSecret):

        async def read_sealing_keys() -> None:
            await keys.refresh(runtime.kube)

        found.append(
            Duty("read the sealing keys Secret", KEY_SECRETS_POLL_SECONDS, read_sealing_keys)
        )
    if runtime.settings.store_secret:
        namespace, _, name = runtime.settings.store_secret.partition("/")
        store = StoreSecret(namespace, name)

        async def make_store_secret() -> None:
            await store.ensure(runtime.kube)

        found.append(
            Duty(
                "make the shared store's password Secret",
                KEY_SECRETS_POLL_SECONDS,
                make_store_secret,
                at_start=True,
            )
        )
    return found
