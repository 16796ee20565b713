"""Every reason a condition can give for not working is in the docs' condition reasons, under
"Not working", and every refusal of the proxy under "Refused by the proxy", with its code."""

from __future__ import annotations

from pathlib import Path

from gatehouse_contract.errors import REFUSAL_REASONS
from gatehouse_operator.api.conditions import Reason

REASONS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "reasons.md"
# The reasons of things that work: nothing to troubleshoot.
WORKING = {
    Reason.ALL_LINKS_READY,
    Reason.CLIENT_CERTIFICATE_CURRENT,
    Reason.COMPILED,
    Reason.CREDENTIAL_ENCRYPTED,
    Reason.NO_CREDENTIAL_NEEDED,
    Reason.PASSED,
    Reason.PURGED,
    Reason.ROLE_BY_WEB_IDENTITY,
    Reason.ROUTED,
    Reason.SAVED,
    Reason.SECRET_CREATED,
    Reason.TLS_CONFIGURED,
    Reason.VALID,
    Reason.WATCHED,
}


def test_every_reason_for_not_working_says_what_to_do() -> None:
    text = REASONS.read_text()
    section = text[text.index("## Not working") :]
    section = section[: section.index("\n## ")]
    missing = sorted(reason for reason in set(Reason) - WORKING if f"`{reason}`" not in section)
    assert missing == []


def test_every_refusal_is_on_the_page_with_its_code() -> None:
    text = REASONS.read_text()
    section = text[text.index("## Refused by the proxy") :]
    section = section[: section.index("\n## ")]
    missing = sorted(
        code
        for code, reason in REFUSAL_REASONS.items()
        if f"| `{reason}` | `{code}` |" not in section
    )
    assert missing == []
