"""Sending one test request to a proxy replica, and reading what came back.

Shared by ConnectionTests (a saved connection, named by its routing key) and draft tests (a
connection not saved yet, whose route travels with the request). Both go through the proxy's own
path: host pinning, method and path rules, credential injection, limits.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gatehouse_contract import sent_forms
from gatehouse_contract.connection_tests import (
    MAX_LOCATION_CHARS,
    NOT_SENT,
    TEST_EXPIRED,
    Answered,
    ConnectionTestAnswer,
    Problem,
    ProxyRefused,
    ReplicaTestRequest,
    Stale,
)
from gatehouse_contract.errors import RefusalCode, refusal_reason, unknown_refusal_reason
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.connection_test import RESULT_BODY_CHARS
from gatehouse_operator.connections import samples
from gatehouse_operator.connections.models import AnswerShown
from gatehouse_operator.connections.origin import (
    OriginError,
    normalise_origin,
    sealed_scope,
    token_url_of,
)
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.credentials import (
    CredentialProblem,
    Found,
    placement,
    sealed_in,
    secret_in,
)
from gatehouse_operator.project_config.schema import shortened
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.status import Verdict
from gatehouse_operator.table.channel import NoReplica, OutcomeUnknown, StreamClosed


class Finished(GatehouseError):
    """The test is over without an answer from upstream; the verdict says why."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class Waiting(GatehouseError):
    """The test cannot run yet: no replica could take it now."""

    def __init__(self, reason: Reason, message: str, delay: float = 2.0) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.delay = delay


async def ask(runtime: Runtime, request: ReplicaTestRequest, within: float) -> ConnectionTestAnswer:
    """The replica's answer; raises Finished for a refusal and Waiting when none could take it.

    It travels on a replica's table channel: no port of the proxy takes tests. Waiting (the
    test is sent again) only when its request was not sent: once a replica may have sent it
    upstream, whatever came back, or that nothing did, is the test's result.
    """
    try:
        outcome = await runtime.channel.run_test(request, within=within)
    except NoReplica as error:
        raise Waiting(Reason.PROXY_BEHIND, str(error), 0.5) from None
    except StreamClosed:
        raise Waiting(
            Reason.PROXY_UNAVAILABLE, "the proxy replica went away before it took the test"
        ) from None
    except OutcomeUnknown as unknown:
        raise Finished(
            Verdict(
                ConditionType.PASSED,
                "False",
                Reason.OUTCOME_UNKNOWN,
                f"{unknown}: the request may have reached the upstream, so it is not sent "
                "again; run a new test to try again",
            )
        ) from None
    if isinstance(outcome, Answered):
        return outcome.answered
    if isinstance(outcome, Stale):
        raise Waiting(Reason.PROXY_BEHIND, "the proxy has not installed the newest table yet", 0.5)
    if isinstance(outcome, ProxyRefused):
        raise _refused(outcome.refused)
    raise Finished(
        Verdict(ConditionType.PASSED, "False", Reason.PROXY_ERROR, outcome.error.message[:1024])
    )


def _refused(refused: Problem) -> Waiting | Finished:
    """A replica's refusal of the test. Its code is read as a RefusalCode here, where it enters
    the operator; one this release does not know (a newer replica's, during a rolling upgrade, or
    an older one's TEST_EXPIRED) still fails the test, named as a known one would be."""
    code = refused.refusal
    if code is not None and code in NOT_SENT:
        return Waiting(Reason.PROXY_BUSY, refused.message[:1024], 2.0)
    message = refused.message[:900]
    if refused.code == TEST_EXPIRED:
        message += (
            " (an earlier proxy release, which does not say whether the request was sent: "
            "it is not sent again; run a new test to try again)"
        )
    reason = refusal_reason(code) if code is not None else unknown_refusal_reason(refused.code)
    return Finished(Verdict(ConditionType.PASSED, "False", reason, message))


@dataclass(frozen=True)
class Result:
    verdict: Verdict
    response: AnswerShown  # as ConnectionTest status.response shows it
    sample_body: Any  # what a sample would keep; only for a passing test

    @property
    def passed(self) -> bool:
        return self.verdict.ok


