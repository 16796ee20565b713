"""Every code a fetch can be refused with is in the docs' troubleshooting, with its status."""

from __future__ import annotations

from pathlib import Path

from gatehouse_contract.errors import REFUSAL_CODES, refusal_reason, unknown_refusal_reason
from gatehouse_proxy.errors import STATUS_BY_CODE

TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def test_every_refusal_code_is_documented_with_its_status() -> None:
    text = TROUBLESHOOTING.read_text()
    section = text[text.index("## Refusal codes") :]
    section = section[: section.index("\n## ")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    undocumented = [
        code
        for code, status in STATUS_BY_CODE.items()
        if not any(f"`{code}`" in row and str(status) in row for row in rows)
    ]
    assert undocumented == []


def test_every_refusal_code_in_the_contract_has_a_status() -> None:
    assert set(STATUS_BY_CODE) == REFUSAL_CODES


def test_a_refusal_code_names_its_condition_reason_in_camel_case() -> None:
    assert refusal_reason("path_not_allowed") == "PathNotAllowed"
    assert unknown_refusal_reason("test_expired") == "TestExpired"
