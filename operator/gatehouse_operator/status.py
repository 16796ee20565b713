"""Status and Events: the one place they are written.

Conditions as cert-manager writes them: one per type, a transition time that moves only when the
status does, and the generation they describe; ``observedGeneration`` stamped; a Kubernetes
Event for every move of the summary condition (and of an advisory one).

A caller gives its verdicts and its kind's status model (``api/``) holding the kind's own fields;
the writer adds the conditions and the generation, and keeps what it wrote typed.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from gatehouse_operator.api import meta as api_meta
from gatehouse_operator.api.conditions import ADVISORY, ConditionType
from gatehouse_operator.api.meta import ConditionStatus, Kind, Status
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.api.stored import StoredCondition
from gatehouse_operator.kube import Kube
from gatehouse_operator.kube.errors import ApiError

log = logging.getLogger("gatehouse.operator")


@dataclass(frozen=True)
class Verdict:
    """One condition's outcome before it is stamped with times and generations."""

    type: ConditionType
    status: ConditionStatus
    # A Reason, a RefusalReason (a test the proxy refused), or one taken from elsewhere (see
    # Reason): another condition's as read back, a newer proxy's refusal this release does not
    # know. Hence a str, not a union of the two enums.
    reason: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition as this operator wrote it: a Verdict stamped with the time its status last
    moved and the generation it describes.

    A slots dataclass rather than the pydantic ``api.meta.Condition`` (which checks it on the
    way out): the writer holds one per condition of up to 20,000 resources, and a model costs
    more than twice as much to hold."""

    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str
    last_transition_time: str
    observed_generation: int

    def checked(self) -> api_meta.Condition:
        """As the CRD schema has it: a reason or message it would refuse fails here."""
        return api_meta.Condition(
            type=self.type,
            status=self.status,
            reason=self.reason,
            message=self.message,
            last_transition_time=self.last_transition_time,
            observed_generation=self.observed_generation,
        )


@dataclass(frozen=True, slots=True)
class Written:
    """A resource's status as written: its conditions, generation and the kind's own fields."""

    generation: int
    conditions: tuple[Condition, ...]
    fields: Status

    def wire(self) -> dict[str, JsonValue]:
        """The status patch: only the fields given, as the kind's status model (the one its CRD
        schema is generated from) writes them."""
        status = self.fields.model_copy(
            update={
                "observed_generation": self.generation,
                "conditions": [condition.checked() for condition in self.conditions],
            }
        )
        return status.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def same_as(self, other: Written) -> bool:
        """Whether both write the same status: pydantic's == leaves out which fields were
        given, and only those are written."""
        return self == other and self.fields.model_fields_set == other.fields.model_fields_set


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(
    existing: Sequence[Condition | StoredCondition], verdicts: Sequence[Verdict], generation: int
) -> tuple[tuple[Condition, ...], list[Verdict]]:
    """The new conditions, and the verdicts whose status or reason changed."""
    by_type = {condition.type: condition for condition in existing}
    merged: list[Condition] = []
    changed: list[Verdict] = []
    for verdict in verdicts:
        previous = by_type.get(verdict.type)
        if previous is None or previous.status != verdict.status:
            since = now()
            changed.append(verdict)
        else:
            since = previous.last_transition_time or now()
            if previous.reason != verdict.reason:
                changed.append(verdict)
        merged.append(
            Condition(
                verdict.type, verdict.status, verdict.reason, verdict.message, since, generation
            )
        )
    return tuple(merged), changed


def ready(verdicts: Sequence[Verdict], ready_reason: str, ready_message: str) -> Verdict:
    """Ready summarises the others: the first failing one explains why not."""
    for verdict in verdicts:
        if not verdict.ok:
            return Verdict(ConditionType.READY, "False", verdict.reason, verdict.message)
    return Verdict(ConditionType.READY, "True", ready_reason, ready_message)


class StatusWriter:
    """Writes resources' status and Events, and remembers what it wrote: a restarted operator
    re-reports thousands of unchanged resources without a write."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._conditions: dict[str, tuple[Condition, ...]] = {}
        self._written: dict[str, Written] = {}
        # kind, namespace, name of each resource summarised by Ready (a test is a record).
        self._ready_of: dict[str, tuple[str, str, str]] = {}

    async def write(
        self,
        kind: Kind,
        resource: Resource,
        verdicts: Sequence[Verdict],
        fields: Status,
        key: str,
        summary: ConditionType = ConditionType.READY,
        *,
        events: bool = True,
    ) -> None:
        """Writes the status (``fields``: the kind's status model with its own fields, those
        given written), and an Event for each move of the summary condition (and of an
        advisory one) unless not ``events`` (a step nobody needs told of)."""
        generation = resource.generation
        # What this process wrote last, else the conditions as stored (after a restart).
        existing = self._conditions.get(key) or resource.stored_status().conditions
        merged, changed = merge(existing, verdicts, generation)
        written = Written(generation, merged, fields)
        status = written.wire()
        # One tuple of conditions per resource (20,000 of them at scale), shared with _written.
        self._conditions[key] = merged
        if summary == ConditionType.READY:
            self._ready_of[key] = (kind.kind, resource.namespace, resource.name)
        # One Event per move of the summary condition (Ready): its reason is the failing
        # condition's, so the others would only repeat it. Advisory conditions do not feed
        # Ready, so their moves are told by Events of their own.
        for verdict in changed if events else ():
            if verdict.type == summary or verdict.type in ADVISORY:
                await self._event(kind, resource, verdict)
        last = self._written.get(key)
        if written.same_as(last) if last is not None else status == resource.status:
            return  # as it is: a restarted operator re-reports thousands of unchanged resources
        await self.kube.resources.patch_status(kind, resource.namespace, resource.name, status)
        self._written[key] = written

    async def _event(self, kind: Kind, resource: Resource, verdict: Verdict) -> None:
        try:
            await self.kube.resources.post_event(
                kind,
                resource.reference(),
                "Normal" if verdict.ok else "Warning",
                verdict.reason,
                verdict.message,
            )
        except ApiError as error:
            # The status still says it: an Event is a notification, not the record.
            log.warning(
                "cannot post the %s Event on %s (HTTP %s)",
                verdict.reason,
                resource.name,
                error.status,
            )

    def condition(self, key: str, type_: ConditionType) -> Condition | None:
        """The condition this operator last wrote for ``key``, if it wrote one."""
        return next((c for c in self._conditions.get(key, ()) if c.type == type_), None)

    def readiness(self) -> Iterator[tuple[str, str, str, ConditionStatus]]:
        """kind, namespace, name and Ready's status of each resource this operator reports on."""
        for key, (kind, namespace, name) in self._ready_of.items():
            ready = self.condition(key, ConditionType.READY)
            yield kind, namespace, name, ready.status if ready is not None else "Unknown"

    def forget(self, key: str) -> None:
        self._conditions.pop(key, None)
        self._written.pop(key, None)
        self._ready_of.pop(key, None)
