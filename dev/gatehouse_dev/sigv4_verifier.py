"""AWS Signature Version 4 checked on a request as it arrived, the way an AWS service checks it.

Written from AWS's published algorithm ("Create a signed AWS API request"), not from the proxy's
signer, so the tests that pass the proxy's requests through it prove the signer against the
algorithm rather than against itself; AWS's own test vectors (aws-c-auth's signing suite) pass
through it in the tests. :mod:`gatehouse_dev.sigv4_upstream` serves it on 127.0.0.1.

It rebuilds the canonical request from the request as received: the request line's target as
sent (for services other than S3, the path's dot segments and empty segments removed and each
segment encoded again, so ``%20`` on the wire is ``%2520`` in the canonical request; S3's object
keys decoded and encoded once, nothing removed), the query's parameters decoded and encoded again
(``+`` is a plus sign, as in AWS's own signer, not a space) and sorted, the signed headers'
values trimmed with runs of spaces made one, and the payload's hash.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote_to_bytes

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
TERMINATOR = "aws4_request"
# How far X-Amz-Date may be from the service's clock, either way.
MAX_SKEW_SECONDS = 300
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SPACES = re.compile(" +")
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True, repr=False)
class Account:
    """What the service knows: the one key pair it accepts, the session token that goes with it
    (temporary keys), and where it runs."""

    access_key_id: str
    secret_access_key: str
    region: str
    service: str
    session_token: str = ""
    # S3 accepts UNSIGNED-PAYLOAD in X-Amz-Content-Sha256; most services sign the body.
    allow_unsigned_payload: bool = False
    # Services other than S3 resolve dot segments and drop empty ones (S3 never does: they are
    # part of its keys); some of AWS's vectors are signed without.
    normalize_path: bool = True

    @property
    def is_s3(self) -> bool:
        return self.service == "s3"


@dataclass(frozen=True)
class Received:
    """A request as it arrived: the request line's target exactly as sent, its header fields in
    order (a name may repeat), its body."""

    method: str
    target: str
    headers: Sequence[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Verdict:
    """``code`` is empty when the signature verified, else the error code AWS answers with."""

    status: int
    code: str
    message: str
    canonical_request: str = ""
    string_to_sign: str = ""
    signed_headers: tuple[str, ...] = ()
    unsigned_payload: bool = False

    @property
    def verified(self) -> bool:
        return not self.code


class _Refused(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        canonical_request: str = "",
        string_to_sign: str = "",
    ) -> None:
        super().__init__(message)
        self.verdict = Verdict(status, code, message, canonical_request, string_to_sign)


def _incomplete(message: str) -> _Refused:
    return _Refused(403, "IncompleteSignature", message)


def uri_encode(data: bytes, *, keep_slash: bool) -> str:
    """AWS's UriEncode: every byte but the unreserved ones as %XY (upper case hex)."""
    return "".join(
        chr(byte) if byte in _UNRESERVED or (keep_slash and byte == 0x2F) else f"%{byte:02X}"
        for byte in data
    )


def _without_dot_segments(path: str) -> str:
    """The path with ``.``, ``..`` and empty segments resolved; a trailing slash kept."""
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment not in ("", "."):
            kept.append(segment)
    trailing = "/" if kept and path.endswith("/") else ""
    return "/" + "/".join(kept) + trailing


def canonical_uri(path: str, *, normalize: bool, s3: bool) -> str:
    path = path or "/"
    if s3:
        # The object key as S3 reads it (decoded), encoded once.
        return uri_encode(unquote_to_bytes(path), keep_slash=True)
    if normalize:
        path = _without_dot_segments(path)
    # The path as sent was encoded once for the wire; each segment is encoded again.
    return uri_encode(path.encode(), keep_slash=True)


def canonical_query(query: str) -> str:
    pairs = []
    for parameter in query.split("&"):
        if not parameter:
            continue
        name, _, value = parameter.partition("=")
        pairs.append(
            (
                uri_encode(unquote_to_bytes(name), keep_slash=False),
                uri_encode(unquote_to_bytes(value), keep_slash=False),
            )
        )
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _trimmed(value: str) -> str:
    return _SPACES.sub(" ", value.strip(" \t"))


def _canonical_headers(headers: Sequence[tuple[str, str]], signed: Sequence[str]) -> str:
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(_trimmed(value))
    missing = [name for name in signed if name not in values]
    if missing:
        raise _incomplete(f"Signed header {missing[0]!r} is not in the request.")
    return "".join(f"{name}:{','.join(values[name])}\n" for name in signed)


