"""An upstream's Retry-After, read by RFC 9110's grammar only (10.2.3, 5.6.7) and bounded where
it is read (what the app gets for each, through a real proxy, is in
tests/proxy/passage/test_vendor_pause.py and tests/e2e/test_vendor_pause.py)."""

from __future__ import annotations

import datetime

import pytest

from gatehouse_contract.frames import MAX_PAUSE_SECONDS
from gatehouse_proxy.http.retry_after import requested_pause, retry_after_seconds

NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0),
        ("5", 5),
        ("120", 120),
        ("0000000000000000000000000005", 5),  # 1*DIGIT: leading zeros are digits
        (" 5", 5),  # the field's OWS (RFC 9110 5.5) is not its value
        ("5\t", 5),
        ("3600", MAX_PAUSE_SECONDS),
        ("3601", MAX_PAUSE_SECONDS),
        ("999999999999", MAX_PAUSE_SECONDS),  # 12 digits: R4-1
        ("9" * 5000, MAX_PAUSE_SECONDS),  # past int()'s own limit on digits
    ],
)
def test_delay_seconds_are_ascii_digits_capped(value: str, seconds: float) -> None:
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "²",  # superscript two: isdigit() is true, int() refuses it
        "①",  # circled one: the same
        "5²",
        "٣",  # Arabic-Indic three: int() reads it as 3, the grammar does not
        "\uff11\uff10",  # fullwidth digits
        "+5",
        "-5",
        "5.0",
        "5e3",
        "0x10",
        "5 5",
        "1_000",
        "\u00a05",  # a Unicode space is not OWS
        "\x0b5",
        "",
        "   ",
        "soon",
        "NaN",
        "Infinity",
    ],
)
def test_anything_else_asks_no_pause(value: str) -> None:
    assert retry_after_seconds(value, NOW) == 0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        # IMF-fixdate
        ("Sat, 28 Nov 2026 12:00:30 GMT", 30),
        ("Sat, 28 Nov 2026 12:30:00 GMT", 1800),
        ("Sat, 28 Nov 2026 11:59:00 GMT", 0),  # passed
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0),
        ("Sat, 28 Nov 2026 14:00:00 GMT", MAX_PAUSE_SECONDS),
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_PAUSE_SECONDS),
        ("Sat, 28 Nov 2026 12:00:60 GMT", 59),  # a leap second
        # rfc850-date (obsolete, which recipients must accept): a two-digit year more than 50
        # years ahead is the last such year in the past
        ("Saturday, 28-Nov-26 12:01:00 GMT", 60),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 0),  # 1994, not 2094
        ("Sunday, 28-Nov-77 12:00:00 GMT", 0),  # 1977
        ("Sunday, 28-Nov-76 12:00:00 GMT", MAX_PAUSE_SECONDS),  # 2076
        # asctime-date (obsolete, likewise)
        ("Sat Nov 28 12:00:45 2026", 45),
        ("Sat Nov  28 12:00:45 2026", 0),  # one space too many
        ("Sun Nov  6 08:49:37 1994", 0),
        ("Tue Dec  1 12:00:00 2026", MAX_PAUSE_SECONDS),
    ],
)
def test_http_dates_in_their_three_forms(value: str, seconds: float) -> None:
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "Sat, 28 Nov 20260 12:00:30 GMT",  # five-digit year
        "Fri, 31 Dec 99999999999999999999 23:59:59 GMT",  # what datetime cannot hold
        "Fri, 99999999999999999999 Dec 2026 23:59:59 GMT",
        "Sat, 28 Nov 2026 12:00:30 UTC",  # GMT only
        "Sat, 28 Nov 2026 12:00:30 +0000",
        "Sat, 28 Nov 2026 12:00:30 -2359",
        "sat, 28 nov 2026 12:00:30 gmt",  # case-sensitive
        "Sat, 28 Nov 2026 12:00:30",
        "Sat,28 Nov 2026 12:00:30 GMT",
        "Sat, 8 Nov 2026 12:00:30 GMT",  # day is 2DIGIT
        "Sat, 31 Feb 2026 12:00:30 GMT",  # no such day
        "Sat, 28 Nov 2026 24:00:00 GMT",
        "Sat, 28 Nov 2026 12:61:00 GMT",
        "Sat, 28 Nov 0000 12:00:00 GMT",
        "Sat, ²8 Nov 2026 12:00:30 GMT",
        "Sat, 28 Nov \uff12\uff10\uff12\uff16 12:00:30 GMT",  # fullwidth digits
        "Sat, 28 Nov 2026 12:00:30 GMT, Sat, 28 Nov 2026 12:00:30 GMT",
        "28 Nov 2026 12:00:30 GMT",
        "Someday, 28-Nov-26 12:00:30 GMT",
        "2026-11-28T12:00:30Z",
    ],
)
def test_malformed_dates_ask_no_pause(value: str) -> None:
    assert retry_after_seconds(value, NOW) == 0


def test_without_a_time_given_it_reads_the_clock() -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=10)
    seconds = retry_after_seconds(later.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert 590 <= seconds <= 600


def test_one_field_line_or_none() -> None:
    """The field has no list form: two lines (which may disagree) say nothing."""
    assert requested_pause(["30"], NOW) == 30
    assert requested_pause([], NOW) == 0
    assert requested_pause(["30", "30"], NOW) == 0
    assert requested_pause(["30", "soon"], NOW) == 0
