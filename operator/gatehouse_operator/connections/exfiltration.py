"""The warning given wherever a connection is created or linked: what a link lets apps do.

A connection is a way out of the project: an app linked to it can send whatever data it can
query to the connection's origin (in a path, a query, a header or a body), and where write
methods are allowed it can also create, change or delete data there with the connection's
credential. The reference product warns at both moments, more strongly with write methods; the
words live here once, for the page, the service API and the link admission (kubectl's
``Warning:``).
"""

from __future__ import annotations

from collections.abc import Iterable

from gatehouse_operator.api.connection import HttpMethod
from gatehouse_operator.api.stored import StoredConnection

WRITE_METHODS: tuple[HttpMethod, ...] = ("POST", "PUT", "PATCH", "DELETE")
# Where the connection is not chosen yet (a form that links any of several).
ANY_CONNECTION = (
    "Apps linked to a connection can send any data they can query to its origin; where it "
    "allows POST, PUT, PATCH or DELETE they can also create, change or delete data there, with "
    "the connection's credential."
)


def write_methods(methods: Iterable[str]) -> list[str]:
    """The write methods among ``methods``, in the schema's order."""
    allowed = set(methods)
    return [method for method in WRITE_METHODS if method in allowed]


def link_warning(origin: str, methods: Iterable[str]) -> str:
    text = f"Apps linked to this connection can send any data they can query to {origin}."
    writes = write_methods(methods)
    if writes:
        text += (
            f" It allows {', '.join(writes)}: linked apps can also create, change or delete "
            "data there, with this connection's credential."
        )
    return text


def connection_warning(connection: StoredConnection) -> str:
    """link_warning for a stored connection: its origin as the operator pinned it (the baseURL
    until it has), and its methods."""
    return link_warning(connection.origin, connection.spec.allowed_methods)