def signing_key(secret_access_key: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret_access_key}".encode()
    for part in (date, region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


@dataclass(frozen=True)
class _Authorization:
    access_key_id: str
    date: str
    region: str
    service: str
    terminator: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{self.terminator}"


def _authorization(header: str) -> _Authorization:
    algorithm, _, rest = header.partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': {algorithm[:40]!r}.")
    parameters = {}
    for part in rest.split(","):
        name, _, value = part.strip().partition("=")
        parameters[name] = value
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not parameters.get(name):
            raise _incomplete(f"Authorization header requires '{name}' parameter.")
    credential = parameters["Credential"].split("/")
    if len(credential) != 5:
        raise _incomplete(
            "Credential must have five parts: access key id, date, region, service, aws4_request."
        )
    signed = tuple(parameters["SignedHeaders"].split(";"))
    if "host" not in signed or "x-amz-date" not in signed:
        raise _incomplete("SignedHeaders must include 'host' and 'x-amz-date'.")
    access_key_id, date, region, service, terminator = credential
    return _Authorization(
        access_key_id, date, region, service, terminator, signed, parameters["Signature"]
    )


def _one(headers: Sequence[tuple[str, str]], wanted: str) -> str | None:
    found = [value for name, value in headers if name.lower() == wanted]
    if len(found) > 1:
        raise _incomplete(f"The request has {len(found)} {wanted!r} headers.")
    return found[0] if found else None


def _check_date(amz_date: str, now: datetime) -> None:
    try:
        signed_at = datetime.strptime(amz_date, AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise _incomplete(
            "X-Amz-Date must be in ISO-8601 basic format (20150830T123600Z)."
        ) from None
    skew = (signed_at - now).total_seconds()
    if skew < -MAX_SKEW_SECONDS:
        limit = now.timestamp() - MAX_SKEW_SECONDS
        raise _Refused(
            403,
            "RequestExpired",
            f"Signature expired: {amz_date} is now earlier than "
            f"{datetime.fromtimestamp(limit, UTC).strftime(AMZ_DATE_FORMAT)}.",
        )
    if skew > MAX_SKEW_SECONDS:
        limit = now.timestamp() + MAX_SKEW_SECONDS
        raise _Refused(
            403,
            "RequestExpired",
            f"Signature not yet current: {amz_date} is still later than "
            f"{datetime.fromtimestamp(limit, UTC).strftime(AMZ_DATE_FORMAT)}.",
        )


def _check_scope(auth: _Authorization, amz_date: str, account: Account) -> None:
    wrong = ""
    if auth.date != amz_date[:8]:
        wrong = (
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            f"from HTTP: {auth.date[:16]!r} != {amz_date[:8]!r}."
        )
    elif auth.region != account.region:
        wrong = f"Credential should be scoped to a valid region, not {auth.region[:64]!r}."
    elif auth.service != account.service:
        wrong = f"Credential should be scoped to correct service: {account.service!r}."
    elif auth.terminator != TERMINATOR:
        wrong = f"Credential should be scoped with a valid terminator: {TERMINATOR!r}."
    if wrong:
        raise _Refused(403, "SignatureDoesNotMatch", wrong)


def _check_keys(auth: _Authorization, token: str | None, account: Account) -> None:
    invalid = "The security token included in the request is invalid."
    if not hmac.compare_digest(auth.access_key_id.encode(), account.access_key_id.encode()):
        raise _Refused(403, "InvalidClientTokenId", invalid)
    # Temporary keys need their token; long-term keys have none to send.
    if not hmac.compare_digest((token or "").encode(), account.session_token.encode()):
        raise _Refused(403, "InvalidClientTokenId", invalid)


def _payload_hash(received: Received, account: Account) -> str:
    body_hash = hashlib.sha256(received.body).hexdigest()
    declared = _one(received.headers, "x-amz-content-sha256")
    if declared is None:
        if account.is_s3:
            raise _Refused(
                400,
                "InvalidRequest",
                "Missing required header for this request: x-amz-content-sha256.",
            )
        return body_hash
    if declared == UNSIGNED_PAYLOAD:
        if account.allow_unsigned_payload:
            return UNSIGNED_PAYLOAD
        raise _Refused(
            400,
            "XAmzContentSHA256Mismatch",
            f"This service signs the body's hash: {UNSIGNED_PAYLOAD} is not accepted.",
        )
    if declared != body_hash:
        raise _Refused(
            400,
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        )
    return body_hash


def verify(received: Received, account: Account, now: datetime) -> Verdict:
    """Whether ``received`` was signed with ``account``'s keys at most five minutes from
    ``now``: a verified :class:`Verdict`, or the refusal AWS would answer with."""
    try:
        return _verify(received, account, now)
    except _Refused as refused:
        return refused.verdict
    except UnicodeEncodeError:
        # A field's bytes that are not UTF-8 (the server kept them as lone surrogates).
        return _incomplete("The request has a field that is not UTF-8.").verdict


def _verify(received: Received, account: Account, now: datetime) -> Verdict:
    header = _one(received.headers, "authorization")
    if header is None:
        raise _Refused(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
    auth = _authorization(header)
    _check_keys(auth, _one(received.headers, "x-amz-security-token"), account)
    amz_date = _one(received.headers, "x-amz-date") or ""
    _check_date(amz_date, now)
    _check_scope(auth, amz_date, account)
    payload_hash = _payload_hash(received, account)
    path, _, query = received.target.partition("?")
    signed = tuple(sorted(auth.signed_headers))
    canonical_request = "\n".join(
        [
            received.method,
            canonical_uri(path, normalize=account.normalize_path, s3=account.is_s3),
            canonical_query(query),
            _canonical_headers(received.headers, signed),
            ";".join(signed),
            payload_hash,
        ]
    )
    string_to_sign = "\n".join(
        [ALGORITHM, amz_date, auth.scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = signing_key(account.secret_access_key, auth.date, auth.region, auth.service)
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), auth.signature.encode()):
        raise _Refused(
            403,
            "SignatureDoesNotMatch",
            _MISMATCH,
            canonical_request=canonical_request,
            string_to_sign=string_to_sign,
        )
    return Verdict(
        200,
        "",
        "verified",
        canonical_request,
        string_to_sign,
        signed,
        payload_hash == UNSIGNED_PAYLOAD,
    )
