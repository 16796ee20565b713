"""ExternalConnection: compile each connection into a route, and say whether it works.

Conditions: ``Accepted`` (the spec makes a usable origin), ``CredentialReady`` (the Secret exists
and holds a usable secret, now encrypted for the proxies) and ``Ready`` (every serving proxy
replica routes it; see rollout). A connection that is not Ready stays in the routing table marked
unavailable, so the proxy answers 503 rather than calling upstream with stale or missing
credentials.

``CredentialWatched`` (with a Secret only) says whether the operator's watch sees the Secret: it
watches only Secrets labelled ``gatehouse.dev/credential=true``. An unlabelled one is still read,
and read again every minute, so it works, but a rotation takes up to that minute to arrive; the
condition (and its Event) says how to label it. It does not feed Ready.

``CachePurged`` (with the annotation ``gatehouse.dev/cache-purged-at`` only) says since when the
cache's answers are served: the annotation's time is the cache's epoch on the route. One that is
not a time turns the cache off (the connection works, uncached) until it is. Advisory too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf
from pydantic import ValidationError

from gatehouse_contract.keyring import Encrypted
from gatehouse_contract.routes import Credential, EntryKind
from gatehouse_operator.api.auth_kinds import kind_of
from gatehouse_operator.api.cache_purge import purge_problem
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import (
    EXTERNAL_CONNECTION,
    ExternalConnectionSpec,
    ExternalConnectionStatus,
)
from gatehouse_operator.api.meta import GROUP, VERSION, spec_error
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.connections.origin import (
    OriginError,
    normalise_origin,
    sealed_scope,
    token_url_of,
)
from gatehouse_operator.connections.upstream_tls import (
    SEALED_FIELD,
    Compiled,
    TlsRead,
    certificate_summary,
    read_upstream_tls,
)
from gatehouse_operator.controllers import linked_apps
from gatehouse_operator.keys.client_certificates import CheckedCertificate
from gatehouse_operator.keys.credentials import (
    CredentialProblem,
    Found,
    check_role,
    sealed_in,
    secret_in,
    verdict_for,
)
from gatehouse_operator.keys.sealed_values import FIELD, Scope, SealingKeys
from gatehouse_operator.kube import WATCHED_SELECTOR
from gatehouse_operator.kube.errors import Forbidden
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime, forget_resource
from gatehouse_operator.status import Verdict, ready
from gatehouse_operator.table import budget
from gatehouse_operator.table.connection_route import route_for
from gatehouse_operator.table.rollout import Routed

PLURAL = EXTERNAL_CONNECTION.plural
_UNSET = object()


def watched_verdict(secret: str, found: bool, watched: bool) -> Verdict:
    if watched:
        at_once = f"changes to Secret {secret!r} reach the proxy at once"
        return Verdict(ConditionType.CREDENTIAL_WATCHED, "True", Reason.WATCHED, at_once)
    fix = f"kubectl label secret {secret} {WATCHED_SELECTOR}"
    if not found:
        return Verdict(
            ConditionType.CREDENTIAL_WATCHED,
            "False",
            Reason.SECRET_NOT_FOUND,
            f"create Secret {secret!r} labelled {WATCHED_SELECTOR} and it is seen at once; "
            "unlabelled, within a minute",
        )
    return Verdict(
        ConditionType.CREDENTIAL_WATCHED,
        "False",
        Reason.SECRET_NOT_LABELLED,
        f"Secret {secret!r} lacks the label {WATCHED_SELECTOR}: it is read every minute, so a "
        f"rotation takes up to a minute to reach the proxy; to see it at once: {fix}",
    )


def cache_purge(connection: Resource) -> tuple[str | None, list[Verdict]]:
    """The cache's epoch (the last purge's time, "" for none; None, the cache off, when the
    annotation is not a time), and the advisory CachePurged verdict when it is set."""
    purged_at = connection.cache_purged_at
    if not purged_at:
        return "", []
    problem = purge_problem(purged_at)
    if problem:
        off = f"{problem}; the cache is off until it is: every request reaches the API"
        return None, [Verdict(ConditionType.CACHE_PURGED, "False", Reason.INVALID_PURGE_TIME, off)]
    purged = f"answers cached before {purged_at} are never served again"
    return purged_at, [Verdict(ConditionType.CACHE_PURGED, "True", Reason.PURGED, purged)]


def watched_of(read: CredentialRead) -> list[Verdict]:
    """The advisory verdicts of reading the credential, with one CredentialWatched for every
    Secret the connection reads (its auth secret's, its TLS Secrets'): the first that the watch
    does not see, else the auth secret's (or the first TLS Secret's) saying it sees them."""
    watched = [v for v in read.advisory if v.type == ConditionType.CREDENTIAL_WATCHED]
    watched += [watched_verdict(*seen) for seen in read.tls.secrets]
    others = [v for v in read.advisory if v.type != ConditionType.CREDENTIAL_WATCHED]
    unseen = [v for v in watched if not v.ok]
    return [*others, *(unseen or watched)[:1]]


def compiled(runtime: Runtime, connection: Resource, origin: str) -> Compiled:
    """The connection as its spec.tls is compiled: an unchanged client certificate is neither
    checked nor encrypted again (runtime.encrypter), so the proxies keep the TLS context made
    for it; a sealed one is resealed once per value and active key (runtime.resealer)."""

    def certify(
        chain: bytes, key: bytes, check: Callable[[], CheckedCertificate]
    ) -> tuple[CheckedCertificate, Encrypted]:
        return runtime.encrypter.client_certificate(
            chain, key, check, connection_uid=connection.uid, origin=origin
        )

    def reseal(keys: SealingKeys, sealed: str, scope: Scope) -> str:
        return runtime.resealer.resealed(connection.uid, keys, sealed, scope, SEALED_FIELD)

    return Compiled(connection.namespace, connection.name, connection.uid, origin, certify, reseal)


async def reconcile(runtime: Runtime, connection: Resource, secret_data: Any = _UNSET) -> None:
    """Compiles the connection, publishes the table, writes status. Safe to repeat.

    ``secret_data`` is the referenced Secret's, as the watch delivered it; unset, it is read.
    """
    key = connection.key
    spec = await parsed_spec(runtime, connection, key)
    if spec is None:
        return
    verdicts, origin, token_url = accepted(runtime, spec)
    read = await read_credential(runtime, connection, spec, origin, token_url, secret_data)
    credential = encrypt_for_proxies(runtime, connection, spec, read, origin, token_url)
    verdicts.append(verdict_for(read.problem, spec.auth))
    read.tls = await read_upstream_tls(runtime, compiled(runtime, connection, origin), spec)
    verdicts += read.tls.verdicts
    await publish_route(runtime, connection, key, spec, origin, credential, verdicts, read)


async def parsed_spec(
    runtime: Runtime, connection: Resource, key: str
) -> ExternalConnectionSpec | None:
    """The connection's spec, or None once an invalid one is out of the table and reported."""
    try:
        return ExternalConnectionSpec.model_validate(connection.spec)
    except ValidationError as error:
        verdict = Verdict(ConditionType.ACCEPTED, "False", Reason.INVALID_SPEC, spec_error(error))
        runtime.routes.drop_connection(key)
        runtime.channel.schedule_flush()
        await runtime.rollout.report_not_ready(
            EXTERNAL_CONNECTION,
            connection,
            [verdict, ready([verdict], "", "")],
            invalid_status(connection),
            key,
        )
        return None


