"""The status writer: only the fields given are written, a condition's transition time moves only
with its status, an Event marks each move of Ready, and an unchanged status is not written again
(by this process, or by one restarted over the status it finds stored).

The API server is a stand-in here; statuses on a real one are tested end to end
(tests/e2e/test_connections.py, tests/e2e/test_connection_tests.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gatehouse_operator import status as status_module
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION, ExternalConnectionStatus
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.status import StatusWriter, Verdict
from tests.operator.kube_fakes import kube_of

KEY = "shop/vendor"
BODY: dict[str, Any] = {"metadata": {"namespace": "shop", "name": "vendor", "generation": 3}}
READY = Verdict(ConditionType.READY, "True", Reason.ROUTED, "routed")
NOT_READY = Verdict(ConditionType.READY, "False", Reason.PROXY_BEHIND, "behind")


class Api:
    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.events: list[str] = []

    async def patch_status(
        self, kind: Kind, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        self.statuses.append(status)

    async def post_event(
        self, kind: Kind, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        self.events.append(reason)


def write(
    writer: StatusWriter,
    verdict: Verdict,
    fields: ExternalConnectionStatus,
    body: dict[str, Any] = BODY,
) -> None:
    asyncio.run(writer.write(EXTERNAL_CONNECTION, resource_of(body), [verdict], fields, KEY))


def test_only_the_fields_given_are_written_and_an_unchanged_status_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api()
    writer = StatusWriter(kube_of(api))
    monkeypatch.setattr(status_module, "now", lambda: "2026-01-01T00:00:00Z")
    write(writer, READY, ExternalConnectionStatus(has_secret=True))
    assert api.statuses == [
        {
            "observedGeneration": 3,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Routed",
                    "message": "routed",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 3,
                }
            ],
            "hasSecret": True,
        }
    ]
    assert api.events == ["Routed"]
    monkeypatch.setattr(status_module, "now", lambda: "2026-01-02T00:00:00Z")
    write(writer, READY, ExternalConnectionStatus(has_secret=True))
    assert len(api.statuses) == 1
    # A field given with its default value is written: it was not written before.
    write(writer, READY, ExternalConnectionStatus(has_secret=True, origin=""))
    assert api.statuses[-1]["origin"] == ""
    # The same status, the same reason: no Event, and the transition time stays.
    assert api.statuses[-1]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    write(writer, NOT_READY, ExternalConnectionStatus(has_secret=True))
    assert api.statuses[-1]["conditions"][0]["lastTransitionTime"] == "2026-01-02T00:00:00Z"
    assert api.events == ["Routed", "ProxyBehind"]
    assert writer.condition(KEY, ConditionType.READY) == status_module.Condition(
        ConditionType.READY, "False", "ProxyBehind", "behind", "2026-01-02T00:00:00Z", 3
    )
    assert writer.condition(KEY, ConditionType.ACCEPTED) is None
    assert list(writer.readiness()) == [("ExternalConnection", "shop", "vendor", "False")]


def test_a_restarted_writer_does_not_write_the_status_it_finds_stored() -> None:
    first = Api()
    write(StatusWriter(kube_of(first)), READY, ExternalConnectionStatus(has_secret=True))
    again = Api()
    stored = {**BODY, "status": first.statuses[0]}
    write(StatusWriter(kube_of(again)), READY, ExternalConnectionStatus(has_secret=True), stored)
    assert again.statuses == []
    assert again.events == []  # Ready has not moved


def test_a_reason_the_schema_refuses_fails_before_anything_is_written() -> None:
    api = Api()
    writer = StatusWriter(kube_of(api))
    bad = Verdict(ConditionType.READY, "False", "not a CamelCase word", "")
    with pytest.raises(ValueError, match="reason"):
        write(writer, bad, ExternalConnectionStatus())
    assert (api.statuses, api.events) == ([], [])
    assert writer.condition(KEY, ConditionType.READY) is None
