"""Turning a connection's Secret into a sealed credential, or a clear reason why not.

Messages name the Secret, the key and the rule, never the value: they end up in conditions,
Events and logs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from google.auth import crypt

from gatehouse_operator.api.connection import Auth
from gatehouse_operator.conditions import Verdict
from gatehouse_proxy.routing_table import Credential
from gatehouse_proxy.sealing import Keyring

CREDENTIAL_READY = "CredentialReady"
_HEADER_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class CredentialProblem(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _text_secret(value: bytes, where: str) -> str:
    try:
        text = value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialProblem("InvalidSecretValue", f"{where} is not UTF-8 text") from None
    if not text:
        raise CredentialProblem("InvalidSecretValue", f"{where} is empty")
    if _HEADER_UNSAFE.search(text):
        raise CredentialProblem(
            "InvalidSecretValue",
            f"{where} contains line breaks or control characters, which cannot be sent in HTTP",
        )
    return text


def validate_service_account_key(value: bytes, where: str) -> bytes:
    """Checks a Google service-account key file the way the token exchange will use it."""
    try:
        info = json.loads(value)
    except ValueError:
        raise CredentialProblem("InvalidServiceAccountKey", f"{where} is not JSON") from None
    if not isinstance(info, dict):
        raise CredentialProblem("InvalidServiceAccountKey", f"{where} is not a JSON object")
    if info.get("type") != "service_account":
        raise CredentialProblem(
            "InvalidServiceAccountKey", f'{where}: "type" must be "service_account"'
        )
    for field in ("client_email", "private_key"):
        if not isinstance(info.get(field), str) or not info[field]:
            raise CredentialProblem("InvalidServiceAccountKey", f'{where}: "{field}" is missing')
    try:
        crypt.RSASigner.from_service_account_info(info)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, IndexError):
        raise CredentialProblem(
            "InvalidServiceAccountKey", f'{where}: "private_key" is not a PEM RSA private key'
        ) from None
    return value


def seal_credential(
    auth: Auth,
    secret_data: Mapping[str, bytes] | None,
    *,
    keyring: Keyring,
    connection_uid: str,
    origin: str,
) -> Credential:
    """The sealed credential for ``auth``; raises CredentialProblem with a reason and message."""
    placement = Credential(
        type=auth.type,
        parameter=auth.api_key.name if auth.api_key else "",
        location=auth.api_key.in_ if auth.api_key else "",
        scopes=tuple(auth.google_service_account.scopes) if auth.google_service_account else (),
    )
    if auth.type == "none" or auth.secret_ref is None:
        return placement
    ref = auth.secret_ref
    if secret_data is None:
        raise CredentialProblem("SecretNotFound", f"Secret {ref.name!r} does not exist")
    if ref.key not in secret_data:
        raise CredentialProblem("SecretKeyNotFound", f"Secret {ref.name!r} has no key {ref.key!r}")
    where = f"key {ref.key!r} of Secret {ref.name!r}"
    value = secret_data[ref.key]
    if auth.type == "googleServiceAccount":
        plain = validate_service_account_key(value, where)
    else:
        plain = _text_secret(value, where).encode()
    sealed = keyring.seal(plain, placement.context(connection_uid, origin))
    return placement.model_copy(update={"sealed": sealed})


def verdict_for(problem: CredentialProblem | None, auth: Auth) -> Verdict:
    if problem is not None:
        return Verdict(CREDENTIAL_READY, "False", problem.reason, problem.message)
    if auth.type == "none":
        return Verdict(CREDENTIAL_READY, "True", "NoCredentialNeeded", "auth.type is none")
    return Verdict(CREDENTIAL_READY, "True", "CredentialSealed", "the Secret's value is sealed")
