"""Conditions as cert-manager writes them: one per type, a transition time that moves only when
the status does, and the generation they describe.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gatehouse_operator.api.meta import ConditionStatus

# Whether the operator's watch sees a connection's Secret (external_connections).
CREDENTIAL_WATCHED = "CredentialWatched"
# Conditions that say something worth acting on without making the resource unready.
ADVISORY = frozenset({CREDENTIAL_WATCHED})


@dataclass(frozen=True)
class Verdict:
    """One condition's outcome before it is stamped with times and generations."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "True"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` in a status, or {}."""
    found: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == kind), {}
    )
    return found


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
            return Verdict("Ready", "False", verdict.reason, verdict.message)
    return Verdict("Ready", "True", ready_reason, ready_message)
