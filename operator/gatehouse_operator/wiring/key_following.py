"""Following the two key systems: the keyring (when its active key moves, the channel is re-keyed
and every credential encrypted again for the proxies) and the sealing keys (their public halves
kept published, and the connections with sealed values reconciled when the keys change)."""

from __future__ import annotations

import logging

from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.wiring.resync import reconcile_connections

log = logging.getLogger("gatehouse.operator")


class Rotation:
    """Re-encrypts every credential, and re-keys the channel, when the keyring's active key
    moves."""

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
        log.info("keyring rotated to key %r: re-encrypting every credential", now_active)
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
            written = await self.runtime.kube.secrets.publish_config_map(namespace, name, data)
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
            # Published first: gatehouse reseal takes an offer only when it is sealed with the
            # active key the ConfigMap names, so an offer must never be ahead of it.
            await self.publish()
            await reconcile_connections(self.runtime, sealed_connections(self.runtime))


def sealed_connections(runtime: Runtime) -> list[str]:
    return [key for key in runtime.routes.connection_keys() if _sealed(runtime, key)]


def _sealed(runtime: Runtime, key: str) -> bool:
    """Whether the connection has a sealed value: its auth secret, or its client certificate."""
    connection = runtime.routes.connection_resource(key)
    spec = connection.spec if connection is not None else {}
    auth, tls = spec.get("auth"), spec.get("tls")
    certificate = tls.get("clientCertificate") if isinstance(tls, dict) else None
    return (isinstance(auth, dict) and bool(auth.get("sealedSecret"))) or (
        isinstance(certificate, dict) and bool(certificate.get("sealed"))
    )
