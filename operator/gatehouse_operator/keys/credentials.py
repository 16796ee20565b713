"""Turning a connection's secret (a Secret's value, or a value sealed to the operator) into a
credential encrypted with the table keys for the proxies, or a clear reason why not.

Messages name the Secret, the key or the field and the rule, never the value: they end up in
conditions, Events and logs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_contract.google_keys import MAX_RSA_BITS, load_rsa_key
from gatehouse_contract.keyring import Encrypted, Keyring, KeyringSource
from gatehouse_contract.routes import AWS_REGION, Credential, UpstreamTls
from gatehouse_operator.api.auth_kinds import SecretShape, kind_of, section_of
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import Auth, AwsWebIdentity
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.sealed_values import FIELD, Scope, SealedValueProblem, SealingKeys
from gatehouse_operator.settings import AwsRoles
from gatehouse_operator.status import Verdict

_HEADER_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# An API key or bearer token longer than this is refused: real ones are far shorter, and the
# proxy scans every answer for the secret it injected.
MAX_SECRET_BYTES = 4096
# A service-account key file is about 2.3 KB; its RSA key may be at most this large. Larger keys
# cost seconds of CPU per signature check (16,384 bits: 35 s) in a process every tenant shares.
MAX_KEY_FILE_BYTES = 16 * 1024
# AWS keys' JSON: a session token of 8,192 characters (the most aws_keys reads) and the rest fit.
MAX_AWS_KEYS_BYTES = 16 * 1024


class HasPem(Protocol):
    """A checked client certificate: what is encrypted of it is its ``pem``."""

    @property
    def pem(self) -> bytes: ...


Checked = TypeVar("Checked", bound=HasPem)


class CredentialProblem(GatehouseError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _text_secret(value: bytes, where: str) -> str:
    try:
        text = value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialProblem(Reason.INVALID_SECRET_VALUE, f"{where} is not UTF-8 text") from None
    if not text:
        raise CredentialProblem(Reason.INVALID_SECRET_VALUE, f"{where} is empty")
    if len(value) > MAX_SECRET_BYTES:
        raise CredentialProblem(
            Reason.SECRET_TOO_LONG,
            f"{where} is {len(value):,} bytes; at most {MAX_SECRET_BYTES:,} are allowed",
        )
    if _HEADER_UNSAFE.search(text):
        raise CredentialProblem(
            Reason.INVALID_SECRET_VALUE,
            f"{where} contains line breaks or control characters, which cannot be sent in HTTP",
        )
    return text


def validate_service_account_key(value: bytes, where: str) -> bytes:
    """Checks a Google service-account key file the way the token exchange will use it.

    Cheap whatever the input: the size is checked before anything is parsed, the RSA key is
    loaded without OpenSSL's consistency check (seconds for large keys, holding the GIL) and
    proven instead by signing and verifying one message.
    """
    if len(value) > MAX_KEY_FILE_BYTES:
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY,
            f"{where} is {len(value):,} bytes; a key file may have at most {MAX_KEY_FILE_BYTES:,}",
        )
    try:
        info = json.loads(value)
    except ValueError:
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY, f"{where} is not JSON"
        ) from None
    if not isinstance(info, dict):
        raise CredentialProblem(Reason.INVALID_SERVICE_ACCOUNT_KEY, f"{where} is not a JSON object")
    if info.get("type") != "service_account":
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY, f'{where}: "type" must be "service_account"'
        )
    for field in ("client_email", "private_key"):
        if not isinstance(info.get(field), str) or not info[field]:
            raise CredentialProblem(
                Reason.INVALID_SERVICE_ACCOUNT_KEY, f'{where}: "{field}" is missing'
            )
    try:
        key = load_rsa_key(info["private_key"].encode())
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY,
            f'{where}: "private_key" is not a PEM RSA private key',
        ) from None
    if key.key_size > MAX_RSA_BITS:
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY,
            f'{where}: "private_key" is a {key.key_size:,}-bit RSA key; at most '
            f"{MAX_RSA_BITS:,} bits are allowed (Google issues 2,048)",
        )
    probe = b"gatehouse key check"
    try:
        signature = key.sign(probe, padding.PKCS1v15(), hashes.SHA256())
        key.public_key().verify(signature, probe, padding.PKCS1v15(), hashes.SHA256())
    except (ValueError, InvalidSignature):
        raise CredentialProblem(
            Reason.INVALID_SERVICE_ACCOUNT_KEY,
            f'{where}: "private_key" is not a consistent RSA key (its signatures do not verify)',
        ) from None
    return value


def validate_aws_keys(value: bytes, where: str) -> bytes:
    """AWS keys as the proxy will read them (gatehouse_contract.aws_keys), in the JSON it
    reads: what AWS's tools add (Version, Expiration) is not kept."""
    if len(value) > MAX_AWS_KEYS_BYTES:
        raise CredentialProblem(
            Reason.INVALID_AWS_KEYS,
            f"{where} is {len(value):,} bytes; AWS keys' JSON may have at most "
            f"{MAX_AWS_KEYS_BYTES:,}",
        )
    try:
        keys = AwsKeys.parse(value.decode("utf-8"))
    except UnicodeDecodeError:
        raise CredentialProblem(Reason.INVALID_AWS_KEYS, f"{where} is not UTF-8 text") from None
    except AwsKeysError as error:
        raise CredentialProblem(Reason.INVALID_AWS_KEYS, f"{where}: {error}") from None
    return keys.stored().encode()


