"""A viewer assertion verified: the signed JWT (RFC 7519) an app passes beside its own credential
to say which person it acts for.

It holds when, in this order: it is a compact JWS of at most :data:`MAX_ASSERTION_CHARS`; its
``alg`` is one of :data:`ALGORITHMS` (never ``none`` or an HMAC: a public key is no shared
secret) and matches the kind of the key; its ``iss`` is an issuer the installation trusts; its
signature verifies with that issuer's key (by ``kid``); its ``aud`` names the issuer's audience;
``exp``, ``iat`` (and ``nbf``, if given) hold within :data:`~.trust.LEEWAY_SECONDS`, and it lives
no longer than the installation's maximum; its :data:`APP_CLAIM` is the app whose token the
request carries (an assertion minted for another app is no use through this one); its ``sub``
(and ``email``, if given) are short printable text, as they are sent on in headers. The first
rule it breaks is the refusal's message, naming the rule: ``signature``, ``issuer``,
``audience``, ``expired``, ``lifetime``, ``app``...; never the assertion itself.

A verification is one RSA or ECDSA check, some tens of microseconds (docs/security/viewers.md
has the figures): done on the event loop, as a thread hop would cost more. An app sends its
viewer's assertion with every request, so a worker remembers the assertions it verified (by
their SHA-256 digest, never the assertion itself; at most :data:`MOST_REMEMBERED`): one sent
again is answered from memory while a full verification would answer the same, that is until its
``exp`` (with the leeway) and while the issuer's keys it verified with are held fresh (a set read
again, or due to be, verifies it again); only through the app it names. Refusals are never
remembered.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from gatehouse_contract.header_names import VIEWER_ASSERTION_HEADER
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.viewers.issuer_keys import IssuerKeys, Load
from gatehouse_proxy.viewers.keys import MAX_KID_CHARS, Key, b64url
from gatehouse_proxy.viewers.trust import LEEWAY_SECONDS, TrustedIssuer, ViewerSettings

MAX_ASSERTION_CHARS = 8 * 1024
# The claim that names the app the assertion was minted for: its key, namespace/Kind/name.
APP_CLAIM = "gatehouse.dev/app"
MAX_SUBJECT_CHARS = 256
MAX_EMAIL_CHARS = 320
# What a header value may hold: printable ASCII, spaces only between words.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")
# Assertions verified, remembered per worker: a verification was a fifth of a per-viewer fetch's
# CPU at 32 connections (docs/development/performance.md, "A viewer's own grant against client
# credentials").
MOST_REMEMBERED = 4096


@dataclass(frozen=True, slots=True)
class Viewer:
    """The person an assertion names, as its issuer named them."""

    id: str  # the assertion's sub
    email: str  # its email; "" when it has none
    issuer: str  # its iss
    # Whose grants are this person's (gatehouse_proxy.credentials.fleet_grants): the issuer and
    # the subject, so that two issuers' subjects of one name are two people; never the shared
    # account's name. Made once (a remembered assertion's viewer serves many requests).
    owner: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "owner", json.dumps([self.issuer, self.id]))


@dataclass(frozen=True, slots=True)
class _Algorithm:
    kind: type[rsa.RSAPublicKey] | type[ec.EllipticCurvePublicKey]
    hash: Callable[[], hashes.HashAlgorithm]
    pss: bool = False
    curve: str = ""  # an EC algorithm's one curve


ALGORITHMS: Mapping[str, _Algorithm] = {
    "RS256": _Algorithm(rsa.RSAPublicKey, hashes.SHA256),
    "RS384": _Algorithm(rsa.RSAPublicKey, hashes.SHA384),
    "RS512": _Algorithm(rsa.RSAPublicKey, hashes.SHA512),
    "PS256": _Algorithm(rsa.RSAPublicKey, hashes.SHA256, pss=True),
    "PS384": _Algorithm(rsa.RSAPublicKey, hashes.SHA384, pss=True),
    "ES256": _Algorithm(ec.EllipticCurvePublicKey, hashes.SHA256, curve="secp256r1"),
    "ES384": _Algorithm(ec.EllipticCurvePublicKey, hashes.SHA384, curve="secp384r1"),
}


def _refused(rule: str, detail: str) -> ProxyError:
    return ProxyError("viewer_assertion_invalid", f"viewer assertion refused: {rule}: {detail}")


def _json_object(segment: str, part: str) -> dict[str, object]:
    try:
        value = json.loads(b64url(segment))
    except (ValueError, RecursionError):
        raise _refused("format", f"its {part} is not base64url JSON") from None
    if not isinstance(value, dict):
        raise _refused("format", f"its {part} is not a JSON object")
    return value


def _instant(claims: Mapping[str, object], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    refused = _refused("claims", f"{name} must be a number of seconds since the epoch")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refused
    try:
        # An integer past a float's range (10**400) overflows here, not silently later.
        instant = float(value)
    except OverflowError:
        raise refused from None
    if not math.isfinite(instant):
        raise refused
    return instant


def _text(claims: Mapping[str, object], name: str, most: int, *, required: bool) -> str:
    value = claims.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or len(value) > most or not _HEADER_SAFE.fullmatch(value):
        raise _refused("claims", f"{name} must be printable ASCII of at most {most} characters")
    return value


def _verifies(algorithm: _Algorithm, key: Key, signed: bytes, signature: bytes) -> bool:
    public = key.key
    try:
        if isinstance(public, rsa.RSAPublicKey):
            chosen = algorithm.hash()
            pad: padding.AsymmetricPadding = (
                padding.PSS(padding.MGF1(chosen), chosen.digest_size)
                if algorithm.pss
                else padding.PKCS1v15()
            )
            public.verify(signature, signed, pad, chosen)
        else:
            # JWS gives ECDSA's r and s as two big-endian numbers of the curve's size (RFC 7518
            # 3.4); cryptography takes DER.
            size = (public.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            r, s = signature[:size], signature[size:]
            der = encode_dss_signature(int.from_bytes(r, "big"), int.from_bytes(s, "big"))
            public.verify(der, signed, ec.ECDSA(algorithm.hash()))
    except InvalidSignature:
        return False
    return True


def _fits(algorithm: _Algorithm, alg: str, key: Key) -> bool:
    """Whether ``key`` may check an ``alg`` signature: its kind (and curve), and its own alg
    where the set gives one."""
    if not isinstance(key.key, algorithm.kind) or key.alg not in ("", alg):
        return False
    return not algorithm.curve or (
        isinstance(key.key, ec.EllipticCurvePublicKey) and key.key.curve.name == algorithm.curve
    )


@dataclass(frozen=True, slots=True)
class _Remembered:
    """An assertion verified: for which app, whom it names, until when (its ``exp``), and the
    issuer's keys it verified with, as read when (``IssuerKeys.fresh_since``)."""

    app: str
    viewer: Viewer
    expires: float
    keys: IssuerKeys
    keys_read_at: float


