"""Every condition reason has its text in one place, which the reasons page is generated from."""

from __future__ import annotations

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.troubleshooting import TROUBLESHOOTING


def test_every_reason_says_what_it_means_and_what_to_do() -> None:
    assert sorted(set(Reason) - set(TROUBLESHOOTING)) == []
    assert all(entry.on and entry.text for entry in TROUBLESHOOTING.values())