def invalid_status(connection: Resource) -> ExternalConnectionStatus:
    """An invalid connection's status: no secret, and no offer to reseal one (an offer made for
    an earlier value must not be written over a changed file's)."""
    if "resealedClientCertificate" in connection.status:
        return ExternalConnectionStatus(
            has_secret=False, resealed_secret="", resealed_client_certificate=""
        )
    return ExternalConnectionStatus(has_secret=False, resealed_secret="")


def accepted(runtime: Runtime, spec: ExternalConnectionSpec) -> tuple[list[Verdict], str, str]:
    """The Accepted verdict, the canonical origin requests are pinned to, and the token URL
    (each "" when not valid)."""
    verdicts: list[Verdict] = []
    origin = ""
    try:
        origin = normalise_origin(spec.base_url, allow_http=runtime.settings.allow_http)
        verdicts.append(
            Verdict(
                ConditionType.ACCEPTED, "True", Reason.VALID, f"requests are pinned to {origin}"
            )
        )
    except OriginError as error:
        verdicts.append(
            Verdict(ConditionType.ACCEPTED, "False", Reason.INVALID_BASE_URL, str(error))
        )
    token_url = ""
    if origin:
        try:
            token_url = token_url_of(spec.auth, allow_http=runtime.settings.allow_http)
        except OriginError as error:
            verdicts[0] = Verdict(
                ConditionType.ACCEPTED,
                "False",
                Reason.INVALID_TOKEN_URL,
                f"auth.{kind_of(spec.auth).section}.{error}",
            )
    return verdicts, origin, token_url


