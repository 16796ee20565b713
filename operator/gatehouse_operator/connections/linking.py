"""Linking a connection into an app from the connection's side, as the reference does it.

The alias is made from the connection's name, unique within the app; a retry of a link that is
already there changes nothing; an alias another connection holds is refused. Whether the link may
be made at all is the API server's to say (RBAC and the admission webhook, as for every link).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from gatehouse_operator.api.stored import StoredApp
from gatehouse_operator.connections.errors import Refused

ALIAS_CHARS = 64  # as DataApp's and ChartType's spec.connections[].alias
_NOT_IN_ALIAS = re.compile(r"[^a-z0-9_-]+")


def alias_for(connection: str, links: Sequence[Mapping[str, str]]) -> str:
    """The connection's name as an alias (``a-z 0-9 _ -``), with ``-2``, ``-3``... where the app
    uses it already."""
    base = _NOT_IN_ALIAS.sub("-", connection.lower()).strip("-")[:ALIAS_CHARS] or "connection"
    taken = {link.get("alias") for link in links}
    alias, number = base, 2
    while alias in taken:
        suffix = f"-{number}"
        alias = base[: ALIAS_CHARS - len(suffix)] + suffix
        number += 1
    return alias


@dataclass(frozen=True)
class LinkChange:
    alias: str
    # The app's spec.connections with the link; None when it is there already (a retry).
    links: list[dict[str, str]] | None


def link_change(
    links: Sequence[Mapping[str, str]], connection: str, alias: str, where: str
) -> LinkChange:
    """What linking ``connection`` into an app with ``links`` changes. Without an alias, one is
    made from the connection's name, unless the app links the connection already."""
    if not alias:
        held = next((link for link in links if link.get("connection") == connection), None)
        if held is not None:
            return LinkChange(held["alias"], None)
        alias = alias_for(connection, links)
    holder = next((link for link in links if link.get("alias") == alias), None)
    if holder is not None:
        if holder.get("connection") == connection:
            return LinkChange(alias, None)
        raise Refused(
            409,
            "alias_taken",
            f"alias: {alias!r} is held by connection {holder.get('connection')!r} in {where}; "
            "choose another",
        )
    copied = [dict(link) for link in links]
    return LinkChange(alias, [*copied, {"alias": alias, "connection": connection}])


@dataclass(frozen=True)
class AppLink:
    """One app in the connection's "Linked by" tabs: linked under ``alias``, or (empty) one the
    visitor may link it into."""

    name: str
    alias: str


def linked_by(connection: str, apps: Iterable[StoredApp], may_change: set[str]) -> list[AppLink]:
    """The apps of one kind linking ``connection``, then those the visitor may link it into
    (``may_change``: their names), each sorted by name."""
    linked, open_ = [], []
    for app in apps:
        name = app.name
        aliases = [link.alias for link in app.spec.connections if link.connection == connection]
        if aliases:
            linked.append(AppLink(name, ", ".join(sorted(aliases))))
        elif name in may_change:
            open_.append(AppLink(name, ""))
    return sorted(linked, key=attrgetter("name")) + sorted(open_, key=attrgetter("name"))
