"""The link policy as plain logic: who may add which link."""

from __future__ import annotations

import asyncio

import pytest

from gatehouse_operator import link_policy


def _may(*granted: str) -> link_policy.Permission:
    async def may(verb: str, name: str) -> bool:
        return verb in granted

    return may


POLICIES: dict[str, str | None] = {"open": "Builders", "locked": "AdminsOnly", "future": None}


@pytest.mark.parametrize(
    ("granted", "connection", "allowed"),
    [
        (("link",), "open", True),
        (("link",), "locked", False),
        (("link",), "future", False),
        ((), "open", False),
        (("update",), "open", True),
        (("update",), "locked", True),
        (("update",), "future", True),
    ],
)
def test_who_may_link_what(granted: tuple[str, ...], connection: str, allowed: bool) -> None:
    problems = asyncio.run(link_policy.refusals([connection], POLICIES, _may(*granted)))
    assert (problems == []) is allowed
    if not allowed:
        assert repr(connection) in problems[0]


def test_only_added_connections_are_checked() -> None:
    old = {"connections": [{"alias": "a", "connection": "locked"}]}
    new = {
        "connections": [
            {"alias": "a", "connection": "locked"},
            {"alias": "b", "connection": "locked"},
            {"alias": "c", "connection": "open"},
        ]
    }
    assert link_policy.added_links(old, new) == ["open"]
    assert link_policy.added_links(None, new) == ["locked", "open"]


def test_the_refusal_names_the_connection_and_the_policy() -> None:
    problems = asyncio.run(link_policy.refusals(["locked"], POLICIES, _may("link")))
    assert problems == [
        "ExternalConnection 'locked' has linkPolicy AdminsOnly: only admins (who may update "
        "ExternalConnections) can link it"
    ]