class Verifier:
    """Every trusted issuer's keys, and the rules an assertion is held to."""

    def __init__(
        self,
        settings: ViewerSettings,
        loader: Callable[[TrustedIssuer], Load],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_seconds = settings.max_assertion_seconds
        self._clock = clock
        self._issuers = {
            issuer.issuer: (issuer, IssuerKeys(issuer.issuer, loader(issuer)))
            for issuer in settings.issuers
        }
        self._remembered: dict[bytes, _Remembered] = {}

    def keys(self, issuer: str) -> IssuerKeys:
        return self._issuers[issuer][1]

    async def viewer(self, sent: Sequence[str], app: str) -> Viewer:
        """The viewer of a request that needs one, from the assertions it ``sent`` (one)."""
        if not sent:
            raise ProxyError(
                "viewer_assertion_missing",
                "this connection needs the viewer's identity: send the viewer's assertion (a "
                f"signed JWT) as {VIEWER_ASSERTION_HEADER}",
            )
        if len(sent) > 1:
            raise _refused("format", f"send one {VIEWER_ASSERTION_HEADER} header, not several")
        return await self.verified(sent[0].strip(), app)

    async def verified(self, assertion: str, app: str) -> Viewer:
        """The viewer ``assertion`` names, for a request whose token identified ``app``; raises
        viewer_assertion_invalid (or viewer_keys_unavailable) naming the rule it breaks."""
        if len(assertion) > MAX_ASSERTION_CHARS:
            raise _refused("format", f"it is over {MAX_ASSERTION_CHARS} characters")
        digest = hashlib.sha256(assertion.encode("utf-8", "surrogatepass")).digest()
        remembered = self._remembered.get(digest)
        if remembered is not None and self._holds(remembered, app):
            return remembered.viewer
        parts = assertion.split(".")
        if len(parts) != 3 or not all(_SEGMENT.fullmatch(part) for part in parts):
            raise _refused("format", "it is not a compact JWS (three base64url parts)")
        header = _json_object(parts[0], "header")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise _refused(
                "signature",
                f"the algorithm must be one of {', '.join(ALGORITHMS)} (never none or HS*)",
            )
        algorithm = ALGORITHMS[alg]
        if "crit" in header:
            raise _refused("format", "it names critical extensions (crit), which are not read")
        kid = header.get("kid", "")
        if not isinstance(kid, str) or len(kid) > MAX_KID_CHARS:
            raise _refused("format", "its kid is not a short string")
        claims = _json_object(parts[1], "payload")
        iss = claims.get("iss")
        trusted = self._issuers.get(iss) if isinstance(iss, str) else None
        if trusted is None:
            trusts = "" if self._issuers else " (it trusts none: viewers.issuers)"
            raise _refused("issuer", f"its iss is not an issuer the installation trusts{trusts}")
        issuer, keys = trusted
        candidates = [key for key in await keys.find(kid) if _fits(algorithm, alg, key)]
        if not candidates:
            raise _refused("signature", f"the issuer has no {alg} key of the assertion's kid")
        if not kid and len(candidates) > 1:
            raise _refused("signature", "it names no kid, and the issuer has several keys")
        try:
            signature = b64url(parts[2])
        except ValueError:
            raise _refused("format", "its signature is not base64url") from None
        signed = f"{parts[0]}.{parts[1]}".encode("ascii")
        if not _verifies(algorithm, candidates[0], signed, signature):
            raise _refused("signature", "it does not verify with the issuer's key")
        expires = self._check_claims(claims, issuer, app)
        viewer = Viewer(
            _text(claims, "sub", MAX_SUBJECT_CHARS, required=True),
            _text(claims, "email", MAX_EMAIL_CHARS, required=False),
            issuer.issuer,
        )
        read_at = keys.fresh_since()
        if read_at is not None:
            self._remember(digest, _Remembered(app, viewer, expires, keys, read_at))
        return viewer

    def _holds(self, remembered: _Remembered, app: str) -> bool:
        """Whether a full verification would answer as ``remembered`` did, now, for ``app``:
        the same app, ``exp`` not passed, the same keys held fresh (the other rules of time
        only get easier as it passes)."""
        return (
            remembered.app == app
            and self._clock() <= remembered.expires + LEEWAY_SECONDS
            and remembered.keys.fresh_since() == remembered.keys_read_at
        )

    def _remember(self, digest: bytes, remembered: _Remembered) -> None:
        if len(self._remembered) >= MOST_REMEMBERED:
            now = self._clock()
            live = [
                (key, each)
                for key, each in self._remembered.items()
                if now <= each.expires + LEEWAY_SECONDS
            ]
            # Still half full of live ones (that many viewers at once): the older half is let
            # go, so that a full memory is not scanned again at every request.
            if len(live) >= MOST_REMEMBERED // 2:
                live = live[len(live) // 2 :]
            self._remembered = dict(live)
        self._remembered[digest] = remembered

    def _check_claims(self, claims: Mapping[str, object], issuer: TrustedIssuer, app: str) -> float:
        """The assertion's ``exp``, once its claims hold for ``app``."""
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if issuer.audience not in audiences:
            raise _refused("audience", f"its aud does not name {issuer.audience!r}")
        now = self._clock()
        expires, issued = _instant(claims, "exp"), _instant(claims, "iat")
        not_before = _instant(claims, "nbf")
        if expires is None or issued is None:
            raise _refused("claims", "exp and iat are required")
        if now > expires + LEEWAY_SECONDS:
            raise _refused("expired", "its exp has passed")
        if issued > now + LEEWAY_SECONDS or (
            not_before is not None and not_before > now + LEEWAY_SECONDS
        ):
            raise _refused("not yet valid", "its iat or nbf is in the future")
        most = self.max_seconds
        if expires - issued > most or expires - now > most + LEEWAY_SECONDS:
            raise _refused("lifetime", f"it lives longer than the installation's {most:g} seconds")
        if claims.get(APP_CLAIM) != app:
            raise _refused("app", f"its {APP_CLAIM} is not the app whose token was sent")
        return expires
