"""Test this draft: a connection that is not saved, tried through a proxy replica as if it were.

The draft is checked by the API server as the caller, with a dry-run create (or replace, for an
edit): RBAC, the schema's rules and the admission webhook decide, exactly as for the real apply,
and the answer carries the defaults the API server fills in. It is then compiled into a route
the way the connection controller compiles a saved one, its credential encrypted with the keyring
under a one-off identity, and sent with the request on the table channel. The replica uses the
route for that request alone. Nothing of the draft is stored: no ExternalConnection, no Secret,
no ConnectionTest, no table entry, no cached access token.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from pydantic import JsonValue, ValidationError

from gatehouse_contract.connection_tests import ReplicaTestRequest
from gatehouse_operator.access.as_user import AsUser, UserObject, refusal
from gatehouse_operator.api.auth_kinds import kind_of
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION, ExternalConnectionSpec
from gatehouse_operator.api.connection_document import ConnectionSpecDocument
from gatehouse_operator.api.meta import spec_error
from gatehouse_operator.connections.models import (
    DraftTestOutcome,
    DraftTestRequest,
    answer_shown,
)
from gatehouse_operator.connections.origin import OriginError, normalise_origin, token_url_of
from gatehouse_operator.connections.testing import (
    Finished,
    Waiting,
    ask,
    connection_secret,
    result,
    secret_texts,
)
from gatehouse_operator.connections.upstream_tls import Compiled, once, read_upstream_tls
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.credentials import (
    CredentialProblem,
    Found,
    check_role,
    encrypt_credential,
    web_identity_of,
)
from gatehouse_operator.kube.errors import ApiError, Cause
from gatehouse_operator.kube.manifests import Manifest, Metadata
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.table import budget
from gatehouse_operator.table.connection_route import route_for

# Not a Kubernetes name, so a draft's routing key can never be a saved connection's.
DRAFT_NAME = "~draft"


class DraftRefused(GatehouseError):
    """The API server refused the draft as the caller; its status, message and field causes
    travel on."""

    def __init__(self, status: int, message: str, causes: Sequence[Cause] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.causes = causes


def manifest(
    name: str,
    spec: ConnectionSpecDocument | dict[str, JsonValue],
    resource_version: str = "",
    namespace: str = "",
) -> Manifest:
    """The ExternalConnection that would be applied: the wizard's spec, or a draft's as sent;
    ``namespace`` for a document to apply elsewhere (the API call names its own)."""
    metadata = Metadata(
        name=name, namespace=namespace or None, resource_version=resource_version or None
    )
    return Manifest(EXTERNAL_CONNECTION, metadata, spec)


async def apply(
    kube: AsUser, namespace: str, wanted: Manifest, *, replaces: bool, dry_run: bool = False
) -> UserObject:
    """Creates the connection, or replaces it (``wanted`` carries the resourceVersion read), as
    the caller; the object as stored, or as it would be in a dry run."""
    body = wanted.body()
    if replaces:
        return await kube.replace_custom(EXTERNAL_CONNECTION, namespace, body, dry_run=dry_run)
    return await kube.create_custom(EXTERNAL_CONNECTION, namespace, body, dry_run=dry_run)


async def checked_spec(
    kube: AsUser, namespace: str, draft: DraftTestRequest
) -> ExternalConnectionSpec | DraftTestOutcome:
    """The draft's spec as the API server would store it, after a dry run as the caller; or the
    draft test's outcome when that spec is not one the operator accepts."""
    try:
        version = ""
        if draft.replaces:
            current = await kube.get_custom(EXTERNAL_CONNECTION, namespace, draft.name)
            version = current.metadata.resource_version
        wanted = manifest(draft.name, draft.spec, version)
        stored = await apply(kube, namespace, wanted, replaces=draft.replaces, dry_run=True)
    except ApiError as error:
        raise DraftRefused(error.status, refusal(error), error.causes) from None
    try:
        return ExternalConnectionSpec.model_validate(stored.spec)
    except ValidationError as error:
        return _failed(Reason.INVALID_SPEC, spec_error(error))


def _failed(reason: str, message: str) -> DraftTestOutcome:
    return DraftTestOutcome(passed=False, reason=reason, message=message)


async def try_draft(
    runtime: Runtime, namespace: str, draft: DraftTestRequest, spec: ExternalConnectionSpec
) -> DraftTestOutcome:
    """Runs ``draft.request`` against the draft, ``spec`` as checked_spec gave it."""
    method = draft.request.method
    if method not in spec.allowed_methods:
        allowed = ", ".join(spec.allowed_methods)
        return _failed(
            Reason.METHOD_NOT_ALLOWED, f"{method} is not among allowedMethods ({allowed})"
        )
    try:
        origin = normalise_origin(spec.base_url, allow_http=runtime.settings.allow_http)
    except OriginError as error:
        return _failed(Reason.INVALID_BASE_URL, str(error))
    try:
        token_url = token_url_of(spec.auth, allow_http=runtime.settings.allow_http)
    except OriginError as error:
        return _failed(Reason.INVALID_TOKEN_URL, f"auth.{kind_of(spec.auth).section}.{error}")
    if draft.secret is not None and spec.auth.type == "none":
        return _failed(Reason.SECRET_NOT_USED, "secret: auth.type none takes no secret")
    if draft.secret is not None and web_identity_of(spec.auth) is not None:
        return _failed(
            Reason.SECRET_NOT_USED,
            "secret: awsSigV4 with webIdentity signs with the role's keys and takes no secret",
        )
    uid = f"draft-{secrets.token_hex(8)}"
    try:
        check_role(spec.auth, namespace, runtime.settings.aws_roles)
        found = (
            Found(draft.secret.encode(), "secret")
            if draft.secret is not None
            else await connection_secret(runtime, namespace, draft.name, spec)
        )
        credential = encrypt_credential(
            spec.auth,
            found,
            keyring=runtime.keyring.current(),
            connection_uid=uid,
            origin=origin,
            token_url=token_url,
        )
    except CredentialProblem as problem:
        return _failed(problem.reason, problem.message)
    # Its TLS as a saved connection's is compiled, its client certificate encrypted for this
    # test alone.
    draft_tls = Compiled(namespace, draft.name, uid, origin, once(runtime, uid, origin))
    tls = await read_upstream_tls(runtime, draft_tls, spec)
    refused = next((verdict for verdict in tls.verdicts if not verdict.ok), None)
    if refused is not None:
        return _failed(refused.reason, refused.message)
    # A draft's test asks the API itself: no cached answer stands in for it.
    route = route_for(f"{namespace}/{DRAFT_NAME}", uid, spec, origin, credential, "", None, tls.tls)
    size = budget.entry_size(route)
    too_large = budget.check(route, size, size, ConditionType.PASSED)
    if too_large is not None:
        return _failed(too_large.reason, too_large.message)
    request = ReplicaTestRequest(
        connection=route.key,
        method=method,
        path=draft.request.path,
        body=draft.request.body,
        draft=route,
    )
    try:
        answer = await ask(runtime, request, within=spec.limits.timeout_seconds + 5)
    except Finished as finished:
        return _failed(finished.verdict.reason, finished.verdict.message)
    except Waiting as waiting:
        return _failed(waiting.reason, waiting.message)
    value = found.value if found else None
    outcome = await result(answer, method, draft.request.path, secret_texts(spec, value))
    return DraftTestOutcome(
        passed=outcome.passed,
        reason=outcome.verdict.reason,
        message=outcome.verdict.message,
        response=answer_shown(outcome.response),
    )
