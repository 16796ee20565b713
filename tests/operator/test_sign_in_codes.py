"""One-time sign-in codes (keys.sign_in_codes): sealed to one key and one request, checked
against their digest and expiry, and a requester nobody may state for someone else.

The real exchange (the request deleted as read, so a code works once) and the webhook are in
tests/e2e/test_sign_in.py."""

from __future__ import annotations

import datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from gatehouse_operator.api.sign_in_request import (
    Requester,
    SignInRequestSpec,
    SignInRequestStatus,
)
from gatehouse_operator.cli.open_cli import page_link
from gatehouse_operator.keys import sign_in_codes

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ALICE = Requester(username="alice", uid="u-1", groups=["devs", "system:authenticated"])


def _issued(
    namespace: str = "shop", name: str = "open-1", uid: str = "uid-1"
) -> tuple[X25519PrivateKey, str, sign_in_codes.Issued]:
    private, public = sign_in_codes.new_key()
    issued = sign_in_codes.issue(public, namespace, name, uid)
    return private, public, issued


def _stored(
    public: str, issued: sign_in_codes.Issued, expires: datetime.datetime
) -> tuple[SignInRequestSpec, SignInRequestStatus]:
    spec = SignInRequestSpec(public_key=public, requester=ALICE)
    status = SignInRequestStatus(
        sealed_code=issued.sealed,
        code_digest=issued.code_digest,
        expires_at=expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    return spec, status


def test_only_the_key_that_asked_opens_the_code() -> None:
    private, _, issued = _issued()
    assert sign_in_codes.open_code(private, issued.sealed, "shop", "open-1", "uid-1") == issued.code
    # Another user reading the request's status holds another key: the code does not open.
    other, _ = sign_in_codes.new_key()
    with pytest.raises(sign_in_codes.CodeUnreadable):
        sign_in_codes.open_code(other, issued.sealed, "shop", "open-1", "uid-1")


@pytest.mark.parametrize(
    ("namespace", "name", "uid"),
    [("other", "open-1", "uid-1"), ("shop", "open-2", "uid-1"), ("shop", "open-1", "uid-2")],
)
def test_a_sealed_code_copied_onto_another_request_does_not_open(
    namespace: str, name: str, uid: str
) -> None:
    private, _, issued = _issued()
    with pytest.raises(sign_in_codes.CodeUnreadable):
        sign_in_codes.open_code(private, issued.sealed, namespace, name, uid)


def test_the_status_holds_nothing_that_signs_in() -> None:
    _, _, issued = _issued()
    secret = issued.code.rsplit(":", 1)[1]
    assert secret not in issued.sealed
    assert issued.code_digest == sign_in_codes.digest(secret) != secret


def test_a_code_signs_in_as_its_requester_until_it_expires() -> None:
    _, public, issued = _issued()
    parts = sign_in_codes.parse(issued.code)
    assert parts is not None
    assert (parts.namespace, parts.name) == ("shop", "open-1")
    spec, status = _stored(public, issued, NOW + datetime.timedelta(seconds=60))
    assert sign_in_codes.requester_of(parts, spec, status, NOW) == ALICE
    late = NOW + datetime.timedelta(seconds=60)
    with pytest.raises(sign_in_codes.Refusal, match="expired"):
        sign_in_codes.requester_of(parts, spec, status, late)


def test_a_code_for_another_users_request_is_refused() -> None:
    """Alice's secret with the name of Bob's request: the digest Bob's request keeps is not
    that of Alice's secret."""
    _, _, alices = _issued(name="alice-1")
    _, bobs_key, bobs = _issued(name="bob-1")
    secret = alices.code.rsplit(":", 1)[1]
    forged = sign_in_codes.parse(f"shop:bob-1:{secret}")
    assert forged is not None
    spec, status = _stored(bobs_key, bobs, NOW + datetime.timedelta(seconds=60))
    with pytest.raises(sign_in_codes.Refusal, match="does not match"):
        sign_in_codes.requester_of(forged, spec, status, NOW)


def test_a_request_not_answered_yet_signs_nobody_in() -> None:
    _, public, issued = _issued()
    parts = sign_in_codes.parse(issued.code)
    assert parts is not None
    spec = SignInRequestSpec(public_key=public, requester=ALICE)
    with pytest.raises(sign_in_codes.Refusal):
        sign_in_codes.requester_of(parts, spec, SignInRequestStatus(), NOW)


@pytest.mark.parametrize("text", ["", "shop:open-1", "a:b:c:d", "::x", "x" * 500])
def test_what_is_not_a_code_is_refused_before_any_lookup(text: str) -> None:
    assert sign_in_codes.parse(text) is None


def test_a_requester_must_be_the_creator_exactly() -> None:
    stated = ALICE.model_dump(by_alias=True)
    assert sign_in_codes.forged(stated, ALICE) == ""
    # Groups in another order are the same groups.
    reordered = {**stated, "groups": list(reversed(stated["groups"]))}
    assert sign_in_codes.forged(reordered, ALICE) == ""
    for field, value in [
        ("username", "admin"),
        ("uid", "u-2"),
        ("groups", ["system:masters"]),
        ("extra", {"scopes": ["all"]}),
    ]:
        problem = sign_in_codes.forged({**stated, field: value}, ALICE)
        assert problem.startswith(f"spec.requester: {field} must be")
    assert sign_in_codes.forged(None, ALICE) == "spec.requester: required"


def test_pending_requests_are_counted_per_user() -> None:
    assert sign_in_codes.pending_of(ALICE, ["alice", "bob", "alice", ""]) == 2


@pytest.mark.parametrize(
    "server",
    ["https://gatehouse.example.com", "https://gatehouse.example.com/", "http://h:1/ui/"],
)
def test_the_link_carries_the_code_in_its_fragment(server: str) -> None:
    link = page_link(server, "shop:open-1:secret")
    before, _, fragment = link.partition("#")
    assert before.endswith("/ui/sign-in/link")
    assert "?" not in before
    assert fragment == "code=shop:open-1:secret"