@dataclass(frozen=True)
class Found:
    """A connection's secret, and where it was found (for messages, never with the value)."""

    value: bytes
    where: str


def secret_in(auth: Auth, secret_data: Mapping[str, bytes] | None) -> Found | None:
    """The value ``auth.secretRef`` names in the Secret's data; None when the connection takes
    none from a Secret. Raises CredentialProblem."""
    ref = auth.secret_ref
    if auth.type == "none" or ref is None:
        return None
    if secret_data is None:
        raise CredentialProblem(Reason.SECRET_NOT_FOUND, f"Secret {ref.name!r} does not exist")
    if ref.key not in secret_data:
        raise CredentialProblem(
            Reason.SECRET_KEY_NOT_FOUND, f"Secret {ref.name!r} has no key {ref.key!r}"
        )
    return Found(secret_data[ref.key], f"key {ref.key!r} of Secret {ref.name!r}")


def sealed_in(auth: Auth, keys: SealingKeys | None, scope: Scope) -> Found | None:
    """The plaintext of ``auth.sealedSecret`` for the connection ``scope``; None when it has
    none. Raises CredentialProblem saying why the value does not open."""
    if auth.type == "none" or auth.sealed_secret is None:
        return None
    if keys is None:
        raise CredentialProblem(
            Reason.SEALING_KEYS_MISSING,
            f"{FIELD}: this installation has no sealing keys (their Secret is missing or "
            "unreadable; the operator's log says which; see the docs, concepts/sealing.md)",
        )
    try:
        return Found(keys.open(auth.sealed_secret, scope), FIELD)
    except SealedValueProblem as problem:
        raise CredentialProblem(problem.reason, problem.message) from None


def web_identity_of(auth: Auth) -> AwsWebIdentity | None:
    """The role a connection signs as by web identity, if it does (then it stores no secret)."""
    section = auth.aws_sig_v4 if auth.type == "awsSigV4" else None
    return None if section is None else section.web_identity


def check_role(auth: Auth, namespace: str, roles: AwsRoles) -> None:
    """Raises CredentialProblem when the connection names a role by web identity that the
    installation does not let ``namespace`` sign as: every namespace shares the proxies'
    identity, so AWS itself cannot tell them apart."""
    role = web_identity_of(auth)
    section = auth.aws_sig_v4
    if role is not None and section is not None and not AWS_REGION.fullmatch(section.region):
        # STS's URL names the region: nothing else may stand there (the proxies refuse it too).
        raise CredentialProblem(
            Reason.INVALID_SPEC,
            "auth.awsSigV4.region: with webIdentity it must be an AWS region's name "
            "(us-east-1, eu-west-1...): the role's keys are asked of that region's STS",
        )
    if role is not None and not roles.allows(namespace, role.role_arn):
        raise CredentialProblem(
            Reason.ROLE_NOT_ALLOWED,
            f"auth.awsSigV4.webIdentity.roleArn: namespace {namespace!r} may not sign as this "
            "role: the installation lists the roles each namespace may assume "
            "(installation.aws.webIdentity.roles)",
        )


def placement(auth: Auth, token_url: str = "") -> Credential:
    """Where and how the credential goes, without the secret: as its kind's section places it
    (api.auth_kinds). ``token_url``: the normalised endpoint of a kind that sends its secret to
    one of its own (see origin.token_url_of)."""
    credential = Credential(type=auth.type)
    section = section_of(auth)
    return section.placed(credential, token_url) if section is not None else credential


def _checked(shape: SecretShape, found: Found) -> bytes:
    """The secret, once it passes the checks of what its kind's secret is."""
    if shape == "serviceAccountKey":
        return validate_service_account_key(found.value, found.where)
    if shape == "awsKeys":
        return validate_aws_keys(found.value, found.where)
    plain = _text_secret(found.value, found.where).encode()
    if shape == "userPassword" and b":" not in plain:
        raise CredentialProblem(
            Reason.INVALID_SECRET_VALUE,
            f"{found.where} must be user:password for basic auth (RFC 7617: the user name "
            "has no colon)",
        )
    return plain


