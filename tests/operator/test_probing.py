"""A connection test's result: bounded by construction, and read into what people see."""

from __future__ import annotations

import asyncio
import json

import pytest

from gatehouse_operator.probing import Finished, Waiting, ask, result
from gatehouse_operator.table_server import MAX_REPLICA_MESSAGE_BYTES
from gatehouse_proxy.channel import ProbeResult
from gatehouse_proxy.probes import (
    MAX_ANSWER_BODY_BYTES,
    MAX_CONTENT_TYPE_CHARS,
    ProbeAnswer,
    ProbeRequest,
)


@pytest.mark.parametrize("byte", [b"\x01", b"\xff", b'"', "\u2028".encode()])
def test_the_largest_result_fits_the_channel_whatever_the_upstream_sent(byte: bytes) -> None:
    """Every byte the body may hold, at its worst JSON escaping (\\u0001 is six bytes for one),
    fills the prefix the replica keeps; the message is still far under the channel's limit."""
    body = (byte * MAX_ANSWER_BODY_BYTES)[:MAX_ANSWER_BODY_BYTES].decode(errors="replace")
    answer = ProbeAnswer(
        status_code=200,
        content_type="\x01" * MAX_CONTENT_TYPE_CHARS,
        body=body,
        size_bytes=26_214_400,
        truncated=True,
    )
    message = ProbeResult(
        id="f" * 100, result={"answered": answer.model_dump(by_alias=True)}
    ).model_dump_json()
    assert len(message.encode()) < MAX_REPLICA_MESSAGE_BYTES / 2


class _Channel:
    def __init__(self, outcome: dict[str, object]) -> None:
        self.outcome = outcome

    async def probe(self, request: ProbeRequest, within: float) -> dict[str, object]:
        return self.outcome


class _Runtime:
    def __init__(self, outcome: dict[str, object]) -> None:
        self.channel = _Channel(outcome)


REQUEST = ProbeRequest(connection="a/c", method="GET", path="/")


def _ask(outcome: dict[str, object]) -> ProbeAnswer:
    runtime: object = _Runtime(outcome)
    return asyncio.run(ask(runtime, REQUEST, within=1))  # type: ignore[arg-type]


def test_a_busy_replica_is_a_reason_to_wait_and_an_unreadable_answer_a_failure() -> None:
    busy: dict[str, object] = {"refused": {"code": "tests_busy", "message": "a has 20 tests"}}
    with pytest.raises(Waiting) as waiting:
        _ask(busy)
    assert waiting.value.reason == "ProxyBusy"
    with pytest.raises(Finished) as finished:
        _ask({"answered": {"statusCode": 200, "body": "x" * (MAX_ANSWER_BODY_BYTES + 1)}})
    assert finished.value.verdict.reason == "ProxyError"


def test_a_cut_answer_is_shown_as_cut() -> None:
    whole = json.dumps({"items": [{"id": n, "access_token": "t"} for n in range(5_000)]})
    answer = ProbeAnswer(
        status_code=200,
        content_type="application/json",
        body=whole[:MAX_ANSWER_BODY_BYTES],
        size_bytes=len(whole),
        truncated=True,
    )
    shown = asyncio.run(result(answer, "GET", "/items", []))
    assert shown.passed
    assert shown.response["truncated"] is True
    assert shown.response["sizeBytes"] == len(whole)
    assert shown.response["body"].startswith('{"items": [{"id": 0, "access_token": "[redacted]"}')
    assert shown.sample_body["truncated"] is True
