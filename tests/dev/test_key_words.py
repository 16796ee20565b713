"""The two key systems keep words of their own, so that no line can be read as the other one.

The keyring (AES-256-GCM, shared with the proxies) *encrypts* and *decrypts*: the credentials in the
routing table, the page's session cookie and a wizard's draft secret. The sealing keys (HPKE, the
operator's alone) *seal* and *open*: values that live in Git (``auth.sealedSecret``). A line of
code, chart or docs that seals or opens with the keyring, or encrypts with the sealing keys, is
flagged; naming both systems side by side ("the keyring and the sealing keys") is fine.

The check is by clause (a line cut at "(", ")", ";" and between keyword arguments), after names
are split into words (``sealedWith`` reads "sealed with", ``keyring_key_ids`` "keyring key ids").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("operator", "proxy", "contract", "docs", "charts", "README.md")
SUFFIXES = {".py", ".md", ".html", ".yaml", ".yml", ".tpl", ".txt", ".json"}

# The sealing keys' own names, which are not a seal word used of something else: the keys, the
# values and their Secret, the CLI module, and ``sealing`` alone as the name of the keys' source.
_SEALING_NAMES = re.compile(
    r"\bsealing (keys?|secret)\b|\bsealed (secrets?|values?|credentials?)\b|\bseal cli\b"
    r"|\bsealing\b(?=\s*([,)\]]|$))"
)
_SEAL = re.compile(r"\b(un|re)?seal(s|ed|ing|er)?\b")
_KEYRING = re.compile(
    r"\bkeyring\b|\baes\b|\btable entr(y|ies)\b|\bthe proxies\b|\bproxy\b|\bproxies'? copy\b"
    r"|\bsession\b|\bcookies?\b|\bdrafts?\b"
)
_ENCRYPT = re.compile(r"\b(en|de)crypt\w*")
# "Open" is also a stream's or a page's: only these forms, beside what only the keyring makes.
_OPEN = re.compile(r"\b(opens|opened|can open|could open|does not open|to open)\b")
_KEYRING_MADE = re.compile(
    r"\bkeyring\b|\bcookies?\b|\bsession\b|\bdrafts?\b|\bciphertext\b|\bstored token\b"
    r"|\bdecrypt\w*|\bencrypted\b"
)
_SEALING = re.compile(
    r"\bhpke\b|\bx25519\b|\bsealing keys?\b|\bsealed (secrets?|values?)\b|\bin git\b"
)
_CLAUSE = re.compile(r" \(|\)|;|, (?=\w+=)")

# Deliberate: (file, or "" for any, text on the line) -> why.
ALLOWED = {
    ("contract/gatehouse_contract/routes.py", '"sealed"'): (
        "the credential's wire name for proxies of earlier versions, which refuse unknown fields"
    ),
    ("", "sealedWith"): "the readiness answer's deprecated alias of encryptedWith, gone in 0.3.0",
    ("", "CredentialSealed"): "the condition reason's name before 0.2.0, in upgrade notes",
    ("operator/gatehouse_operator/keys/sealed_values.py", "SUITE.decrypt("): (
        "HPKE's own call is named decrypt (the cryptography package)"
    ),
    ("operator/gatehouse_operator/keys/credentials.py", "{FIELD} opens and is encrypted"): (
        "FIELD is auth.sealedSecret: opened with the sealing keys, then encrypted with the keyring"
    ),
}


def _words(clause: str) -> str:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", clause)
    return re.sub(r"[_\-./`\"']", " ", spaced).lower()


def problems(line: str) -> Iterator[str]:
    """What reads as the other key system in one line."""
    for raw in _CLAUSE.split(line):
        clause = _words(raw)
        sealed = _SEAL.search(_SEALING_NAMES.sub(" ", clause))
        encrypted = _ENCRYPT.search(clause)
        # A clause that names a system says whose word it is.
        names_keyring, names_sealing = bool(_KEYRING.search(clause)), bool(_SEALING.search(clause))
        if sealed and names_keyring and not names_sealing:
            yield f"{sealed.group()!r} of the keyring's (say encrypt/decrypt)"
        elif sealed and encrypted and not (names_keyring and names_sealing):
            yield f"{sealed.group()!r} beside {encrypted.group()!r}: which system?"
        elif encrypted and names_sealing and not names_keyring:
            yield f"{encrypted.group()!r} of the sealing keys' (say seal/open)"
        elif (
            (opened := _OPEN.search(clause)) and _KEYRING_MADE.search(clause) and not names_sealing
        ):
            yield f"{opened.group()!r} of the keyring's (say decrypt)"


def _files() -> Iterator[Path]:
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            yield path
        else:
            yield from sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def _allowed(path: str, line: str) -> bool:
    return any(where in ("", path) and text in line for where, text in ALLOWED)


def test_no_line_uses_one_key_systems_words_for_the_other() -> None:
    found = []
    for file in _files():
        path = file.relative_to(ROOT).as_posix()
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            if _allowed(path, line):
                continue
            found += [f"{path}:{number}: {why}: {line.strip()[:120]}" for why in problems(line)]
    assert not found, "\n".join(found)


def test_the_check_tells_the_systems_apart() -> None:
    flagged = [
        "the keyring (what the operator seals table entries with for the proxies)",
        "and every credential sealed again for the proxies) and the sealing keys (their",
        "It is kept only in this browser's session cookie, sealed, for eight hours at most.",
        '"sealedWith": sorted(current.keyring_key_ids),',
        "def decrypt_draft_secret(self, credentials: Credentials, sealed: str) -> str | None:",
        "the values in Git, encrypted with the sealing keys",
        'log.warning("a stored token of connection %s does not open here", key.connection)',
        "token, so the page's HTML holds only ciphertext that no other session can open.",
    ]
    kept = [
        "the keyring, the sealing keys and the bundled store's password",
        "runtime = assemble(options, kube, keyring, sealing)",
        "The operator opens a value only to encrypt it into the routing table for the proxies,",
        "`auth.sealedSecret` opened with this installation's sealing key) is encrypted with the",
        "origin=origin, has_secret=credential.encrypted is not None, resealed_secret=resealed",
        "Sealed credentials: `spec.auth.sealedSecret`, a value sealed to the operator (HPKE)",
        "encrypted with the keyring, or sealed with the sealing keys, stays readable if",
        "Nothing static travels: the replica signs its opening request with a key derived from the",
        "`auth.sealedSecret` opens with the sealing keys, and is encrypted for the proxies",
    ]
    assert [line for line in flagged if not list(problems(line))] == []
    assert [line for line in kept if list(problems(line))] == []
