"""A connection's ``spec.tls`` compiled for the proxies: its client certificate read (a
``kubernetes.io/tls`` Secret, or sealed), checked and encrypted with the table keys, and its CA
bundle read and checked; or the reason why not, in the ``UpstreamTLSReady`` condition (which feeds
Ready: a connection whose certificate cannot be presented is answered 503, never called without
it). The connection controller compiles a saved connection's; a draft's test, its draft's.

The advisory ``ClientCertificateCurrent`` says when the certificate expires, and turns False (with
a Warning Event) once a third of its lifetime is left, when cert-manager would renew it. A
rotation is an update of the Secret: the watch (or the resync, for an unlabelled Secret) brings
it, and the proxies present the new certificate on their next connections.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

from gatehouse_contract.keyring import Encrypted
from gatehouse_contract.routes import UpstreamTls
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.upstream_tls import ClientCertificateSummary, UpstreamTlsSettings
from gatehouse_operator.keys.client_certificates import (
    CERTIFICATE_KEY,
    PRIVATE_KEY_KEY,
    TLS_SECRET_TYPE,
    CheckedCertificate,
    check_ca_bundle,
    checked_pair,
    split_sealed,
)
from gatehouse_operator.keys.credentials import CredentialProblem
from gatehouse_operator.keys.sealed_values import (
    TLS_CLIENT_CERTIFICATE,
    Scope,
    SealedValueProblem,
    SealingKeys,
)
from gatehouse_operator.kube.errors import Forbidden
from gatehouse_operator.kube.secrets import decoded, watched
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.status import Verdict

SEALED_FIELD = "tls.clientCertificate.sealed"


@dataclass
class TlsRead:
    """What compiling ``spec.tls`` found: the proxies' form (None without one, or when it cannot
    be used), the verdicts beside Ready, and the Secrets read (name, found, watched) for the
    CredentialWatched condition."""

    tls: UpstreamTls | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    advisory: list[Verdict] = field(default_factory=list)
    secrets: list[tuple[str, bool, bool]] = field(default_factory=list)
    certificate: CheckedCertificate | None = None
    # A sealed client certificate sealed again with the active sealing key, when it was sealed
    # with an older one (the status's resealedClientCertificate); "" when it is current.
    resealed: str = ""


# A client certificate's chain and key, checked (raising CredentialProblem) and encrypted.
Certify = Callable[
    [bytes, bytes, Callable[[], CheckedCertificate]], tuple[CheckedCertificate, Encrypted]
]
# A sealed client certificate that opened, sealed again with the active key ("" when it is).
Reseal = Callable[[SealingKeys, str, Scope], str]


@dataclass(frozen=True)
class Compiled:
    """The connection whose spec.tls is compiled (a draft's uid is one-off), and how its client
    certificate is checked and encrypted (the connection controller's keeps an unchanged one's,
    neither checked nor encrypted again), and how a sealed one is offered resealed (a draft's is
    not: only a saved connection's status offers it)."""

    namespace: str
    name: str
    uid: str
    origin: str
    certify: Certify
    reseal: Reseal | None = None


def once(runtime: Runtime, uid: str, origin: str) -> Certify:
    """Checks and encrypts a client certificate for one use (a draft's test): nothing is kept."""

    def certify(
        chain: bytes, key: bytes, check: Callable[[], CheckedCertificate]
    ) -> tuple[CheckedCertificate, Encrypted]:
        checked = check()
        context = UpstreamTls.context(uid, origin)
        return checked, runtime.keyring.current().encrypt(checked.pem, context)

    return certify


async def read_upstream_tls(
    runtime: Runtime, connection: Compiled, spec: ExternalConnectionSpec
) -> TlsRead:
    """``spec.tls`` compiled, its problem (if any) as a False UpstreamTLSReady."""
    origin = connection.origin
    read = TlsRead()
    settings = spec.tls
    if settings is None:
        return read
    if not origin:
        read.verdicts.append(
            Verdict(
                ConditionType.UPSTREAM_TLS_READY,
                "False",
                Reason.INVALID_BASE_URL,
                "tls is compiled only for a valid baseURL (see Accepted)",
            )
        )
        return read
    try:
        encrypted = await _client_certificate(runtime, connection, settings, read)
        bundle, count = await _ca_bundle(runtime, connection, settings, read)
    except CredentialProblem as problem:
        read.verdicts.append(
            Verdict(ConditionType.UPSTREAM_TLS_READY, "False", problem.reason, problem.message)
        )
        return read
    read.tls = UpstreamTls(
        client_certificate=encrypted, ca_bundle=bundle, system_roots=settings.system_roots
    )
    read.verdicts.append(
        Verdict(
            ConditionType.UPSTREAM_TLS_READY,
            "True",
            Reason.TLS_CONFIGURED,
            _configured(read.certificate, count, settings.system_roots),
        )
    )
    if read.certificate is not None:
        read.advisory.append(read.certificate.expiry_verdict(datetime.datetime.now(datetime.UTC)))
    return read


def _configured(certificate: CheckedCertificate | None, cas: int, system_roots: bool) -> str:
    said = (
        f"the proxy presents the client certificate {certificate.subject} (issued by "
        f"{certificate.issuer})"
        if certificate is not None
        else "no client certificate"
    )
    roots = "the system's roots" if system_roots else ""
    if cas:
        bundle = f"{cas} CA certificate{'s' if cas != 1 else ''} of tls"
        roots = f"{bundle} and {roots}" if roots else f"{bundle} alone"
    return f"{said}; the API's certificate must chain to {roots}; host names are verified"


async def _secret(
    runtime: Runtime, connection: Compiled, name: str, read: TlsRead, field_name: str
) -> tuple[dict[str, bytes], str]:
    """A Secret of the namespace, read, and its type; raises CredentialProblem when it is
    missing or not the operator's to read."""
    try:
        secret = await runtime.kube.secrets.secret(connection.namespace, name)
    except Forbidden:
        raise CredentialProblem(
            Reason.SECRET_FORBIDDEN,
            f"{field_name}: the operator may not read Secret {name!r} (HTTP 403): its "
            "ServiceAccount needs get on secrets in this namespace (see the chart's "
            "operator.watchNamespaces)",
        ) from None
    read.secrets.append((name, secret is not None, secret is not None and watched(secret)))
    if secret is None:
        raise CredentialProblem(
            Reason.SECRET_NOT_FOUND, f"{field_name}: Secret {name!r} does not exist"
        )
    return decoded(secret.data), secret.type or ""


async def _client_certificate(
    runtime: Runtime, connection: Compiled, settings: UpstreamTlsSettings, read: TlsRead
) -> Encrypted | None:
    given = settings.client_certificate
    if given is None:
        return None
    if given.secret_ref is not None:
        name = given.secret_ref.name
        field_name = "tls.clientCertificate.secretRef"
        data, type_ = await _secret(runtime, connection, name, read, field_name)
        if type_ != TLS_SECRET_TYPE:
            raise CredentialProblem(
                Reason.SECRET_WRONG_TYPE,
                f"{field_name}: Secret {name!r} is of type {type_ or 'Opaque'}; a client "
                f"certificate is read from a {TLS_SECRET_TYPE} Secret (kubectl create secret "
                "tls, or cert-manager)",
            )
        for needed in (CERTIFICATE_KEY, PRIVATE_KEY_KEY):
            if needed not in data:
                raise CredentialProblem(
                    Reason.SECRET_KEY_NOT_FOUND,
                    f"{field_name}: Secret {name!r} has no key {needed!r}",
                )
        chain, key = data[CERTIFICATE_KEY], data[PRIVATE_KEY_KEY]
        where = f"key {CERTIFICATE_KEY!r} of Secret {name!r}"
        key_where = f"key {PRIVATE_KEY_KEY!r} of Secret {name!r}"
    else:
        chain, key = _opened(runtime, connection, given.sealed or "", read)
        where, key_where = f"the chain of {SEALED_FIELD}", f"the key of {SEALED_FIELD}"
    checked, encrypted = connection.certify(
        chain, key, lambda: checked_pair(chain, key, where, key_where)
    )
    checked.current(where, datetime.datetime.now(datetime.UTC))
    read.certificate = checked
    return encrypted


def _opened(
    runtime: Runtime, connection: Compiled, sealed: str, read: TlsRead
) -> tuple[bytes, bytes]:
    """The sealed chain and key, opened for this connection's client certificate alone (and
    offered resealed when an older key opened them)."""
    keys = runtime.sealing.sealing_keys()
    if keys is None:
        raise CredentialProblem(
            Reason.SEALING_KEYS_MISSING,
            f"{SEALED_FIELD}: this installation has no sealing keys (their Secret is missing or "
            "unreadable; the operator's log says which; see the docs, concepts/sealing.md)",
        )
    scope = Scope(
        connection.namespace, connection.name, connection.origin, use=TLS_CLIENT_CERTIFICATE
    )
    try:
        plain = keys.open(sealed, scope, SEALED_FIELD)
        if connection.reseal is not None:
            read.resealed = connection.reseal(keys, sealed, scope)
    except SealedValueProblem as problem:
        raise CredentialProblem(problem.reason, problem.message) from None
    return split_sealed(plain, SEALED_FIELD)


async def _ca_bundle(
    runtime: Runtime, connection: Compiled, settings: UpstreamTlsSettings, read: TlsRead
) -> tuple[str, int]:
    """The CA bundle re-encoded and how many certificates it holds; ("", 0) without one."""
    if settings.ca_bundle is not None:
        return check_ca_bundle(settings.ca_bundle.encode(), "tls.caBundle")
    ref = settings.ca_bundle_ref
    if ref is None:
        return "", 0
    field_name = "tls.caBundleRef"
    data, _ = await _secret(runtime, connection, ref.name, read, field_name)
    if ref.key not in data:
        raise CredentialProblem(
            Reason.SECRET_KEY_NOT_FOUND, f"{field_name}: Secret {ref.name!r} has no key {ref.key!r}"
        )
    return check_ca_bundle(data[ref.key], f"key {ref.key!r} of Secret {ref.name!r}")


def certificate_summary(certificate: CheckedCertificate | None) -> ClientCertificateSummary | None:
    """What the status says of the certificate in use."""
    if certificate is None:
        return None
    return ClientCertificateSummary(
        subject=certificate.subject[:1024],
        issuer=certificate.issuer[:1024],
        not_after=f"{certificate.not_after:%Y-%m-%dT%H:%M:%SZ}",
    )
