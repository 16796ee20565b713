"""The root of the operator's own failures: every exception class the operator defines derives
from ``GatehouseError`` (tests/operator/test_boundaries.py holds it), so an edge can tell the
operator's words from a library's.

Each is turned into what its caller sees at one edge: a kopf handler's into a condition or
kopf's TemporaryError/PermanentError (``runtime``, the controllers), the service API's and the
page's into an HTTP answer (``service_api.app``, ``web.guards``), the CLI's into a one-line
message (``cli``). A class that is also a ValueError, LookupError or ConnectionError keeps that
base beside this one, for the callers that catch it as such.
"""

from __future__ import annotations


class GatehouseError(Exception):
    """A failure the operator names itself."""
