"""What the operator's handlers share (kopf hands it to them as ``memo.runtime``).

Also the one place status is written: conditions merged with their transition times, a Kubernetes
Event for every condition whose status or reason moved, ``observedGeneration`` stamped.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.aio import client

from gatehouse_contract.routes import Credential, EntryKind
from gatehouse_contract.sealing import KeyringSource
from gatehouse_operator import conditions
from gatehouse_operator.api.connection import Auth
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.conditions import Verdict
from gatehouse_operator.credentials import seal_credential
from gatehouse_operator.kube import Kube
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table.channel import TableChannel
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout, Routed
from gatehouse_operator.table.store import RouteStore

log = logging.getLogger("gatehouse.operator")


def resource_key(body: dict[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{body['metadata']['name']}"


def app_key(kind: Kind, body: dict[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{kind.kind}/{body['metadata']['name']}"


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: Kube
    keyring: KeyringSource
    routes: RouteStore = field(default_factory=RouteStore)
    journal: Journal = field(default_factory=Journal)
    # ProjectConfigs by projectUuid (their uid), for the defaults API.
    projects: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Per connection uid: the inputs a credential was sealed from, and the result.
    sealed: dict[str, tuple[tuple[str, ...], Credential]] = field(default_factory=dict)
    # Connections whose Secret a watch event said changed but that could not be read then:
    # read again soon (housekeeping), since the watch will not say it twice.
    unread: set[str] = field(default_factory=set)
    _conditions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _written: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.replicas = Replicas(self.settings.replica_grace_seconds, self._replicas_changed)
        self.channel = TableChannel(self.keyring, self.routes, self.journal, self.replicas)
        self.rollout = Rollout(self.routes, self.journal, self.replicas, self.write_status)

    def _replicas_changed(self) -> None:
        self.rollout.wake()

    def refresh_table(self) -> None:
        """Publishes the route store's changes to the proxy replicas (soon, coalesced)."""
        self.channel.schedule_flush()

    async def report_routed(
        self,
        kind: Kind,
        body: dict[str, Any],
        verdicts: Sequence[Verdict],
        extra: dict[str, Any],
        key: str,
        entry: tuple[EntryKind, str],
        message: str,
    ) -> None:
        """Writes the status of a resource whose own checks pass: Ready once the proxy
        replicas hold its route (see rollout)."""
        routed = Routed(kind, body, verdicts, extra, key, entry, message)
        verdict = self.rollout.verdict(routed)
        if verdict.ok:
            self.rollout.drop(key)
            await self.write_status(kind, body, [*verdicts, verdict], extra, key)
        else:
            self.rollout.expect(routed)

    async def report_not_ready(
        self,
        kind: Kind,
        body: dict[str, Any],
        verdicts: Sequence[Verdict],
        extra: dict[str, Any],
        key: str,
    ) -> None:
        self.rollout.drop(key)
        await self.write_status(kind, body, verdicts, extra, key)

    def seal(
        self,
        auth: Auth,
        secret_data: Mapping[str, bytes] | None,
        *,
        connection_uid: str,
        origin: str,
    ) -> Credential:
        """The connection's sealed credential, re-sealed only when an input changed.

        Re-sealing an unchanged secret would change its ciphertext, and with it the proxies'
        cached Google tokens. The active key id is an input, so a rotation re-seals everything.
        Raises CredentialProblem as seal_credential does.
        """
        value = secret_data.get(auth.secret_ref.key) if auth.secret_ref and secret_data else None
        keyring = self.keyring.current()
        inputs = (
            origin,
            auth.model_dump_json(),
            hashlib.sha256(value).hexdigest() if value is not None else "",
            keyring.active,
        )
        cached = self.sealed.get(connection_uid)
        if cached is not None and cached[0] == inputs:
            return cached[1]
        credential = seal_credential(
            auth, secret_data, keyring=keyring, connection_uid=connection_uid, origin=origin
        )
        self.sealed[connection_uid] = (inputs, credential)
        return credential

    async def write_status(
        self,
        kind: Kind,
        body: dict[str, Any],
        verdicts: Sequence[Verdict],
        extra: dict[str, Any],
        key: str,
        summary: str = "Ready",
    ) -> None:
        existing = self._conditions.get(key) or body.get("status", {}).get("conditions", [])
        generation = int(body["metadata"].get("generation", 0))
        merged, changed = conditions.merge(existing, verdicts, generation)
        self._conditions[key] = merged
        # One Event per move of the summary condition (Ready): its reason is the failing
        # condition's, so the others would only repeat it. Advisory conditions do not feed
        # Ready, so their moves are told by Events of their own.
        for verdict in changed:
            if verdict.type == summary or verdict.type in conditions.ADVISORY:
                await self._event(kind, body, verdict)
        status = {"observedGeneration": generation, "conditions": merged, **extra}
        if status == self._written.get(key, body.get("status")):
            return  # as it is: a restarted operator re-reports thousands of unchanged resources
        meta = body["metadata"]
        await self.kube.patch_status(kind, meta["namespace"], meta["name"], status)
        self._written[key] = status

    async def _event(self, kind: Kind, body: dict[str, Any], verdict: Verdict) -> None:
        try:
            await self.kube.post_event(
                kind,
                body["metadata"],
                "Normal" if verdict.ok else "Warning",
                verdict.reason,
                verdict.message,
            )
        except client.ApiException as error:
            # The status still says it: an Event is a notification, not the record.
            log.warning(
                "cannot post the %s Event on %s (HTTP %s)",
                verdict.reason,
                body["metadata"]["name"],
                error.status,
            )

    def condition(self, key: str, type_: str) -> dict[str, Any]:
        """The condition this operator last wrote for ``key``, or an empty dict."""
        return next((c for c in self._conditions.get(key, []) if c["type"] == type_), {})

    def forget(self, key: str, uid: str = "") -> None:
        self._conditions.pop(key, None)
        self._written.pop(key, None)
        self.rollout.drop(key)
        self.sealed.pop(uid, None)
