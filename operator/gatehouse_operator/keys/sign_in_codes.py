"""One-time sign-in codes: made by the operator, sealed to the command's key, exchanged once.

A code is ``<namespace>:<name>:<secret>``: it names the SignInRequest it answers, and its secret
(32 random bytes) is checked against the SHA-256 digest the request's status keeps, so the
status, which anyone allowed to ``get`` it may read, holds nothing that signs in. The code is
HPKE-sealed (X25519, HKDF-SHA256, AES-256-GCM, the suite sealed values use) to the public key in
the request's spec, with the request's namespace, name and uid as ``info``: only the command
that made the key opens it, and a sealed code copied onto another request does not open.

Single use needs no shared state: the page deletes the request with its uid and resourceVersion
as preconditions before it starts a session, and of two exchanges only one delete succeeds.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from gatehouse_operator.api.sign_in_request import Requester, SignInRequestSpec, SignInRequestStatus
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.sealed_values import SUITE

MAX_CODE_CHARS = 400
_SEPARATOR = ":"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _info(namespace: str, name: str, uid: str) -> bytes:
    return f"gatehouse/sign-in|{namespace}/{name}|{uid}".encode()


def new_key() -> tuple[X25519PrivateKey, str]:
    """A key pair for one request: the private key, and the public key as the spec holds it."""
    private = X25519PrivateKey.generate()
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return private, _b64url(raw)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Issued:
    sealed: str  # for the request's status
    code_digest: str
    code: str  # only for tests: the operator forgets it once sealed


def issue(public_key: str, namespace: str, name: str, uid: str) -> Issued:
    """A new code for the request, sealed to its spec's public key."""
    secret = _b64url(secrets.token_bytes(32))
    code = _SEPARATOR.join((namespace, name, secret))
    public = X25519PublicKey.from_public_bytes(_unb64url(public_key))
    payload = SUITE.encrypt(code.encode(), public, info=_info(namespace, name, uid))
    return Issued(_b64url(payload), digest(secret), code)


class CodeUnreadable(GatehouseError, ValueError):
    """The sealed code does not open with this key (another key's, or another request's)."""


def open_code(private: X25519PrivateKey, answer: str, namespace: str, name: str, uid: str) -> str:
    """The code in ``answer`` (a request's status.sealedCode), opened with the command's key."""
    try:
        payload = _unb64url(answer)
        return SUITE.decrypt(payload, private, info=_info(namespace, name, uid)).decode()
    except (InvalidTag, ValueError, binascii.Error) as error:
        raise CodeUnreadable("the code is not sealed to this command's key") from error


@dataclass(frozen=True)
class CodeParts:
    namespace: str
    name: str
    secret: str


def parse(code: str) -> CodeParts | None:
    """The request a code names and its secret; None for what is not a code."""
    parts = code.strip().split(_SEPARATOR)
    if len(code) > MAX_CODE_CHARS or len(parts) != 3 or not all(parts):
        return None
    return CodeParts(*parts)


class Refusal(GatehouseError):
    """Why a code does not sign in, in words the visitor may read (no secret in them)."""


USED_OR_UNKNOWN = (
    "this sign-in link was used already, or is unknown: run `gatehouse open` again for a new one"
)
LATE = "this sign-in link has expired: run `gatehouse open` again for a new one"
NOT_THIS = "this sign-in link does not match its request: run `gatehouse open` again"


def requester_of(
    parts: CodeParts,
    spec: SignInRequestSpec,
    status: SignInRequestStatus,
    now: datetime.datetime,
) -> Requester:
    """The user a code signs in as, given the request it names as stored now; raises Refusal.

    The code must be this request's (its digest), and not late. The page then deletes the
    request (uid and resourceVersion as preconditions) before it trusts the answer."""
    if not status.code_digest or not hmac.compare_digest(status.code_digest, digest(parts.secret)):
        raise Refusal(NOT_THIS)
    if not status.expires_at or now >= datetime.datetime.fromisoformat(status.expires_at):
        raise Refusal(LATE)
    return spec.requester


def forged(stated: object, user: Requester) -> str:
    """Why a new request's spec.requester is not its creator, as the API server authenticated
    them ("" when it is): a request records its requester, and no one records another."""
    if not isinstance(stated, dict):
        return "spec.requester: required"
    fields = {
        "username": (stated.get("username", ""), user.username),
        "uid": (stated.get("uid", ""), user.uid),
        "groups": (sorted(stated.get("groups") or []), sorted(user.groups)),
        "extra": (
            {key: sorted(values) for key, values in (stated.get("extra") or {}).items()},
            {key: sorted(values) for key, values in user.extra.items()},
        ),
    }
    wrong = [name for name, (given, real) in fields.items() if given != real]
    if not wrong:
        return ""
    return (
        f"spec.requester: {', '.join(wrong)} must be the requesting user's own, as the API "
        f"server authenticated them ({user.username}): a SignInRequest records who asked, and "
        "no one may ask for another; `gatehouse open` fills it in from `kubectl auth whoami`"
    )


def pending_of(user: Requester, requesters: list[str]) -> int:
    """How many of the stored requests (their requesters' names) ``user`` made."""
    return sum(1 for name in requesters if name == user.username)