async def result(
    answer: ConnectionTestAnswer, method: str, path: str, secrets: list[str]
) -> Result:
    """The answer as people see it: redacted of ``secrets``, the body truncated.

    Redacting is the one CPU-bound step of a test in the operator, whose event loop serves every
    tenant's admission: it runs in a thread, on a body the replica cut to a bounded prefix.
    """
    return await asyncio.to_thread(_result, answer, method, path, secrets)


def _result(answer: ConnectionTestAnswer, method: str, path: str, secrets: list[str]) -> Result:
    shown = samples.views(answer.body, answer.content_type, secrets, cut=answer.truncated)
    redaction = samples.Redaction(secrets)
    # What the tester typed (?token=...) is redacted as the answer is.
    summary = f"{method} {redaction.text(path)} answered {answer.status_code}"
    location = redaction.text(answer.location)
    if location:
        verdict = _failed(
            "upstream_redirect",
            f"{summary}, a redirect to {location}: never followed, and an app's fetch of it is "
            "refused",
        )
    elif answer.over_limit:
        verdict = _failed(
            "response_too_large",
            f"{summary} with a body over the connection's limits.maxResponseBytes: an app's "
            "fetch of it is refused (its start is shown)",
        )
    elif 200 <= answer.status_code < 300:
        verdict = Verdict(ConditionType.PASSED, "True", Reason.PASSED, summary)
    else:
        verdict = Verdict(ConditionType.PASSED, "False", Reason.UPSTREAM_STATUS, summary)
    response: AnswerShown = {
        "statusCode": answer.status_code,
        "contentType": answer.content_type[:256],
        "body": shown.text[:RESULT_BODY_CHARS],
        "truncated": answer.truncated or len(shown.text) > RESULT_BODY_CHARS,
        "sizeBytes": answer.size_bytes,
    }
    if location:
        response["location"] = location[:MAX_LOCATION_CHARS]
    return Result(verdict, response, shown.sample if verdict.ok else None)


def _failed(code: RefusalCode, message: str) -> Verdict:
    """A test that got an answer an app's fetch would be refused: the proxy's code, as a
    refusal of it is named."""
    return Verdict(ConditionType.PASSED, "False", refusal_reason(code), shortened(message, 1024))


def secret_texts(spec: ExternalConnectionSpec, value: bytes | None) -> list[str]:
    """A connection's secret as it could appear in an answer, to scrub from anything kept: every
    form the proxy sends it in (sent_forms.forms_of, as the proxy's injectors and token requests
    send it)."""
    if value is None:
        return []
    return list(sent_forms.forms_of(placement(spec.auth), value.decode(errors="replace").strip()))


async def connection_secret(
    runtime: Runtime, namespace: str, name: str, spec: ExternalConnectionSpec
) -> Found | None:
    """The connection's secret as its Secret holds it, or as its sealed value opens for it.
    Raises CredentialProblem, or OriginError for a sealed value and a baseURL that is none."""
    if spec.auth.sealed_secret is not None:
        allow_http = runtime.settings.allow_http
        origin = normalise_origin(spec.base_url, allow_http=allow_http)
        token_url = token_url_of(spec.auth, allow_http=allow_http)
        scope = sealed_scope(namespace, name, origin, spec.auth, token_url)
        return sealed_in(spec.auth, runtime.sealing.sealing_keys(), scope)
    ref = spec.auth.secret_ref
    data = await runtime.kube.secrets.secret_data(namespace, ref.name) if ref else None
    return secret_in(spec.auth, data)


async def stored_secrets(
    runtime: Runtime, namespace: str, name: str, spec: ExternalConnectionSpec
) -> list[str]:
    """The connection's secret, for scrubbing. A value that cannot be had now scrubs nothing:
    the connection is not Ready, and its test does not run."""
    try:
        found = await connection_secret(runtime, namespace, name, spec)
    except (CredentialProblem, OriginError):
        return []
    return secret_texts(spec, found.value if found else None)
