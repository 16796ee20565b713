"""The link policy as plain logic: who may see, link and test which connection."""

from __future__ import annotations

import asyncio

import pytest

from gatehouse_operator.api import link_policy


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
def test_who_may_see_and_link_what(
    granted: tuple[str, ...], connection: str, allowed: bool
) -> None:
    may = _may(*granted)
    assert asyncio.run(link_policy.may_see(may, connection, POLICIES[connection])) is allowed
    refused = asyncio.run(link_policy.refused([connection], POLICIES, may))
    assert refused == ([] if allowed else [connection])


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


def test_the_refusal_reads_the_same_for_a_missing_and_a_locked_connection() -> None:
    """A builder's refusals (which kubectl's server-side dry run shows) tell nothing of which
    connections exist or how they are set: every refused name gets the same words."""
    for granted in (("link",), ()):
        refused = asyncio.run(
            link_policy.refused(["future", "locked", "open"], POLICIES, _may(*granted))
        )
        words = {link_policy.refusal("ana", [name]).replace(repr(name), "X") for name in refused}
        assert len(words) == 1
    message = link_policy.refusal("ana", ["locked", "future"])
    assert message.startswith(
        "spec.connections: ana may not link ExternalConnection 'locked', 'future': no "
        "connection of that name they may link is in this namespace"
    )
    assert "AdminsOnly" not in message
