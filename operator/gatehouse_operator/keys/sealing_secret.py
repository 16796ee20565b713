"""The sealing keys in a Kubernetes Secret of their own, read by the operator through the API.

No Pod mounts this Secret, so no kubelet may read it (the Node authorizer lets a kubelet get the
Secrets its Pods use); the keyring, which every proxy mounts, is a separate Secret. The operator
makes it when it is absent and allowed, and never rewrites what it finds; with
``sealingKeys.existingSecret`` it only reads. Losing these keys loses every sealed value in Git,
so the operator:

- never makes a new Secret while the published public keys (the ConfigMap, which outlives the
  operator's restarts) list keys: the Secret is missing, not new, and is to be restored;
- writes the keys it holds back when the Secret is deleted while it runs.

A failure to read or make the Secret never stops the operator: sealed values wait
(``SealingKeysMissing``) and the Secret is read again every 10 s.
"""

from __future__ import annotations

import json
import logging

from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE, SealingKeys, SealingKeysError
from gatehouse_operator.kube import API_ERRORS, Kube, failure

log = logging.getLogger("gatehouse.operator")


class SealingKeysSecret:
    def __init__(
        self, namespace: str, name: str, *, create: bool, published: tuple[str, str] | None
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.create = create
        self.published = published  # the public keys' ConfigMap (namespace, name)
        self._keys: SealingKeys | None = None
        self._said = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def sealing_keys(self) -> SealingKeys | None:
        return self._keys

    async def refresh(self, kube: Kube) -> None:
        """Reads the Secret (a rotation), makes it at the first start, or puts it back."""
        try:
            data = await kube.secrets.secret_data(self.namespace, self.name)
            if data is None:
                await self._absent(kube)
                return
        except API_ERRORS as error:
            self._say(
                f"cannot read the sealing keys Secret {self.ref} ({failure(error)}); trying again"
            )
            return
        if SEALING_KEYS_FILE not in data:
            self._say(
                f"the sealing keys Secret {self.ref} has no key {SEALING_KEYS_FILE}: sealed values "
                "cannot open until gatehouse sealing-key rotate adds the first"
            )
            return
        try:
            self._keys = SealingKeys.parse(data[SEALING_KEYS_FILE])
        except SealingKeysError as error:
            self._say(f"the sealing keys Secret {self.ref}: {error}; keeping the keys in memory")
            return
        self._said = ""

    async def _absent(self, kube: Kube) -> None:
        if not self.create:
            self._say(
                f"the sealing keys Secret {self.ref} does not exist: sealed values cannot open "
                "until it does"
            )
            return
        if self._keys is not None:
            # Deleted while the operator runs: the keys it holds are written back, not lost.
            await self._write(kube, self._keys, "written back (it was deleted)")
            return
        listed = await self._published_keys(kube)
        if listed:
            self._say(
                f"the sealing keys Secret {self.ref} is missing, and the published public keys "
                f"list {', '.join(sorted(listed))}: restore it from your backup (a new key would "
                "not open the values sealed with those)"
            )
            return
        await self._write(kube, SealingKeys.generate(), "made")

    async def _write(self, kube: Kube, keys: SealingKeys, what: str) -> None:
        if not await kube.secrets.create_secret_if_absent(
            self.namespace, self.name, {SEALING_KEYS_FILE: keys.dump()}
        ):
            return  # made by another replica meanwhile: read at the next turn
        self._keys = keys
        self._said = ""
        log.info("the sealing keys Secret %s was %s (active key %s)", self.ref, what, keys.active)

    async def _published_keys(self, kube: Kube) -> list[str]:
        if self.published is None:
            return []
        data = await kube.secrets.config_map_data(*self.published)
        try:
            listed = json.loads((data or {}).get(SEALING_KEYS_FILE, "{}")).get("keys", {})
        except (ValueError, AttributeError):
            return []
        return [str(fp) for fp in listed] if isinstance(listed, dict) else []

    def _say(self, message: str) -> None:
        """Logs a problem once, not at every read."""
        if message != self._said:
            log.error("%s", message)
            self._said = message
