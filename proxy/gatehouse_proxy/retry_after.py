"""Reading an upstream's ``Retry-After`` (RFC 9110 10.2.3): seconds, or an HTTP date."""

from __future__ import annotations

import datetime
import email.utils


def retry_after_seconds(value: str, now: datetime.datetime | None = None) -> float:
    """How long the upstream asks to wait; 0 when the value says nothing usable (absent,
    malformed, in the past)."""
    value = value.strip()
    if not value:
        return 0.0
    if value.isdigit():
        return float(int(value[:12]))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    now = now or datetime.datetime.now(datetime.UTC)
    return max((when - now).total_seconds(), 0.0)
