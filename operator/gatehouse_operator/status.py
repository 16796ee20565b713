"""Status and Events: the one place they are written.

Conditions as cert-manager writes them: one per type, a transition time that moves only when the
status does, and the generation they describe; ``observedGeneration`` stamped; a Kubernetes
Event for every move of the summary condition (and of an advisory one).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.aio import client

from gatehouse_operator.api.conditions import ADVISORY, ConditionType
from gatehouse_operator.api.meta import ConditionStatus, Kind
from gatehouse_operator.kube import Kube

log = logging.getLogger("gatehouse.operator")


@dataclass(frozen=True)
class Verdict:
    """One condition's outcome before it is stamped with times and generations."""

    type: ConditionType
    status: ConditionStatus
    reason: str  # a Reason, or one taken from elsewhere (see Reason)
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "True"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(
    existing: Sequence[dict[str, Any]], verdicts: Sequence[Verdict], generation: int
) -> tuple[list[dict[str, Any]], list[Verdict]]:
    """The new condition list, and the verdicts whose status or reason changed."""
    by_type = {condition.get("type"): condition for condition in existing}
    merged: list[dict[str, Any]] = []
    changed: list[Verdict] = []
    for verdict in verdicts:
        previous = by_type.get(verdict.type, {})
        moved = previous.get("status") != verdict.status
        if moved or previous.get("reason") != verdict.reason:
            changed.append(verdict)
        merged.append(
            {
                "type": verdict.type,
                "status": verdict.status,
                "reason": verdict.reason,
                "message": verdict.message,
                "lastTransitionTime": now() if moved else previous.get("lastTransitionTime", now()),
                "observedGeneration": generation,
            }
        )
    return merged, changed


def ready(verdicts: Sequence[Verdict], ready_reason: str, ready_message: str) -> Verdict:
    """Ready summarises the others: the first failing one explains why not."""
    for verdict in verdicts:
        if not verdict.ok:
            return Verdict(ConditionType.READY, "False", verdict.reason, verdict.message)
    return Verdict(ConditionType.READY, "True", ready_reason, ready_message)


def typed(kind: Kind, status: dict[str, Any]) -> dict[str, Any]:
    """``status`` held to the kind's status model, the one its CRD schema is generated from: a
    field the schema does not have, or a value it would refuse, fails here, not in the API server
    (or silently, pruned by it). Only the fields given are written."""
    if kind.status is None:
        return status
    model = kind.status.model_validate(status)
    written: dict[str, Any] = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return written


class StatusWriter:
    """Writes resources' status and Events, and remembers what it wrote: a restarted operator
    re-reports thousands of unchanged resources without a write."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._conditions: dict[str, list[dict[str, Any]]] = {}
        self._written: dict[str, dict[str, Any]] = {}
        # kind, namespace, name of each resource summarised by Ready (a test is a record).
        self._ready_of: dict[str, tuple[str, str, str]] = {}

    async def write(
        self,
        kind: Kind,
        body: dict[str, Any],
        verdicts: Sequence[Verdict],
        extra: dict[str, Any],
        key: str,
        summary: ConditionType = ConditionType.READY,
        *,
        events: bool = True,
    ) -> None:
        """Writes the status, and an Event for each move of the summary condition (and of an
        advisory one) unless not ``events`` (a step nobody needs told of)."""
        existing = self._conditions.get(key) or body.get("status", {}).get("conditions", [])
        generation = int(body["metadata"].get("generation", 0))
        merged, changed = merge(existing, verdicts, generation)
        status = typed(kind, {"observedGeneration": generation, "conditions": merged, **extra})
        # The written status's own list: one copy per resource (20,000 of them at scale).
        self._conditions[key] = status["conditions"]
        meta = body["metadata"]
        if summary == ConditionType.READY:
            self._ready_of[key] = (kind.kind, meta["namespace"], meta["name"])
        # One Event per move of the summary condition (Ready): its reason is the failing
        # condition's, so the others would only repeat it. Advisory conditions do not feed
        # Ready, so their moves are told by Events of their own.
        for verdict in changed if events else ():
            if verdict.type == summary or verdict.type in ADVISORY:
                await self._event(kind, body, verdict)
        if status == self._written.get(key, body.get("status")):
            return  # as it is: a restarted operator re-reports thousands of unchanged resources
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

    def condition(self, key: str, type_: ConditionType) -> dict[str, Any]:
        """The condition this operator last wrote for ``key``, or an empty dict."""
        return next((c for c in self._conditions.get(key, []) if c["type"] == type_), {})

    def readiness(self) -> Iterator[tuple[str, str, str, ConditionStatus]]:
        """kind, namespace, name and Ready's status of each resource this operator reports on."""
        for key, (kind, namespace, name) in self._ready_of.items():
            ready = self.condition(key, ConditionType.READY)
            yield kind, namespace, name, ready.get("status", "Unknown")

    def forget(self, key: str) -> None:
        self._conditions.pop(key, None)
        self._written.pop(key, None)
        self._ready_of.pop(key, None)
