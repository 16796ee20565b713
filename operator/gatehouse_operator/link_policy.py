"""Who may link which connection to a DataApp or ChartType.

The seed's rule: admins (holders of ``manage:ExternalConnection``) link any connection; builders
link only connections whose ``linkPolicy`` is ``Builders``. In Kubernetes terms:

- ``manage:ExternalConnection`` is the right to ``update`` the ExternalConnection;
- linking a ``Builders`` connection takes the custom verb ``link`` on it, which the builder role
  (and, through aggregation, edit and admin) holds.

Only links an update *adds* are checked. Existing links stay when an admin tightens a connection
to ``AdminsOnly``: they were allowed when made, and cutting them would break running apps without
a word. To revoke, an admin removes the link or deletes the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

MANAGE_VERB = "update"
LINK_VERB = "link"

# may(verb, connection name) -> whether the requesting user may
Permission = Callable[[str, str], Awaitable[bool]]


def linked_connections(spec: Mapping[str, Any] | None) -> set[str]:
    return {
        str(link.get("connection"))
        for link in (spec or {}).get("connections") or []
        if isinstance(link, Mapping) and link.get("connection")
    }


def added_links(old_spec: Mapping[str, Any] | None, new_spec: Mapping[str, Any]) -> list[str]:
    return sorted(linked_connections(new_spec) - linked_connections(old_spec))


async def refusals(
    added: Sequence[str], policies: Mapping[str, str | None], may: Permission
) -> list[str]:
    """Why each added link is refused (empty when all are allowed).

    ``policies`` maps each connection to its linkPolicy, or None when it does not exist: only
    someone who could create it may link a connection before it exists, so a builder cannot
    reserve a name that an admin later makes AdminsOnly.
    """
    problems = []
    for name in added:
        policy = policies.get(name)
        if policy == "Builders" and await may(LINK_VERB, name):
            continue
        if await may(MANAGE_VERB, name):
            continue
        if policy is None:
            problems.append(
                f"ExternalConnection {name!r} does not exist; only users who may manage "
                "connections can link one before it is created"
            )
        elif policy == "AdminsOnly":
            problems.append(
                f"ExternalConnection {name!r} has linkPolicy AdminsOnly: only admins (who may "
                "update ExternalConnections) can link it"
            )
        else:
            problems.append(
                f"linking ExternalConnection {name!r} (linkPolicy Builders) needs the 'link' "
                "verb on externalconnections, which the gatehouse-builder role grants"
            )
    return problems
