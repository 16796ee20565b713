"""Admission: the link policy (and, for each link allowed, the warning of what it lets the app do);
connections that would send a Secret's value for someone who may not read it (see
gatehouse_operator.access.secret_use); ConnectionTests of a connection the requester may not see,
with a method the connection refuses, or whose path gives a credential-like key a value (see
gatehouse_operator.connections.samples.typed); and ProjectConfigs: a valid file (unknown keys
refused whatever the client asked for, as the CRD keeps them), and one project file (ProjectConfig
that is not a preview) per namespace; SignInRequests that state a requester other than the user
creating them, or of a user who has ``MAX_PENDING_PER_USER`` waiting already.

Validating webhooks with failure policy Fail, decided with the requesting user's identity (the
AdmissionReview's userInfo) through SubjectAccessReviews. The configurations stay registered
while no webhook answers (``persistent``), so no link slips through unchecked meanwhile.

The handlers are registered in a registry of their own (``REGISTRY``), which the webhook process
runs (``--role=webhook``, see gatehouse_operator.wiring.webhook): they hold no state, so any
number of replicas answer them, and writes never wait on the one controller that leads.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import kopf
from pydantic import ValidationError

from gatehouse_contract.redaction import REDACTED
from gatehouse_operator.access import secret_use
from gatehouse_operator.access.reviews import Access, User, UserInfo
from gatehouse_operator.api import link_policy
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    DEFAULT_TEST_METHOD,
    body_problem,
)
from gatehouse_operator.api.meta import GROUP, VERSION, first_problem
from gatehouse_operator.api.project_config import (
    PROJECT_CONFIG,
    becomes_the_project,
    second_project,
)
from gatehouse_operator.api.sign_in_request import (
    MAX_PENDING_PER_USER,
    SIGN_IN_REQUEST,
    Requester,
)
from gatehouse_operator.api.stored import StoredConnection, StoredConnectionSpec
from gatehouse_operator.connections.exfiltration import connection_warning
from gatehouse_operator.connections.samples import typed_credentials
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.kube import Kube, failure
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.project_config.schema import spec_problems

REGISTRY = kopf.OperatorRegistry()
log = logging.getLogger("gatehouse.webhook")
Check = Callable[..., Awaitable[None]]


def _refused_if_unanswered(check: Check) -> Check:
    """A check whose question to the API server fails refuses the change with the cause (the
    status, or that the API server could not be reached), never kopf's rendering of the error
    (the client's prints the response's headers and body)."""

    @functools.wraps(check)
    async def checked(**kwargs: Any) -> None:
        try:
            await check(**kwargs)
        except ApiError as error:
            cause = failure(error)
            if error.status == 403:
                cause += ": the webhook's ServiceAccount lacks a right its checks need"
            log.error("%s: cannot ask the API server (%s)", check.__name__, cause)
            raise kopf.AdmissionError(
                f"the Gatehouse webhook could not check this change: the API server answered "
                f"{cause}; try again, or ask the cluster's administrators",
                code=503,
            ) from None
        except (aiohttp.ClientError, TimeoutError) as error:
            log.error("%s: cannot reach the API server (%s)", check.__name__, type(error).__name__)
            raise kopf.AdmissionError(
                "the Gatehouse webhook could not check this change: it cannot reach the API "
                f"server ({type(error).__name__}); try again in a moment",
                code=503,
            ) from None

    return checked


_LINKING = {DATA_APP.plural, CHART_TYPE.plural}


def _linking(resource: kopf.Resource) -> bool:
    return resource.group == GROUP and resource.plural in _LINKING


@kopf.on.validate(
    _linking,
    id="link-policy",
    operations=["CREATE", "UPDATE"],
    persistent=True,
    registry=REGISTRY,
)
@_refused_if_unanswered
async def check_links(
    body: kopf.Body, userinfo: kopf.UserInfo, memo: kopf.Memo, **kwargs: Any
) -> None:
    kube: Kube = memo.kube
    access: Access = memo.access
    namespace = body["metadata"]["namespace"]
    old: kopf.Body | None = kwargs.get("old")  # kopf passes it, though WebhookFn omits it
    added = link_policy.added_links(old.get("spec") if old else None, body.get("spec") or {})
    if not added:
        return
    user = User.from_user_info(dict(userinfo))
    policies: dict[str, str | None] = {}
    found = {}
    for name in added:
        stored = await kube.resources.get_custom(EXTERNAL_CONNECTION, namespace, name)
        connection = None if stored is None else StoredConnection.of(stored)
        policies[name] = link_policy.policy_of(connection)
        if connection:
            found[name] = connection

    async def may(verb: str, name: str) -> bool:
        return await access.allowed(user, verb, EXTERNAL_CONNECTION.plural, namespace, name)

    refused = await link_policy.refused(added, policies, may)
    if refused:
        raise kopf.AdmissionError(link_policy.refusal(user.name, refused), code=403)
    # What each new link lets the app do, as the page says it: kubectl prints these as
    # "Warning:" (kopf answers them in the AdmissionReview). Only for links allowed, whose
    # requester may see the connection.
    warnings: list[str] = kwargs.get("warnings", [])
    for name, connection in sorted(found.items()):
        warnings.append(f"spec.connections: {name}: {connection_warning(connection)}")


@kopf.on.validate(
    GROUP,
    VERSION,
    EXTERNAL_CONNECTION.plural,
    id="secret-use",
    operations=["CREATE", "UPDATE"],
    persistent=True,
    registry=REGISTRY,
)
@_refused_if_unanswered
async def check_secret_use(
    body: kopf.Body, userinfo: kopf.UserInfo, memo: kopf.Memo, **kwargs: Any
) -> None:
    old: kopf.Body | None = kwargs.get("old")  # kopf passes it, though WebhookFn omits it
    old_spec = StoredConnectionSpec.model_validate(old.get("spec") or {}) if old else None
    new_spec = StoredConnectionSpec.model_validate(body.get("spec") or {})
    needed = secret_use.secret_to_read(old_spec, new_spec)
    # spec.tls's Secrets: each held to the same rule.
    all_needed = [needed] if needed is not None else []
    all_needed += secret_use.tls_secrets_to_read(old_spec, new_spec)
    access: Access = memo.access
    namespace = body["metadata"]["namespace"]
    user = User.from_user_info(dict(userinfo))
    for secret, field in all_needed:
        if not await access.allowed(
            user, secret_use.READ_VERB, "secrets", namespace, secret, group=""
        ):
            raise kopf.AdmissionError(
                secret_use.secret_refusal(user.name, namespace, secret, field), code=403
            )


@kopf.on.validate(
    GROUP,
    VERSION,
    CONNECTION_TEST.plural,
    id="connection-test",
    operations=["CREATE"],
    persistent=True,
    registry=REGISTRY,
)
@_refused_if_unanswered
async def check_connection_test(
    body: kopf.Body, userinfo: kopf.UserInfo, memo: kopf.Memo, **_: Any
) -> None:
    kube: Kube = memo.kube
    access: Access = memo.access
    spec = body.get("spec") or {}
    credentials = typed_credentials(str(spec.get("path", "")))
    if credentials:
        # The page, the service API and the CLI scrub what was typed before they create the
        # test; a test written by hand is refused rather than changed (no mutating webhook),
        # so the value never reaches the stored spec, its printer column or its Events.
        raise kopf.AdmissionError(
            f"spec.path: the query gives a value to {', '.join(credentials)}; a ConnectionTest "
            "keeps no value for a key that usually holds a credential, since everyone who may "
            "read tests sees its path; leave the value out (the connection injects its own "
            f"credential), write it as {REDACTED}, or run the test from the connection's page "
            "or with `gatehouse test`, which replace it",
            code=422,
        )
    name = str(spec.get("connection", ""))
    namespace = body["metadata"]["namespace"]
    user = User.from_user_info(dict(userinfo))
    stored = await kube.resources.get_custom(EXTERNAL_CONNECTION, namespace, name)
    connection = None if stored is None else StoredConnection.of(stored)

    async def may(verb: str, connection_name: str) -> bool:
        return await access.allowed(
            user, verb, EXTERNAL_CONNECTION.plural, namespace, connection_name
        )

    # One answer for "missing" and "not yours to see", as the service API gives (404 alike).
    if connection is None or not await link_policy.may_see_connection(may, name, connection):
        raise kopf.AdmissionError(
            f"spec.connection: no ExternalConnection {name!r} that {user.name} may test in "
            "this namespace (testing needs update on the connection, or link on one whose "
            "linkPolicy is Builders)",
            code=422,
        )
    allowed = connection.spec.allowed_methods
    method = spec.get("method", DEFAULT_TEST_METHOD)
    if problem := body_problem(method, spec.get("body")):
        raise kopf.AdmissionError(f"spec.body: {problem}", code=422)
    if method not in allowed:
        raise kopf.AdmissionError(
            f"spec.method: {method} is not one of the connection's allowedMethods "
            f"({', '.join(allowed)})",
            code=422,
        )


@kopf.on.validate(
    GROUP,
    VERSION,
    PROJECT_CONFIG.plural,
    id="project-config",
    operations=["CREATE", "UPDATE"],
    persistent=True,
    registry=REGISTRY,
)
@_refused_if_unanswered
async def check_project_config(body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
    old: kopf.Body | None = kwargs.get("old")  # kopf passes it, though WebhookFn omits it
    # Only a new or changed spec: an object stored before a rule existed must stay editable
    # (labels, annotations, kopf's own bookkeeping) and deletable.
    spec = body.get("spec") or {}
    if old is None or (old.get("spec") or {}) != spec:
        problems = spec_problems(spec)
        if problems:
            raise kopf.AdmissionError("; ".join(problems), code=422)
    kube: Kube = memo.kube
    if not becomes_the_project(body["metadata"], old["metadata"] if old else None):
        return
    others = await kube.resources.list_custom(PROJECT_CONFIG, body["metadata"]["namespace"])
    problem = second_project(body["metadata"], others)
    if problem:
        raise kopf.AdmissionError(problem, code=409)


@kopf.on.validate(
    GROUP,
    VERSION,
    SIGN_IN_REQUEST.plural,
    id="sign-in-request",
    operations=["CREATE"],
    persistent=True,
    registry=REGISTRY,
)
@_refused_if_unanswered
async def check_sign_in_request(
    body: kopf.Body, userinfo: kopf.UserInfo, memo: kopf.Memo, **_: Any
) -> None:
    """The requester a SignInRequest records is its creator: the operator answers it with a
    code that signs in as that requester, so a request stating anyone else is refused. The spec
    is immutable (its schema's rule), so what is admitted here stays."""
    info = UserInfo.model_validate(dict(userinfo))
    try:
        user = Requester(username=info.username, uid=info.uid, groups=info.groups, extra=info.extra)
    except ValidationError as error:
        where, rule = first_problem(error)
        raise kopf.AdmissionError(
            f"your identity cannot be recorded in a SignInRequest (spec.requester.{where}: "
            f"{rule}); "
            "sign in to the page another way",
            code=422,
        ) from None
    problem = sign_in_codes.forged((body.get("spec") or {}).get("requester"), user)
    if problem:
        raise kopf.AdmissionError(problem, code=403)
    kube: Kube = memo.kube
    waiting = await kube.resources.list_custom(SIGN_IN_REQUEST, body["metadata"]["namespace"])
    requesters = [
        str(((request.get("spec") or {}).get("requester") or {}).get("username", ""))
        for request in waiting
    ]
    if sign_in_codes.pending_of(user, requesters) >= MAX_PENDING_PER_USER:
        raise kopf.AdmissionError(
            f"{user.username} has {MAX_PENDING_PER_USER} sign-in requests waiting in this "
            "namespace already: use one of their links, or wait a minute for them to expire",
            code=429,
        )
