"""What a vendor's "wait" pauses: the whole connection, or only the endpoint it came on.

An upstream's 429 or 503 with ``Retry-After`` pauses calls for the fleet (see
:meth:`gatehouse_proxy.limits.quotas.Quotas.pause`). Vendors limit endpoints as well as credentials
(a search API, a report export), and one app's call to a limited endpoint must not stop every app
on the connection: so a pause covers the endpoint
(:func:`gatehouse_proxy.rules.matcher.endpoint_of`) unless the connection says the answer is the
credential's limit (``limits.credentialLimit``: its statuses, path prefixes, a response header that
marks it).
"""

from __future__ import annotations

from collections.abc import Mapping

from gatehouse_contract.routes import CredentialLimit
from gatehouse_proxy.rules.matcher import UpstreamPath, allowed_by_prefixes

# What asks to wait: the only statuses a Retry-After pauses on.
PAUSING_STATUSES = frozenset({429, 503})


def is_credential_limit(
    limit: CredentialLimit | None, path: UpstreamPath, status: int, headers: Mapping[str, str]
) -> bool:
    """Whether an answer that asks to wait is the credential's limit, as the connection says
    (``headers``: the answer's, read case-insensitively)."""
    if limit is None or status not in limit.statuses:
        return False
    if not limit.path_prefixes and not limit.header:
        return True
    if limit.path_prefixes and allowed_by_prefixes(path, limit.path_prefixes):
        return True
    if not limit.header:
        return False
    value = headers.get(limit.header)
    if value is None:
        return False
    return not limit.header_value or value.strip().lower() == limit.header_value
