"""The viewer's id in what the replica keeps: the inspector's record (and so the operator's
Requests tab) and the audit line show it unless the installation says not
(``viewers.recordViewerIds``); a fetch without a viewer shows none, and no metric ever has it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time

import pytest

from gatehouse_contract.activity import RequestsQuery
from gatehouse_contract.frames import Gather, Gathered, read_replica_message
from gatehouse_contract.observability import JSONFormatter
from gatehouse_proxy.observation import metrics, observers
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.audit import AuditSettings
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.viewers.assertions import Viewer

APP = "ns/DataApp/a"


def _observed(activity: Activity, record_viewers: bool, viewer: Viewer | None) -> None:
    fetch = Fetch("GET", b"/a", b"", None, 0.0, app=APP, connection="ns/c")
    fetch.viewer = viewer
    fetch.status, fetch.answered, fetch.finished, fetch.ended_at = 200, 0.01, 0.01, time.time()
    for observer in observers.listed(Tracing(None), activity, record_viewers):
        observer.observe(fetch)


def _gathered(activity: Activity) -> Gathered:
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    asyncio.run(activity.answer(Gather(id="g", requests=RequestsQuery(connection="ns/c")), send))
    answer = read_replica_message(sent[-1].encode())
    assert isinstance(answer, Gathered)
    return answer


@pytest.mark.parametrize("recorded", [True, False])
def test_the_viewer_is_in_the_record_and_the_audit_line_where_the_installation_allows_it(
    caplog: pytest.LogCaptureFixture, recorded: bool
) -> None:
    caplog.set_level(logging.INFO, logger="gatehouse.proxy.audit")
    activity = Activity("replica-1", AuditSettings(enabled=True))
    _observed(activity, recorded, Viewer("u-42", "ada@example.com", "https://bi.example"))
    _observed(activity, recorded, None)
    with_viewer, without = reversed(_gathered(activity).requests)
    assert with_viewer.viewer == ("u-42" if recorded else "")
    assert without.viewer == ""
    lines = [
        json.loads(JSONFormatter().format(record))
        for record in caplog.records
        if record.name == "gatehouse.proxy.audit"
    ]
    assert [line["request"].get("viewer") for line in lines] == [
        "u-42" if recorded else None,
        None,
    ]
    # The e-mail is the vendor's to be told, not the replica's to keep.
    assert "ada@example.com" not in json.dumps(lines)
    assert "ada@example.com" not in _gathered(activity).model_dump_json()


def test_no_metric_has_the_viewer_as_a_label() -> None:
    assert set(dataclasses.asdict(metrics.Labels())) == {"app", "connection", "code"}
