"""Reading an upstream's ``Retry-After`` by RFC 9110's grammar (10.2.3), and nothing else.

``Retry-After = HTTP-date / delay-seconds``: ``delay-seconds = 1*DIGIT`` (ASCII digits only;
not ``+5``, ``5.0``, ``-5`` or Unicode digits such as ``²`` or ``٣``, which ``str.isdigit`` and
``int`` accept), or an HTTP-date (5.6.7): the IMF-fixdate, and the two obsolete forms a recipient
must accept (rfc850-date and asctime-date), case-sensitive as the RFC has them. Whatever else a
vendor writes says nothing: no pause, and never an error for the app. What is read is bounded by
``MAX_PAUSE_SECONDS`` here, the one place it is read: the pause, the replica's Throttled frame
and the operator's Event all start from this value.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence

from gatehouse_contract.frames import MAX_PAUSE_SECONDS

_DELAY_SECONDS = re.compile(r"[0-9]+")
_DAY_NAME = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_DAY_NAME_L = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_MONTH = r"(?P<month>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME_OF_DAY = r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# Sun, 06 Nov 1994 08:49:37 GMT
_IMF_FIXDATE = re.compile(
    rf"{_DAY_NAME}, (?P<day>[0-9]{{2}}) {_MONTH} (?P<year>[0-9]{{4}}) {_TIME_OF_DAY} GMT"
)
# Sunday, 06-Nov-94 08:49:37 GMT
_RFC850_DATE = re.compile(
    rf"{_DAY_NAME_L}, (?P<day>[0-9]{{2}})-{_MONTH}-(?P<year>[0-9]{{2}}) {_TIME_OF_DAY} GMT"
)
# Sun Nov  6 08:49:37 1994
_ASCTIME_DATE = re.compile(
    rf"{_DAY_NAME} {_MONTH} (?P<day>[0-9]{{2}}| [0-9]) {_TIME_OF_DAY} (?P<year>[0-9]{{4}})"
)
# The field's surrounding whitespace (OWS, RFC 9110 5.5) is not part of its value; any other
# space (a Unicode one, a vertical tab) is.
_OWS = " \t"


def requested_pause(values: Sequence[str], now: datetime.datetime | None = None) -> float:
    """The pause an answer's ``Retry-After`` field lines (``values``) ask for, in seconds: 0
    unless there is exactly one (the field has no list form: two lines are no valid value)."""
    return retry_after_seconds(values[0], now) if len(values) == 1 else 0.0


def retry_after_seconds(value: str, now: datetime.datetime | None = None) -> float:
    """How long one ``Retry-After`` value asks to wait, from 0 to ``MAX_PAUSE_SECONDS``: 0 when
    it says nothing usable (empty, outside the grammar, a date that does not exist or has
    passed)."""
    value = value.strip(_OWS)
    if _DELAY_SECONDS.fullmatch(value):
        digits = value.lstrip("0")
        # Past the cap's own length it is past the cap: not converted (a 5,000-digit value
        # would be refused by int() itself).
        if len(digits) > len(str(MAX_PAUSE_SECONDS)):
            return float(MAX_PAUSE_SECONDS)
        return float(min(int(digits or "0"), MAX_PAUSE_SECONDS))
    now = now or datetime.datetime.now(datetime.UTC)
    when = _http_date(value, now)
    if when is None:
        return 0.0
    return min(max((when - now).total_seconds(), 0.0), float(MAX_PAUSE_SECONDS))


def _http_date(value: str, now: datetime.datetime) -> datetime.datetime | None:
    """The instant an HTTP-date names (always UTC: "GMT"), or None for none."""
    found = _IMF_FIXDATE.fullmatch(value) or _ASCTIME_DATE.fullmatch(value)
    if found is not None:
        year = int(found["year"])
    else:
        found = _RFC850_DATE.fullmatch(value)
        if found is None:
            return None
        year = _two_digit_year(int(found["year"]), now.year)
    try:
        return datetime.datetime(
            year,
            _MONTHS.index(found["month"]) + 1,
            int(found["day"]),
            int(found["hour"]),
            int(found["minute"]),
            # 60: a leap second (time-of-day allows it); a datetime has none.
            min(int(found["second"]), 59),
            tzinfo=datetime.UTC,
        )
    except ValueError:  # 31 Feb, hour 24, year 0000: no such instant
        return None


def _two_digit_year(two_digits: int, this_year: int) -> int:
    """rfc850-date's year (RFC 9110 5.6.7): one that would be more than 50 years in the future
    is the most recent past year with the same last two digits."""
    year = this_year - this_year % 100 + two_digits
    if year > this_year + 50:
        return year - 100
    if year <= this_year - 50:
        return year + 100
    return year
