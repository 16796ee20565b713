"""How much of the routing table one connection, one app and one namespace may take, and takes.

Every replica holds the whole table, so these bounds are what keeps one namespace's resources
from making delivery slow or memory-hungry for everyone. A resource over a bound is left out of
the table with a condition that names the field to shrink; nothing else is affected.
"""

from __future__ import annotations

from gatehouse_contract.routes import AppRoute, ConnectionRoute, EntryKind
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.status import Verdict

MAX_CONNECTION_BYTES = 32 * 1024
MAX_APP_BYTES = 32 * 1024
MAX_NAMESPACE_BYTES = 4 * 1024 * 1024


def entry_size(route: ConnectionRoute | AppRoute) -> int:
    """The bytes a route takes in the table (its JSON, as the journal serialises it)."""
    return len(route.model_dump_json())


class NamespaceBudget:
    """The bytes each route takes, and their sum per namespace."""

    def __init__(self) -> None:
        self._sizes: dict[tuple[EntryKind, str], int] = {}
        self._namespace_sizes: dict[str, int] = {}

    def total_with(self, kind: EntryKind, key: str, size: int) -> int:
        """The bytes ``key``'s namespace would take if its route took ``size``."""
        namespace = key.split("/", 1)[0]
        return self._namespace_sizes.get(namespace, 0) - self._sizes.get((kind, key), 0) + size

    def resize(self, kind: EntryKind, key: str, size: int) -> None:
        """Records that ``key``'s route now takes ``size`` bytes (0: it is gone)."""
        namespace = key.split("/", 1)[0]
        total = self.total_with(kind, key, size)
        if size:
            self._sizes[kind, key] = size
        else:
            self._sizes.pop((kind, key), None)
        if total:
            self._namespace_sizes[namespace] = total
        else:
            self._namespace_sizes.pop(namespace, None)


def tls_size(route: ConnectionRoute | AppRoute) -> int:
    """The bytes a connection's own TLS takes (its CA bundle, its client certificate): bounded
    by their own rules (the CRD's), and not by the entry's, which they would not fit beside the
    rest; the namespace's bound counts them."""
    tls = route.tls if isinstance(route, ConnectionRoute) else None
    return 0 if tls is None else len(tls.model_dump_json())


def _largest_part(route: ConnectionRoute | AppRoute, *, tls: bool = True) -> tuple[str, int]:
    """The field that makes most of ``route``'s bytes (``tls=False``: of those its entry's bound
    counts)."""
    if isinstance(route, AppRoute):
        return "spec.connections", sum(len(a) + len(c) + 6 for a, c in route.links.items())
    encrypted = route.credential.encrypted
    own = route.tls if tls else None
    certificate = own.client_certificate if own is not None else None
    parts = {
        "spec.allowedPaths": sum(len(path) + 3 for path in route.allowed_paths),
        "spec.auth.googleServiceAccount.scopes": sum(len(s) + 3 for s in route.credential.scopes),
        "the Secret's value (spec.auth.secretRef)": len(encrypted.ciphertext) if encrypted else 0,
        "spec.tls.caBundle": len(own.ca_bundle) if own is not None else 0,
        "spec.tls.clientCertificate": len(certificate.ciphertext) if certificate else 0,
    }
    field = max(parts, key=lambda name: parts[name])
    return field, parts[field]


def check(
    route: ConnectionRoute | AppRoute, size: int, namespace_total: int, reason_kind: ConditionType
) -> Verdict | None:
    """A refusal when ``route`` (``size`` bytes) is over its bound, or would make its
    namespace's total (``namespace_total`` bytes with it) go over the namespace's."""
    limit = MAX_APP_BYTES if isinstance(route, AppRoute) else MAX_CONNECTION_BYTES
    own_tls = tls_size(route)
    if size - own_tls > limit:
        field, part = _largest_part(route, tls=False)
        aside = " (its spec.tls aside)" if own_tls else ""
        return Verdict(
            reason_kind,
            "False",
            Reason.TABLE_ENTRY_TOO_LARGE,
            f"this {'app' if isinstance(route, AppRoute) else 'connection'} would take "
            f"{size - own_tls:,} bytes of the routing table{aside}, over the {limit:,} allowed; "
            f"{field} makes {part:,} of them",
        )
    if namespace_total > MAX_NAMESPACE_BYTES:
        field, part = _largest_part(route)
        return Verdict(
            reason_kind,
            "False",
            Reason.NAMESPACE_TABLE_FULL,
            f"the namespace's connections and apps would take {namespace_total:,} bytes of the "
            f"routing table with this one, over the {MAX_NAMESPACE_BYTES:,} allowed per "
            f"namespace; this one takes {size:,} ({field}: {part:,})",
        )
    return None
