"""The proxy's refusal codes as condition reasons: one typed reason per code, spelled as every
release before this one spelled it, and a code this release does not know still named."""

from __future__ import annotations

from gatehouse_contract.connection_tests import Problem
from gatehouse_contract.errors import (
    REFUSAL_CODES,
    REFUSAL_REASONS,
    RefusalReason,
    refusal_reason,
    unknown_refusal_reason,
)


def test_every_refusal_code_has_one_reason_and_every_reason_a_code() -> None:
    assert set(REFUSAL_REASONS) == REFUSAL_CODES
    assert sorted(REFUSAL_REASONS.values()) == sorted(RefusalReason)
    assert all(isinstance(refusal_reason(code), RefusalReason) for code in REFUSAL_CODES)


def test_a_reason_is_its_code_in_camel_case_as_conditions_have_always_carried_it() -> None:
    # The spelling conditions, alerts and scripts already match: each snake_case word capitalised.
    for code in REFUSAL_CODES:
        assert refusal_reason(code) == "".join(word.capitalize() for word in code.split("_"))
    assert refusal_reason("path_not_allowed") == "PathNotAllowed"
    assert refusal_reason("content_type_not_allowed") == "ContentTypeNotAllowed"
    assert refusal_reason("test_timed_out") == "TestTimedOut"


def test_a_code_this_release_does_not_know_is_named_the_same_way() -> None:
    # A newer replica's, during a rolling upgrade: the test still fails with a reason.
    assert unknown_refusal_reason("quota_exhausted") == "QuotaExhausted"
    assert Problem(code="quota_exhausted", message="").refusal is None


def test_a_problem_reads_its_code_as_a_refusal_when_it_is_one() -> None:
    assert Problem(code="path_not_allowed", message="").refusal == "path_not_allowed"
    # A failure's own code, and an older replica's test_expired, are not refusals it knows.
    assert Problem(code="internal", message="").refusal is None
    assert Problem(code="test_expired", message="").refusal is None
