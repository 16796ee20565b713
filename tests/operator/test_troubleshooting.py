"""Every reason a condition can give for not working is in the README's troubleshooting table."""

from __future__ import annotations

from pathlib import Path

from gatehouse_operator.api.conditions import Reason

README = Path(__file__).resolve().parents[2] / "README.md"
# The reasons of things that work: nothing to troubleshoot.
WORKING = {
    Reason.ALL_LINKS_READY,
    Reason.COMPILED,
    Reason.CREDENTIAL_ENCRYPTED,
    Reason.NO_CREDENTIAL_NEEDED,
    Reason.PASSED,
    Reason.ROUTED,
    Reason.SAVED,
    Reason.SECRET_CREATED,
    Reason.VALID,
    Reason.WATCHED,
}


def test_every_reason_for_not_working_says_what_to_do() -> None:
    text = README.read_text()
    section = text[text.index("## Troubleshooting") :]
    section = section[: section.index("\n## ")]
    missing = sorted(reason for reason in set(Reason) - WORKING if f"`{reason}`" not in section)
    assert missing == []
