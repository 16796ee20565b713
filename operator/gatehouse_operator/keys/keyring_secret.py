"""The keyring in a Kubernetes Secret, read by the operator through the API.

In a cluster the operator, not the chart, makes the keyring: a key drawn at render time changes at
every ``helm template`` (a GitOps tool renders on every sync, where ``lookup`` finds nothing), and
the proxies could no longer decrypt what was encrypted with the old bytes. The operator makes the
Secret once, when it is absent, and never rewrites what it finds; with ``keyring.existingSecret`` it
only reads. The proxies mount the same Secret as a file (``KeyringFile``).
"""

from __future__ import annotations

import logging

from gatehouse_contract.keyring import Keyring, KeyringError
from gatehouse_operator.kube import Kube

KEY = "keyring.json"
FIRST_KEY_ID = "k1"
log = logging.getLogger("gatehouse.operator")


class KeyringSecret:
    def __init__(self, namespace: str, name: str, *, create: bool) -> None:
        self.namespace = namespace
        self.name = name
        self.create = create
        self._keyring: Keyring | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def current(self) -> Keyring:
        if self._keyring is None:
            raise KeyringError(f"the keyring Secret {self.ref} has not been read yet")
        return self._keyring

    async def load(self, kube: Kube) -> None:
        """Reads the Secret, making it first if absent and allowed. Raises KeyringError."""
        data = await kube.secrets.secret_data(self.namespace, self.name)
        if data is None and self.create:
            data = await self._make(kube)
        if data is None:
            raise KeyringError(
                f"the keyring Secret {self.ref} does not exist: create it (key {KEY}) or leave "
                "keyring.existingSecret empty so that the operator makes one"
            )
        self._keyring = self._parse(data)

    async def refresh(self, kube: Kube) -> None:
        """Picks up a rotation. A Secret that is gone or broken keeps the keys in memory."""
        try:
            data = await kube.secrets.secret_data(self.namespace, self.name)
            if data is None:
                log.error("the keyring Secret %s is gone; keeping the keys in memory", self.ref)
                return
            self._keyring = self._parse(data)
        except KeyringError as error:
            log.error("%s; keeping the keys in memory", error)

    async def _make(self, kube: Kube) -> dict[str, bytes] | None:
        keyring = Keyring.generate(FIRST_KEY_ID)
        if not await kube.secrets.create_secret_if_absent(
            self.namespace, self.name, {KEY: keyring.dump()}
        ):
            # Made by another operator meanwhile: use that one.
            return await kube.secrets.secret_data(self.namespace, self.name)
        log.info("made the keyring Secret %s (key %r)", self.ref, FIRST_KEY_ID)
        return {KEY: keyring.dump().encode()}

    def _parse(self, data: dict[str, bytes]) -> Keyring:
        if KEY not in data:
            raise KeyringError(f"the keyring Secret {self.ref} has no key {KEY!r}")
        try:
            return Keyring.parse(data[KEY])
        except KeyringError as error:
            raise KeyringError(f"the keyring Secret {self.ref}: {error}") from None
