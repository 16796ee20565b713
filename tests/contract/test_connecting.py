"""The connect flow's frames on the table channel: what each step needs is checked where the frame
is read, and a replica's answer is bounded as every frame a replica sends."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from gatehouse_contract.connecting import (
    MAX_ENCRYPTED_CHARS,
    MAX_LISTED,
    ConnectedOwner,
    GrantsAnswered,
    GrantsAsked,
    GrantsSummary,
)
from gatehouse_contract.frames import (
    Unreadable,
    read_operator_frame,
    read_replica_message,
)

LINK = "team." + "a" * 43


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ({"action": "begin", "redirectUri": "https://p/cb"}, "flow"),
        ({"action": "begin", "flow": LINK}, "redirect_uri"),
        ({"action": "finish", "flow": LINK, "redirectUri": "https://p/cb"}, "code"),
        ({"action": "drop"}, "connection"),
        ({"action": "link"}, "connection"),
    ],
)
def test_a_step_without_what_it_needs_is_unreadable(fields: dict[str, str], missing: str) -> None:
    payload = json.dumps({"type": "grants", "id": "x", **fields}).encode()
    with pytest.raises(Unreadable, match=f"needs {missing}"):
        read_operator_frame(payload)


def test_a_flow_id_is_a_namespace_and_at_least_256_bits_bounded() -> None:
    too_long = "team." + "a" * (MAX_ENCRYPTED_CHARS + 1)
    for flow in ("team." + "a" * 42, "Team." + "a" * 43, "team/" + "a" * 43, too_long):
        with pytest.raises(ValidationError):
            GrantsAsked(id="x", action="begin", flow=flow, redirect_uri="https://p/cb")
    with pytest.raises(ValidationError):
        GrantsAsked(id="x", action="drop", connection="team/sheets", owner="not-a-digest")


def test_steps_travel_both_ways_as_typed() -> None:
    asked = GrantsAsked(id="x", action="finish", flow=LINK, code="c", redirect_uri="https://p/cb")
    assert read_operator_frame(asked.model_dump_json().encode()) == asked
    summary = GrantsSummary(
        connected=2,
        listed=(ConnectedOwner(owner="0" * 32, label="ada@example.com", connected_at=1.0),),
    )
    answered = GrantsAnswered(id="x", summary=summary)
    assert read_replica_message(answered.model_dump_json()) == answered


def test_a_replicas_listing_is_bounded() -> None:
    owner = ConnectedOwner(owner="0" * 32, connected_at=1.0)
    with pytest.raises(ValidationError):
        GrantsSummary(listed=(owner,) * (MAX_LISTED + 1))
    with pytest.raises(ValidationError):
        ConnectedOwner(owner="0" * 32, label="x" * 321, connected_at=1.0)
