"""Values sealed to the operator open only with its keys, only for the connection they were
sealed for, and say which of those failed; nothing here ever names the value."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gatehouse_operator.api.connection import Auth
from gatehouse_operator.keys.credentials import CredentialProblem, sealed_in
from gatehouse_operator.keys.sealed_values import (
    PublicSealingKeys,
    Scope,
    SealedValue,
    SealedValueProblem,
    SealingKeys,
    SealingKeysError,
    SealingKeysFile,
)

SECRET = b"sk_live_canary_5f1e"
SCOPE = Scope("shop", "stripe", "https://api.stripe.com")


@pytest.fixture(scope="module")
def keys() -> SealingKeys:
    return SealingKeys.generate()


def sealed(keys: SealingKeys, scope: Scope = SCOPE, value: bytes = SECRET) -> str:
    return keys.public().seal(value, scope)


def refusal(keys: SealingKeys, text: str, scope: Scope = SCOPE) -> SealedValueProblem:
    with pytest.raises(SealedValueProblem) as caught:
        keys.open(text, scope)
    assert "canary" not in caught.value.message
    return caught.value


def test_a_value_opens_for_its_connection_and_says_what_it_is_for(keys: SealingKeys) -> None:
    text = sealed(keys)
    assert keys.open(text, SCOPE) == SECRET
    header = SealedValue.parse(text)
    assert header.scope == SCOPE
    assert header.key == keys.active
    assert "canary" not in text
    # Two seals of one value differ: nothing about the value shows through.
    assert sealed(keys) != text


@pytest.mark.parametrize(
    "elsewhere",
    [
        Scope("shop", "other", SCOPE.origin),
        Scope("rival", "stripe", SCOPE.origin),
        Scope("shop", "stripe", "https://evil.example"),
    ],
)
def test_a_value_copied_to_another_connection_does_not_open(
    keys: SealingKeys, elsewhere: Scope
) -> None:
    problem = refusal(keys, sealed(keys), elsewhere)
    assert problem.reason == "SealedForAnotherConnection"
    assert f"sealed for {SCOPE}, and this connection is {elsewhere}" in problem.message


def test_a_header_edited_to_match_another_connection_does_not_open(keys: SealingKeys) -> None:
    """The header is authenticated: rewriting its scope breaks the seal."""
    prefix, header, payload = sealed(keys).split(".")
    fields = json.loads(base64.urlsafe_b64decode(header + "=="))
    fields["name"] = "other"
    forged = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    problem = refusal(keys, f"{prefix}.{forged}.{payload}", Scope("shop", "other", SCOPE.origin))
    assert problem.reason == "SealedValueCorrupt"


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[:-4] + ("AAAA" if not text.endswith("AAAA") else "BBBB"),
        lambda text: text[: len(text) // 2],
        lambda text: text.replace("gh1.", "gh2.", 1),
        lambda text: "gh1.not-base64!.x",
        lambda text: text + ".more",
    ],
)
def test_a_damaged_value_is_named_corrupt(keys: SealingKeys, damage: object) -> None:
    assert callable(damage)
    assert refusal(keys, damage(sealed(keys))).reason == "SealedValueCorrupt"


def test_a_value_sealed_to_another_installation_names_the_key(keys: SealingKeys) -> None:
    other = SealingKeys.generate()
    problem = refusal(keys, sealed(other))
    assert problem.reason == "SealedKeyUnknown"
    assert other.active in problem.message
    assert keys.active in problem.message


def test_after_a_rotation_old_values_open_and_reseal_under_the_new_key(keys: SealingKeys) -> None:
    old = sealed(keys)
    rotated = SealingKeys.parse(keys.rotated().dump())
    assert rotated.active != keys.active
    assert rotated.open(old, SCOPE) == SECRET
    moved = rotated.reseal(old, SCOPE)
    assert moved is not None
    assert SealedValue.parse(moved).key == rotated.active
    assert rotated.open(moved, SCOPE) == SECRET
    assert rotated.reseal(moved, SCOPE) is None
    # The public document lists every key, and which one seals.
    public = PublicSealingKeys.parse(rotated.public().dump())
    assert set(public.keys) == {keys.active, rotated.active}
    assert public.active == rotated.active


@pytest.mark.parametrize(
    "document",
    [
        b"",
        b"[]",
        b'{"active": "a", "keys": {}}',
        b'{"active": "a", "keys": {"a": "AAAA"}}',
        b'{"active": "0000000000000000", "keys": {"0000000000000000": "'
        + base64.b64encode(bytes(32))
        + b'"}}',
    ],
)
def test_broken_key_documents_are_refused_without_key_material(document: bytes) -> None:
    with pytest.raises(SealingKeysError) as caught:
        SealingKeys.parse(document)
    assert "AAAA" not in str(caught.value)


def test_a_connection_without_sealing_keys_says_so() -> None:
    auth = Auth.model_validate(
        {"type": "bearer", "sealedSecret": "gh1.e30.AAAA"}  # a well-formed shape only
    )
    with pytest.raises(CredentialProblem) as caught:
        sealed_in(auth, None, SCOPE)
    assert caught.value.reason == "SealingKeysMissing"
    assert caught.value.message.startswith("auth.sealedSecret: ")


def test_the_keys_file_is_read_again_when_it_changes(tmp_path: Path, keys: SealingKeys) -> None:
    path = tmp_path / "sealing-keys.json"
    source = SealingKeysFile(path)
    assert source.sealing_keys() is None
    path.write_text(keys.dump())
    first = source.sealing_keys()
    assert first is not None
    assert first.active == keys.active
    path.write_text(keys.rotated().dump())
    rotated = source.sealing_keys()
    assert rotated is not None
    assert rotated.active != keys.active
    path.write_text("garbage, longer than before")
    kept = source.sealing_keys()
    assert kept is not None
    assert kept.active == rotated.active


def _with_header(keys: SealingKeys, header: bytes) -> str:
    payload = sealed(keys).split(".")[2]
    return f"gh1.{base64.urlsafe_b64encode(header).rstrip(b'=').decode()}.{payload}"


@pytest.mark.parametrize(
    "header",
    [
        b"[" * 5000 + b"]" * 5000,  # nested deeper than the parser's recursion
        b'{"v": 1, "key": "k", "namespace": "shop", "name": "stripe", "origin": [1e15]}',
        b'{"v": true, "key": "k", "namespace": "shop", "name": "stripe", "origin": "x"}',
        b'{"v": 1, "key": "k", "namespace": "shop", "name": "stripe", "origin": "x", "z": 1}',
        b'{"v": 1, "key": "k", "namespace": "shop", "name": "' + b"n" * 3000 + b'", "origin": "x"}',
        b"[]",
    ],
)
def test_a_crafted_header_is_named_corrupt_and_never_raises_otherwise(
    keys: SealingKeys, header: bytes
) -> None:
    problem = refusal(keys, _with_header(keys, header))
    assert problem.reason == "SealedValueCorrupt"
    assert len(problem.message) < 300


def test_an_old_key_can_be_retired_and_the_active_one_cannot(keys: SealingKeys) -> None:
    rotated = keys.rotated()
    old = sealed(keys)
    retired = rotated.without(keys.active)
    assert refusal(retired, old).reason == "SealedKeyUnknown"
    with pytest.raises(SealingKeysError, match="is active"):
        rotated.without(rotated.active)
