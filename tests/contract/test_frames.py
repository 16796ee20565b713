"""What a replica sends the operator is bounded where the operator reads it: every number and
string in every replica frame has a bound in the contract, and a frame with a value past one is
refused by read_replica_message (Unreadable, naming the field), never handed to a handler (R4-1:
a Throttled frame of 999,999,999,999 seconds made the operator's Event date overflow)."""

from __future__ import annotations

import json
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import BaseModel
from pydantic.types import AllowInfNan

from gatehouse_contract.activity import START, RequestsQuery
from gatehouse_contract.connection_tests import MAX_PROBLEM_MESSAGE_CHARS, Problem
from gatehouse_contract.frames import (
    CURSOR_FIELDS,
    MAX_PAUSE_SECONDS,
    POSITION_FIELDS,
    Gather,
    Gathered,
    ReplicaMessage,
    Throttled,
    Unreadable,
    read_replica_message,
)
from gatehouse_contract.wire import MAX_COUNT, MAX_INSTANT


def _unbounded(annotation: Any, metadata: list[Any], where: str) -> list[str]:
    """The places under ``annotation`` that have no bound: a string without a most length, a
    number without a least and a most (a float also finite), a tuple without a most length."""
    origin = get_origin(annotation)
    kinds = {type(item) for item in metadata}
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        more = [part for item in extra for part in getattr(item, "metadata", [item])]
        return _unbounded(inner, [*metadata, *more], where)
    if origin in (Union, types.UnionType):
        return [found for arg in get_args(annotation) for found in _unbounded(arg, [], where)]
    if origin is Literal or annotation is bool or annotation is type(None):
        return []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [
            found
            for name, field in annotation.model_fields.items()
            for found in _unbounded(field.annotation, list(field.metadata), f"{where}.{name}")
        ]
    if origin is tuple:
        missing = [] if annotated_types.MaxLen in kinds else [f"{where} (length)"]
        return missing + _unbounded(get_args(annotation)[0], [], f"{where}[]")
    if annotation is str:
        return [] if annotated_types.MaxLen in kinds else [where]
    if annotation in (int, float):
        least = kinds & {annotated_types.Ge, annotated_types.Gt}
        most = kinds & {annotated_types.Le, annotated_types.Lt}
        finite = annotation is int or any(
            isinstance(item, AllowInfNan) and not item.allow_inf_nan for item in metadata
        )
        return [] if least and most and finite else [where]
    return [f"{where} ({annotation!r}: not known to this test)"]


def test_every_number_and_string_a_replica_sends_has_a_bound() -> None:
    unbounded = [
        found
        for frame in get_args(ReplicaMessage)
        for found in _unbounded(frame, [], frame.__name__)
    ]
    assert unbounded == []


def _frame(**fields: Any) -> str:
    return json.dumps(fields)


# (frame, the field its refusal names)
OUT_OF_RANGE = [
    (_frame(type="throttled", connection="a/b", status=429, seconds=999_999_999_999), "seconds"),
    (
        _frame(type="throttled", connection="a/b", status=429, seconds=MAX_PAUSE_SECONDS + 1),
        "seconds",
    ),
    ('{"type":"throttled","connection":"a/b","status":429,"seconds":NaN}', "seconds"),
    ('{"type":"throttled","connection":"a/b","status":429,"seconds":Infinity}', "seconds"),
    ('{"type":"throttled","connection":"a/b","status":429,"seconds":1e400}', "seconds"),
    (_frame(type="throttled", connection="a/b", status=429, seconds=0), "seconds"),
    (_frame(type="throttled", connection="a/b", status=429, seconds=-5), "seconds"),
    (_frame(type="throttled", connection="a/b", status=200, seconds=5), "status"),
    (_frame(type="throttled", connection="a/b", status=10**30, seconds=5), "status"),
    (_frame(type="throttled", connection="a/" + "b" * 600, status=429, seconds=5), "connection"),
    (
        _frame(
            type="probeResult",
            id="t1",
            result={
                "answered": {"statusCode": 1000, "contentType": "", "body": "", "sizeBytes": 0}
            },
        ),
        "statusCode",
    ),
    (
        _frame(
            type="probeResult",
            id="t1",
            result={
                "answered": {"statusCode": 200, "contentType": "", "body": "", "sizeBytes": 2**64}
            },
        ),
        "sizeBytes",
    ),
    (
        _frame(
            type="probeResult",
            id="t1",
            result={"refused": {"code": "x", "message": "m" * (MAX_PROBLEM_MESSAGE_CHARS + 1)}},
        ),
        "result",  # a union's refusal names its first member's miss
    ),
    (_frame(type="probeResult", id="t" * 101, result={"stale": {"tableVersion": 1}}), "id"),
    (_frame(type="probeResult", id="t1", result={"stale": {"tableVersion": -1}}), "result"),
    (_frame(type="ack", version=-1), "version"),
    (_frame(type="nack", version=1, installed=MAX_COUNT + 1, reason=""), "installed"),
]


