"""A fetch's trace id: the one of the W3C ``traceparent`` the app sent, else one made here.

The id ties a fetch's audit line and its inspector record to the app's own trace. It is carried
only: continuing the trace (a span of the proxy's own, ``traceparent`` to the upstream) is the
traces' work, which takes the id from here.
"""

from __future__ import annotations

import random
import re

# W3C Trace Context, level 1: version-traceid-parentid-flags, lower-case hex; a later version may
# add fields after a dash, version 00 may not.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(?:-|$)")
_ZERO_TRACE = "0" * 32
_ZERO_PARENT = "0" * 16


def sent_trace_id(traceparent: str | None) -> str:
    """The trace id of a valid ``traceparent``, or "" (none, or one the spec says to ignore)."""
    if not traceparent:
        return ""
    found = _TRACEPARENT.match(traceparent)
    if found is None:
        return ""
    version, trace, parent = found.groups()
    if version == "ff" or (version == "00" and len(traceparent) != 55):
        return ""
    if trace == _ZERO_TRACE or parent == _ZERO_PARENT:
        return ""
    return trace


def random_id(bits: int) -> int:
    """A trace's or span's id: never 0, which W3C reserves. Not a secret: the loop's own random
    is enough, and cheaper than the kernel's for every request."""
    return random.getrandbits(bits) or 1


def new_trace_id() -> str:
    return f"{random_id(128):032x}"


def trace_id(traceparent: str | None) -> str:
    return sent_trace_id(traceparent) or new_trace_id()
