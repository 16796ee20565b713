"""A connection's cache purge: the annotation an admin (or ``gatehouse cache purge``) sets to the
time of the purge. Its value is the cache's epoch on the route, part of every entry's key, so the
entries cached before it are never read again (they expire in the store on their own)."""

from __future__ import annotations

import datetime
import re

CACHE_PURGED_AT = "gatehouse.dev/cache-purged-at"
# CachePolicy.epoch's bound on the wire (gatehouse_contract.routes).
MAX_PURGE_CHARS = 64
# RFC 3339's date-time (section 5.6): a full date, "T", a full time with its offset.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def purge_problem(value: str) -> str:
    """What is wrong with the annotation's value ("" when it is an RFC 3339 time)."""
    rule = (
        f"metadata.annotations[{CACHE_PURGED_AT}] must be an RFC 3339 time of at most "
        f"{MAX_PURGE_CHARS} characters (2026-11-29T09:00:00Z), as gatehouse cache purge sets it"
    )
    if len(value) > MAX_PURGE_CHARS or not _RFC3339.fullmatch(value):
        return rule
    try:
        # The digits in range: no 13th month, no 25th hour (fromisoformat reads up to 6 digits
        # of a second's fraction, so the fraction is left out).
        datetime.datetime.fromisoformat(re.sub(r"\.\d+", "", value.upper()))
    except ValueError:
        return rule
    return ""


def purge_time(now: datetime.datetime) -> str:
    """The annotation's value for a purge at ``now``: to the microsecond, so that two purges
    within a second are two epochs."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