def _record(**changed: Any) -> dict[str, Any]:
    record = {
        "seq": 1, "time": 1.8e9, "app": "a/DataApp/x", "connection": "a/b", "method": "GET",
        "path": "/", "status": 200, "code": "ok", "durationMs": 1.0, "requestBytes": 0,
        "responseBytes": 0, "traceId": "",
    }  # fmt: skip
    return {**record, **changed}


def _row(**changed: Any) -> dict[str, Any]:
    return {"minute": 30_000_000, "connection": "a/b", "app": "a/x", "errors": 0,
            "durations": [0] * 9, **changed}  # fmt: skip


OUT_OF_RANGE += [
    (_frame(type="gathered", id="g", requests=[_record(time=MAX_INSTANT + 1)]), "time"),
    (_frame(type="gathered", id="g", requests=[_record(status=1000)]), "status"),
    (_frame(type="gathered", id="g", requests=[_record(durationMs=-1)]), "durationMs"),
    (_frame(type="gathered", id="g", requests=[_record(responseBytes=-1)]), "responseBytes"),
    (_frame(type="usage", id="u", rows=[_row(minute=10**12)]), "minute"),
    (_frame(type="usage", id="u", rows=[_row(durations=[-1] + [0] * 8)]), "durations"),
    (_frame(type="usage", id="u", rows=[_row(errors=-1)]), "errors"),
]


@pytest.mark.parametrize(("frame", "field"), OUT_OF_RANGE)
def test_a_frame_with_a_value_out_of_range_is_refused_where_it_is_read(
    frame: str, field: str
) -> None:
    with pytest.raises(Unreadable) as refused:
        read_replica_message(frame)
    assert field in str(refused.value)


def test_values_within_the_bounds_are_read() -> None:
    said = read_replica_message(
        _frame(type="throttled", connection="a/b", status=503, seconds=MAX_PAUSE_SECONDS)
    )
    assert said == Throttled(connection="a/b", status=503, seconds=MAX_PAUSE_SECONDS)
    assert read_replica_message(_frame(type="gathered", id="g", requests=[_record()]))
    assert read_replica_message(_frame(type="usage", id="u", rows=[_row()]))


def test_a_replica_cuts_a_problems_message_to_what_the_frame_carries() -> None:
    long = Problem.of("token_endpoint_failed", "x" * 10_000)
    assert len(long.message) == MAX_PROBLEM_MESSAGE_CHARS
    assert long.message.endswith("…")
    assert Problem.of("internal", "short").message == "short"


def test_a_replica_or_operator_of_the_release_before_is_sent_no_cursor_field() -> None:
    """Issue 50's cursor is optional on the wire: the operator leaves a query's ``cursor`` and
    ``after`` out for a replica that did not name CURSOR_FEATURE, and a replica leaves its
    answer's ``position`` and ``lost`` out for an operator that did not ask; each side's models
    forbid fields they do not know, so either would refuse the frame otherwise."""
    query = RequestsQuery(app="ns/DataApp/a", cursor=True, after=START)
    sent = json.loads(Gather(id="g", requests=query).model_dump_json(exclude=CURSOR_FIELDS))
    assert set(sent["requests"]) == {"connection", "app", "since", "limit"}
    answer = Gathered(id="g", position=START, lost=2)
    assert set(json.loads(answer.model_dump_json(exclude=POSITION_FIELDS))) == {
        "type", "id", "requests",
    }  # fmt: skip
    assert read_replica_message(answer.model_dump_json().encode()) == answer
