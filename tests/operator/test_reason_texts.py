"""Every condition reason has its text in one place, which the reasons page is generated from:
the operator's own, and the proxy's refusals."""

from __future__ import annotations

from gatehouse_contract.errors import REFUSAL_CODES, RefusalReason, refusal_reason
from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.troubleshooting import REFUSAL_TROUBLESHOOTING, TROUBLESHOOTING


def test_every_reason_says_what_it_means_and_what_to_do() -> None:
    assert sorted(set(Reason) - set(TROUBLESHOOTING)) == []
    assert all(entry.on and entry.text for entry in TROUBLESHOOTING.values())


def test_every_refusal_reason_says_what_it_means_and_what_to_do() -> None:
    assert sorted(set(RefusalReason) - set(REFUSAL_TROUBLESHOOTING)) == []
    assert all(REFUSAL_TROUBLESHOOTING[refusal_reason(code)] for code in REFUSAL_CODES)
