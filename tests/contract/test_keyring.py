"""Credentials encrypted with the keyring decrypt only with their key and their context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatehouse_contract.keyring import Keyring, KeyringError, KeyringFile
from gatehouse_contract.routes import Credential


def test_an_encrypted_credential_decrypts_with_the_same_context() -> None:
    keyring = Keyring.generate()
    encrypted = keyring.encrypt(b"sk_live_123", "uid|https://api.example.com")
    assert b"sk_live_123" not in encrypted.model_dump_json().encode()
    assert keyring.decrypt(encrypted, "uid|https://api.example.com") == b"sk_live_123"


def test_an_encrypted_credential_does_not_decrypt_for_another_origin() -> None:
    keyring = Keyring.generate()
    encrypted = keyring.encrypt(b"sk_live_123", "uid|https://api.example.com")
    with pytest.raises(KeyringError, match="does not decrypt"):
        keyring.decrypt(encrypted, "uid|https://evil.example.net")


def test_rotation_keeps_old_values_readable_and_seals_with_the_new_key() -> None:
    old = Keyring.generate("k1")
    encrypted_before = old.encrypt(b"secret", "ctx")
    rotated = Keyring.parse(
        old.dump()
        .replace('"active": "k1"', '"active": "k2"')
        .replace('"keys": {', '"keys": {"k2": "' + "A" * 43 + '=", ')
    )
    assert rotated.decrypt(encrypted_before, "ctx") == b"secret"
    assert rotated.encrypt(b"secret", "ctx").key_id == "k2"
    assert rotated.derived("k1", b"purpose") == old.derived("k1", b"purpose")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "must be JSON"),
        ('{"active": "a", "keys": {"a": "c2hvcnQ="}}', "must be 32 bytes"),
        ('{"active": "b", "keys": {"a": "' + "A" * 43 + '="}}', "active key 'b'"),
    ],
)
def test_malformed_keyrings_are_refused_without_echoing_keys(document: str, message: str) -> None:
    with pytest.raises(KeyringError, match=message) as caught:
        Keyring.parse(document)
    assert "c2hvcnQ" not in str(caught.value)


def test_keyring_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(Keyring.generate("k1").dump())
    keyring_file = KeyringFile(path)
    assert keyring_file.current().active == "k1"
    path.write_text(Keyring.generate("k2-longer-id").dump())
    assert keyring_file.current().active == "k2-longer-id"


def test_a_keyring_file_with_a_recheck_interval_looks_again_only_when_due_or_told(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(Keyring.generate("k1").dump())
    keyring_file = KeyringFile(path, recheck_seconds=3600)
    assert keyring_file.current().active == "k1"
    path.write_text(Keyring.generate("k2-longer-id").dump())
    assert keyring_file.current().active == "k1"  # not due yet: no system call per request
    assert keyring_file.current(fresh=True).active == "k2-longer-id"


def test_an_encrypted_credential_travels_as_sealed_for_proxies_of_earlier_versions() -> None:
    keyring = Keyring.generate()
    credential = Credential(type="bearer", encrypted=keyring.encrypt(b"sk", "ctx"))
    wire = json.loads(credential.model_dump_json())
    assert "sealed" in wire
    assert "encrypted" not in wire
    assert Credential.model_validate(wire) == credential


def test_a_compact_value_decrypts_only_for_its_purpose_context_and_a_key_held() -> None:
    keyring = Keyring.generate("k1")
    value = keyring.encrypt_compact(b"gatehouse/grants", b"plain", b"grant|uid|owner")
    assert keyring.decrypt_compact(b"gatehouse/grants", value, b"grant|uid|owner") == b"plain"
    for purpose, context in (
        (b"gatehouse/connect-links", b"grant|uid|owner"),
        (b"gatehouse/grants", b"grant|uid|other"),
    ):
        with pytest.raises(KeyringError):
            keyring.decrypt_compact(purpose, value, context)
    rotated = Keyring.generate("k2")
    with pytest.raises(KeyringError, match="no key 'k1'"):
        rotated.decrypt_compact(b"gatehouse/grants", value, b"grant|uid|owner")
    for broken in (b"", b"\x05k1", value[:-1], bytes([200]) + value[1:]):
        with pytest.raises(KeyringError):
            keyring.decrypt_compact(b"gatehouse/grants", broken, b"grant|uid|owner")