@dataclass
class CredentialRead:
    """What reading a connection's secret found, and why it cannot be used if it cannot."""

    problem: CredentialProblem | None
    advisory: list[Verdict]  # beside Ready, not part of it
    found: Found | None
    resealed: str
    secret_data: Any
    # spec.tls compiled (its client certificate and CAs).
    tls: TlsRead = field(default_factory=TlsRead)


async def read_credential(
    runtime: Runtime,
    connection: Resource,
    spec: ExternalConnectionSpec,
    origin: str,
    token_url: str,
    secret_data: Any,
) -> CredentialRead:
    """The connection's sealed value opened, or its Secret read (unless the watch delivered it)."""
    namespace = connection.namespace
    ref = spec.auth.secret_ref
    problem: CredentialProblem | None = None
    advisory: list[Verdict] = []  # beside Ready, not part of it
    found: Found | None = None
    resealed = ""
    try:
        check_role(spec.auth, namespace, runtime.settings.aws_roles)
    except CredentialProblem as caught:
        problem = caught
    if spec.auth.sealed_secret is not None and not origin:
        problem = CredentialProblem(
            Reason.INVALID_BASE_URL, f"{FIELD} opens only for a valid baseURL (see Accepted)"
        )
    elif spec.auth.sealed_secret is not None:
        scope = sealed_scope(namespace, connection.name, origin, spec.auth, token_url)
        keys = runtime.sealing.sealing_keys()
        try:
            found = sealed_in(spec.auth, keys, scope)
        except CredentialProblem as caught:
            problem = caught
        if found is not None and keys is not None:
            resealed = runtime.resealer.resealed(
                connection.uid, keys, spec.auth.sealed_secret, scope
            )
    if ref is None:
        secret_data = None
    elif secret_data is _UNSET:
        try:
            secret_data, watched = await runtime.kube.secrets.watched_secret(namespace, ref.name)
        except Forbidden:  # anything else is retried: the API server may be away for a moment
            secret_data = None
            problem = CredentialProblem(
                Reason.SECRET_FORBIDDEN,
                f"the operator may not read Secret {ref.name!r} (HTTP 403): its ServiceAccount "
                "needs get on secrets in this namespace (see the chart's operator.watchNamespaces)",
            )
        else:
            advisory.append(watched_verdict(ref.name, secret_data is not None, watched))
    else:
        advisory.append(watched_verdict(ref.name, True, True))
    return CredentialRead(problem, advisory, found, resealed, secret_data)


def encrypt_for_proxies(
    runtime: Runtime,
    connection: Resource,
    spec: ExternalConnectionSpec,
    read: CredentialRead,
    origin: str,
    token_url: str,
) -> Credential:
    """The credential encrypted for the proxies; an empty one, and ``read.problem`` saying why,
    when there is none to encrypt."""
    found = read.found
    credential = Credential(type=spec.auth.type)
    if read.problem is None:
        try:
            found = found or secret_in(spec.auth, read.secret_data)
            credential = runtime.encrypter.encrypt(
                spec.auth,
                found,
                connection_uid=connection.uid,
                origin=origin,
                token_url=token_url,
            )
        except CredentialProblem as caught:
            read.problem = caught
    return credential


