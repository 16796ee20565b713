"""Whole numbers others write are ASCII digits alone: what str.isdigit lets through but int
refuses (a 500 where a 400 was owed) is no number."""

from __future__ import annotations

import pytest

from gatehouse_contract.numerals import whole_number


@pytest.mark.parametrize(("raw", "read"), [("0", 0), ("7", 7), ("007", 7), ("3600", 3600)])
def test_ascii_digits_are_a_whole_number(raw: str, read: int) -> None:
    assert whole_number(raw) == read


@pytest.mark.parametrize(
    "raw", ["", "²", "①", "٣", "\uff15", "+5", "-5", " 5", "5 ", "5_0", "5.0", "0x10", "1e3"]
)
def test_anything_else_is_none(raw: str) -> None:
    assert whole_number(raw) is None


def test_a_number_past_every_bound_costs_no_conversion() -> None:
    assert whole_number("9" * 5000) == 10**18
