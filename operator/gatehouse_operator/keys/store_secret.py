"""The password of the chart's bundled store, in a Secret the operator makes.

Drawn by the operator, not the chart, for the keyring's reason: a password drawn at render time
changes at every ``helm template`` (a GitOps tool renders on every sync), and the store and the
proxies, which read it at their start, would no longer agree. The operator makes the Secret once,
when it is absent, and never rewrites what it finds; the store and the proxies mount it. With an
external store the chart names no such Secret and the operator makes none.

Nothing the operator does needs the password, so failing to make the Secret never stops it: the
housekeeping tries again every 10 s, while the store's and the proxies' Pods wait for the Secret
to mount, as they wait for the keyring.
"""

from __future__ import annotations

import logging
import secrets

from gatehouse_operator.kube import Kube

KEY = "password"
# 32 random bytes, URL-safe base64: letters, digits, - and _, which a Redis config line carries
# as they are.
PASSWORD_BYTES = 32
log = logging.getLogger("gatehouse.operator")


class StoreSecret:
    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self.settled = False  # found or made: nothing left to do

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def ensure(self, kube: Kube) -> None:
        """Makes the Secret if it is absent; once it is there, does nothing more. Raises the
        API's errors (the caller tries again)."""
        if self.settled:
            return
        data = await kube.secrets.secret_data(self.namespace, self.name)
        if data is None:
            if await kube.secrets.create_secret_if_absent(
                self.namespace, self.name, {KEY: secrets.token_urlsafe(PASSWORD_BYTES)}
            ):
                log.info("made the shared store's password Secret %s", self.ref)
        elif not data.get(KEY):
            # Never rewritten: the store may be running with it. Said once.
            log.error(
                "the shared store's password Secret %s has no key %r: the store and the "
                "proxies cannot start until it does (delete the Secret and the operator makes "
                "a new one)",
                self.ref,
                KEY,
            )
        self.settled = True
