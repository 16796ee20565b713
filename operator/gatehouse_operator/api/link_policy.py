"""Who may see which connection, and who may link it to a DataApp or ChartType: one rule.

The seed's rule: admins (holders of ``manage:ExternalConnection``) link any connection; builders
link only connections whose ``linkPolicy`` is ``Builders``. In Kubernetes terms:

- ``manage:ExternalConnection`` is the right to ``update`` the ExternalConnection;
- linking a ``Builders`` connection takes the custom verb ``link`` on it, which the builder role
  (and, through aggregation, edit and admin) holds.

Seeing a connection (its details in the service API and on the page, testing it, its part of an
app's build hand-off) is the same right as linking it: what a caller could link, they may see.
Everyone who asks (the service API, the page, the hand-off, admission) asks ``may_see``; a
connection the caller may not see answers as a missing one does.

Only links an update *adds* are checked. Existing links stay when an admin tightens a connection
to ``AdminsOnly``: they were allowed when made, and cutting them would break running apps without
a word. To revoke, an admin removes the link or deletes the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from gatehouse_operator.api.stored import StoredConnection

MANAGE_VERB = "update"
LINK_VERB = "link"

# may(verb, connection name) -> whether the requesting user may
Permission = Callable[[str, str], Awaitable[bool]]


def linked_connections(spec: Mapping[str, object] | None) -> set[str]:
    """The connections a spec as sent to admission links (not yet checked against its schema,
    so anything that is not a list of links links nothing)."""
    links = spec.get("connections") if spec else None
    if not isinstance(links, list):
        return set()
    return {
        str(link.get("connection"))
        for link in links
        if isinstance(link, Mapping) and link.get("connection")
    }


def added_links(old_spec: Mapping[str, object] | None, new_spec: Mapping[str, object]) -> list[str]:
    return sorted(linked_connections(new_spec) - linked_connections(old_spec))


def policy_of(connection: StoredConnection | None) -> str | None:
    """A connection's linkPolicy as read from the API server; None when it does not exist."""
    return connection.spec.link_policy if connection else None


async def may_see_connection(
    may: Permission, name: str, connection: StoredConnection | None
) -> bool:
    """The one visibility rule, for a connection as read (None when missing): whether the
    requester may see, test and link it. A missing connection is seen by no one, so that "not
    there" and "not yours to see" answer alike."""
    return connection is not None and await may_see(may, name, policy_of(connection))


async def may_see(may: Permission, name: str, policy: str | None) -> bool:
    """Whether the requester may see (and link, and test) connection ``name``: managers
    (``update``) any connection, even one not made yet; others one they could link (``link`` on
    it, and its linkPolicy is Builders). ``policy`` is None when the connection does not exist."""
    if await may(MANAGE_VERB, name):
        return True
    return policy == "Builders" and await may(LINK_VERB, name)


async def refused(
    added: Sequence[str], policies: Mapping[str, str | None], may: Permission
) -> list[str]:
    """The added links the requester may not make (empty when all are allowed).

    ``policies`` maps each connection to its linkPolicy, or None when it does not exist: only
    someone who could create it may link a connection before it exists, so a builder cannot
    reserve a name that an admin later makes AdminsOnly.
    """
    return [name for name in added if not await may_see(may, name, policies.get(name))]


def refusal(user: str, names: Sequence[str]) -> str:
    """Why the links to ``names`` are refused: one wording whether a connection is missing,
    AdminsOnly, or Builders and the requester lacks ``link``, so that the refusal (which kubectl's
    server-side dry run shows to anyone who may create apps) tells nothing of which."""
    listed = ", ".join(repr(name) for name in names)
    return (
        f"spec.connections: {user} may not link ExternalConnection {listed}: no connection of "
        "that name they may link is in this namespace (linking needs update on the connection, "
        "or the link verb on one whose linkPolicy is Builders; only those who may update "
        "connections link one before it exists)"
    )
