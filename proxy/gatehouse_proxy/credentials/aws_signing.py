"""AWS Signature Version 4 (SigV4), as AWS publishes it ("Create a signed AWS API request"): a
canonical request of what is sent, a string to sign naming the date, region and service, and its
HMAC-SHA256 under a key derived from the secret access key. Pure: no I/O, no clock.

It signs the request as it is sent: the path and query as they go on the wire (AWS canonicalises
them on its side from what it receives), the Host header's value, the other headers to sign and
the payload's hash. Every service but S3 normalises the path (dot segments and empty ones
removed) and encodes it once more; S3 signs each segment's bytes encoded once
(:meth:`Scope.for_service`). Held to AWS's own test suite (tests/proxy/credentials/
aws_sigv4_vectors).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote_to_bytes

from gatehouse_contract.aws_keys import AwsKeys

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_TERMINATOR = "aws4_request"
# Sequential spaces (and a folded line's break) are one space in a canonical header value.
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class SigningRequest:
    """A request as it is sent, what its signature covers."""

    method: str
    host: str  # the Host header's value as sent
    path: str  # as sent: percent-encoded, "/" at least
    query: str  # as sent, without "?"
    headers: Sequence[tuple[str, str]]  # the other headers to sign, as sent
    payload_hash: str  # hex SHA-256 of the body, or UNSIGNED_PAYLOAD


@dataclass(frozen=True, slots=True)
class Scope:
    """What a signature is for (region, service) and the service's rules for it."""

    region: str
    service: str
    # Dot segments and empty ones removed, and each segment as sent encoded once more (every
    # service but S3); else each segment's bytes encoded once.
    normalize_path: bool = True
    # The payload's hash sent (and signed) in X-Amz-Content-Sha256: S3 requires it, and it says
    # UNSIGNED-PAYLOAD to any service.
    content_sha256_header: bool = False
    # Temporary keys' X-Amz-Security-Token signed (the rule); some services want it sent unsigned.
    sign_session_token: bool = True

    @classmethod
    def for_service(cls, region: str, service: str) -> Scope:
        """The rules the proxy signs with for ``service``."""
        return cls(region, service, normalize_path=service != "s3", content_sha256_header=True)

    def credential_scope(self, day: str) -> str:
        return f"{day}/{self.region}/{self.service}/{_TERMINATOR}"


@dataclass(frozen=True, slots=True)
class Signed:
    headers: tuple[tuple[str, str], ...]  # to add to the request as it is sent
    signature: str  # hex
    canonical_request: str
    string_to_sign: str


def payload_hash(pieces: Iterable[bytes]) -> str:
    """The hex SHA-256 of a body sent in ``pieces``."""
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def _hex_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _segments_without_dots(path: str) -> list[str]:
    kept: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if kept:
                kept.pop()
            continue
        kept.append(segment)
    return kept


def canonical_path(path: str, scope: Scope) -> str:
    """The path as the canonical request has it."""
    if scope.normalize_path:
        segments = _segments_without_dots(path)
        trailing = path.endswith("/") and bool(segments)
        # "~" is unreserved; quote keeps letters, digits and "_.-~" as they are.
        encoded = "/" + "/".join(quote(segment, safe="") for segment in segments)
        return encoded + "/" if trailing else encoded
    return "/".join(quote(unquote_to_bytes(segment), safe="") for segment in path.split("/")) or "/"


def canonical_query(query: str) -> str:
    """Each parameter's name and value decoded and encoded again, sorted by name, then value."""
    parameters = []
    for pair in query.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        parameters.append(
            (quote(unquote_to_bytes(name), safe=""), quote(unquote_to_bytes(value), safe=""))
        )
    return "&".join(f"{name}={value}" for name, value in sorted(parameters))


def canonical_headers(headers: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """The canonical headers (one line each, the last ended too) and the signed headers' names:
    names in lower case and sorted, a name's values in the order sent, joined by commas, each
    trimmed and its sequential spaces made one."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.strip().lower(), []).append(_SPACES.sub(" ", value.strip()))
    names = sorted(values)
    lines = "".join(f"{name}:{','.join(values[name])}\n" for name in names)
    return lines, ";".join(names)


@functools.lru_cache(maxsize=64)
def signing_key(secret_access_key: str, day: str, region: str, service: str) -> bytes:
    """The key a day's signatures for a region and service are made with (the HMAC chain). Kept
    for a few (secret, day, region, service): it changes once a day."""
    key = hmac.digest(f"AWS4{secret_access_key}".encode(), day.encode(), "sha256")
    for part in (region, service, _TERMINATOR):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


def sign(request: SigningRequest, keys: AwsKeys, scope: Scope, when: datetime) -> Signed:
    """The headers that sign ``request`` with ``keys`` for ``scope`` at ``when``."""
    moment = when.astimezone(UTC)
    stamp = moment.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    added = [("X-Amz-Date", stamp)]
    if scope.content_sha256_header:
        added.append(("X-Amz-Content-Sha256", request.payload_hash))
    token = [("X-Amz-Security-Token", keys.session_token)] if keys.session_token else []
    signed_token = token if scope.sign_session_token else []
    headers, signed_names = canonical_headers(
        [("host", request.host), *request.headers, *added, *signed_token]
    )
    canonical_request = "\n".join(
        (
            request.method.upper(),
            canonical_path(request.path, scope),
            canonical_query(request.query),
            headers,
            signed_names,
            request.payload_hash,
        )
    )
    credential_scope = scope.credential_scope(day)
    string_to_sign = "\n".join((ALGORITHM, stamp, credential_scope, _hex_sha256(canonical_request)))
    key = signing_key(keys.secret_access_key, day, scope.region, scope.service)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"{ALGORITHM} Credential={keys.access_key_id}/{credential_scope}, "
        f"SignedHeaders={signed_names}, Signature={signature}"
    )
    return Signed(
        (*token, *added, ("Authorization", authorization)),
        signature,
        canonical_request,
        string_to_sign,
    )