async def publish_route(
    runtime: Runtime,
    connection: Resource,
    key: str,
    spec: ExternalConnectionSpec,
    origin: str,
    credential: Credential,
    verdicts: list[Verdict],
    read: CredentialRead,
) -> None:
    """Puts the connection's route in the table (or leaves it out when it does not fit the
    table's budget), and reports its status once the proxies route it."""
    epoch, purged = cache_purge(connection)
    advisory = [*watched_of(read), *read.tls.advisory, *purged]
    resealed = read.resealed
    routed = f"the proxy routes requests to {origin}"
    summary = ready(verdicts, "Routed", routed)
    unavailable = "" if summary.ok else f"the connection is not ready: {summary.message}"

    route = route_for(
        key, connection.uid, spec, origin, credential, unavailable, epoch, read.tls.tls
    )
    size = budget.entry_size(route)
    total = runtime.routes.budget.total_with("connection", key, size)
    refusal = budget.check(route, size, total, ConditionType.ACCEPTED)
    # The certificate given (so written, null clearing it) only where one is named or was
    # shown: other connections' status stays as it was.
    named = spec.tls is not None and spec.tls.client_certificate is not None
    fields = ExternalConnectionStatus(
        origin=origin, has_secret=credential.encrypted is not None, resealed_secret=resealed
    )
    if named or "clientCertificate" in connection.status:
        fields = ExternalConnectionStatus(
            origin=origin,
            has_secret=credential.encrypted is not None,
            resealed_secret=resealed,
            client_certificate=certificate_summary(read.tls.certificate),
            resealed_client_certificate=read.tls.resealed,
        )
    if refusal is not None:
        # Left out of the table (its apps report the link broken); Accepted says what to shrink.
        runtime.routes.drop_connection(key)
        runtime.channel.schedule_flush()
        verdicts[0] = refusal
        summary = ready(verdicts, "", "")
        reported = [*verdicts, summary, *advisory]
        await runtime.rollout.report_not_ready(
            EXTERNAL_CONNECTION, connection, reported, fields, key
        )
        await linked_apps.refresh_statuses(runtime, runtime.routes.indexes.apps_linking(key))
        return
    runtime.routes.put_connection(route, spec, connection, size)
    runtime.channel.schedule_flush()
    if summary.ok:
        entry: tuple[EntryKind, str] = ("connection", key)
        await runtime.rollout.report(
            Routed(
                EXTERNAL_CONNECTION, connection, [*verdicts, *advisory], fields, key, entry, routed
            )
        )
    else:
        reported = [*verdicts, summary, *advisory]
        await runtime.rollout.report_not_ready(
            EXTERNAL_CONNECTION, connection, reported, fields, key
        )
    await linked_apps.refresh_statuses(runtime, runtime.routes.indexes.apps_linking(key))


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def connection_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reconcile(memo.runtime, resource_of(body))


async def forget(runtime: Runtime, connection: Resource) -> None:
    """Takes a deleted connection out of the table; its apps now report the link broken."""
    key = connection.key
    runtime.routes.drop_connection(key)
    forget_resource(runtime, key, connection.uid)
    runtime.channel.schedule_flush()
    await linked_apps.refresh_statuses(runtime, runtime.routes.indexes.apps_linking(key))


async def purge_seen(runtime: Runtime, connection: Resource) -> None:
    """Reconciles a routed connection whose purge annotation is not the one its route was made
    with. kopf's update handlers never see it: kopf compares no annotation under its own
    storage's prefix (gatehouse.dev/)."""
    held = runtime.routes.connection_resource(connection.key)
    if held is not None and held.cache_purged_at != connection.cache_purged_at:
        await reconcile(runtime, connection)


# Deletions are seen on the watch, not with an on.delete handler: that would need a finalizer on
# every connection, and a namespace could not be deleted while the operator is not running.
@kopf.on.event(GROUP, VERSION, PLURAL)
async def connection_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    if event.get("type") == "DELETED":
        await forget(memo.runtime, resource_of(body))
    elif event.get("type") == "MODIFIED":
        await purge_seen(memo.runtime, resource_of(body))
