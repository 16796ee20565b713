"""Whole numbers someone else wrote (a query parameter, a form field, a header, an environment
variable), read by the grammar HTTP and forms use: ASCII digits and nothing else.

``str.isdigit`` also says yes to ``²`` and ``①``, which ``int`` then refuses (a 500 where a 400
was owed), and ``int`` takes ``٣``, ``+5``, `` 5`` and ``5_0``, which no such grammar allows.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")
# Past this many digits a number is past every bound a caller checks it against: not converted,
# so a 5,000-digit value costs no int() (which refuses those itself).
_MOST_DIGITS = 18


def whole_number(raw: str) -> int | None:
    """``raw`` as a whole number when it is ASCII digits alone, else None."""
    if not _DIGITS.fullmatch(raw):
        return None
    digits = raw.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MOST_DIGITS else 10**_MOST_DIGITS