def encrypt_credential(
    auth: Auth,
    found: Found | None,
    *,
    keyring: Keyring,
    connection_uid: str,
    origin: str,
    token_url: str = "",
) -> Credential:
    """The credential for ``auth``, ``found`` encrypted for the proxies; raises CredentialProblem
    with a reason and message."""
    where_it_goes = placement(auth, token_url)
    if found is None:
        return where_it_goes
    plain = _checked(kind_of(auth).shape, found)
    encrypted = keyring.encrypt(plain, where_it_goes.context(connection_uid, origin))
    return where_it_goes.model_copy(update={"encrypted": encrypted})


def verdict_for(problem: CredentialProblem | None, auth: Auth) -> Verdict:
    if problem is not None:
        return Verdict(ConditionType.CREDENTIAL_READY, "False", problem.reason, problem.message)
    if auth.type == "none":
        return Verdict(
            ConditionType.CREDENTIAL_READY, "True", Reason.NO_CREDENTIAL_NEEDED, "auth.type is none"
        )
    if web_identity_of(auth) is not None:
        return Verdict(
            ConditionType.CREDENTIAL_READY,
            "True",
            Reason.ROLE_BY_WEB_IDENTITY,
            "the proxies sign with the role's keys, asked of AWS STS with their own identity",
        )
    return Verdict(
        ConditionType.CREDENTIAL_READY,
        "True",
        Reason.CREDENTIAL_ENCRYPTED,
        f"{FIELD} opens and is encrypted for the proxies"
        if auth.sealed_secret is not None
        else "the Secret's value is encrypted for the proxies",
    )


class CredentialEncrypter:
    """Encrypts connections' credentials with the table keys, again only when an input changed.

    Re-encrypting an unchanged secret would change its ciphertext, and with it the proxies'
    cached Google tokens. The active key id is an input, so a rotation re-encrypts everything.
    """

    def __init__(self, keyring: KeyringSource) -> None:
        self.keyring = keyring
        # Per connection uid: the inputs a credential was encrypted from, and the result.
        self._encrypted: dict[str, tuple[tuple[str, ...], Credential]] = {}
        # Likewise its client certificate (spec.tls), checked and encrypted: a new ciphertext
        # would make the proxies build its TLS context again.
        self._certificates: dict[str, tuple[tuple[str, ...], tuple[HasPem, Encrypted]]] = {}

    def encrypt(
        self,
        auth: Auth,
        found: Found | None,
        *,
        connection_uid: str,
        origin: str,
        token_url: str = "",
    ) -> Credential:
        """The connection's encrypted credential; raises CredentialProblem as encrypt_credential
        does."""
        keyring = self.keyring.current()
        inputs = (
            origin,
            token_url,
            auth.model_dump_json(),
            hashlib.sha256(found.value).hexdigest() if found is not None else "",
            keyring.active,
        )
        cached = self._encrypted.get(connection_uid)
        if cached is not None and cached[0] == inputs:
            return cached[1]
        credential = encrypt_credential(
            auth,
            found,
            keyring=keyring,
            connection_uid=connection_uid,
            origin=origin,
            token_url=token_url,
        )
        self._encrypted[connection_uid] = (inputs, credential)
        return credential

    def client_certificate(
        self,
        chain: bytes,
        key: bytes,
        check: Callable[[], Checked],
        *,
        connection_uid: str,
        origin: str,
    ) -> tuple[Checked, Encrypted]:
        """A client certificate's ``chain`` and ``key`` as ``check`` makes them (raising
        CredentialProblem), and encrypted for the proxies under UpstreamTls.context; an
        unchanged pair is neither checked nor encrypted again."""
        keyring = self.keyring.current()
        digests = (hashlib.sha256(chain).hexdigest(), hashlib.sha256(key).hexdigest())
        inputs = (origin, *digests, keyring.active)
        cached = self._certificates.get(connection_uid)
        if cached is not None and cached[0] == inputs:
            return cast(tuple[Checked, Encrypted], cached[1])
        checked = check()
        encrypted = keyring.encrypt(checked.pem, UpstreamTls.context(connection_uid, origin))
        self._certificates[connection_uid] = (inputs, (checked, encrypted))
        return checked, encrypted

    def checked_certificate(self, connection_uid: str) -> HasPem | None:
        """The client certificate last checked for the connection, if any (what the resync
        judges against the clock without reading its Secret again)."""
        cached = self._certificates.get(connection_uid)
        return None if cached is None else cached[1][0]

    def forget(self, connection_uid: str) -> None:
        self._encrypted.pop(connection_uid, None)
        self._certificates.pop(connection_uid, None)
