"""ConnectionTest: send one request through a proxy replica and record the answer.

The test goes through the proxy's own path (host pinning, method and path rules, credential
injection, limits), so a passing test means an app's fetch would pass too. Conditions: ``Passed``
(True for a 2xx answer; False with the proxy's or upstream's reason) and, when a sample was asked
for, ``SampleSaved``. A test waits up to a minute for the operator to see its connection and for a
replica's place, its request reaches the upstream at most once (see
:mod:`gatehouse_contract.connection_tests`), and it is deleted ``ttlSecondsAfterFinished`` after
it finished. A passing test keeps its sample
body in status, so the annotation ``gatehouse.dev/save-as-sample`` can save it later.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, cast

import kopf
from pydantic import ValidationError

from gatehouse_contract.connection_tests import ConnectionTestAnswer, ReplicaTestRequest
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION, ExternalConnectionSpec
from gatehouse_operator.api.connection_sample import ConnectionSampleSpec, SampledRequest
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    SAVE_AS_SAMPLE_ANNOTATION,
    ConnectionTestSpec,
    ConnectionTestStatus,
    UpstreamAnswer,
)
from gatehouse_operator.api.meta import GROUP, VERSION, ConditionStatus, spec_error
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.api.stored import StoredConnectionTest
from gatehouse_operator.connections import sample_saving, samples
from gatehouse_operator.connections.testing import Finished, Waiting, ask, result, stored_secrets
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime, forget_resource, kind_key
from gatehouse_operator.status import Verdict, now

PLURAL = CONNECTION_TEST.plural
# How long a test waits for the operator to see its connection (it may be applied together with
# the connection) and for a proxy replica to answer.
PATIENCE_SECONDS = 60.0
SENT_MESSAGE = "sent to a proxy replica; waiting for its report"


def _age_seconds(test: Resource) -> float:
    created = datetime.datetime.fromisoformat(test.creation_timestamp)
    return (datetime.datetime.now(datetime.UTC) - created).total_seconds()


def _connection(
    runtime: Runtime, test: Resource, spec: ConnectionTestSpec
) -> tuple[str, ConnectionRoute, ExternalConnectionSpec]:
    """The connection's routing key, route and spec; waits (by retrying) while the operator
    has not seen it."""
    key = f"{test.namespace}/{spec.connection}"
    route = runtime.routes.connection(key)
    connection = runtime.routes.connection_resource(key)
    if route is not None and connection is not None and not route.unavailable:
        if spec.method not in route.allowed_methods:
            raise Finished(
                Verdict(
                    ConditionType.PASSED,
                    "False",
                    Reason.METHOD_NOT_ALLOWED,
                    f"{spec.method} is not among the connection's allowedMethods "
                    f"({', '.join(sorted(route.allowed_methods))})",
                )
            )
        return key, route, ExternalConnectionSpec.model_validate(connection.spec)
    if route is None:
        raise Waiting(Reason.CONNECTION_NOT_FOUND, f"no ExternalConnection {spec.connection!r}")
    # Compiled and not Ready: the connection's own condition says why, and waiting would not help.
    ready = runtime.status.condition(key, ConditionType.READY)
    raise Finished(
        Verdict(
            ConditionType.PASSED,
            "False",
            ready.reason if ready is not None and ready.reason else Reason.CONNECTION_NOT_READY,
            ready.message if ready is not None and ready.message else route.unavailable,
        )
    )


async def _run_on_proxy(
    runtime: Runtime,
    test: Resource,
    key: str,
    route: ConnectionRoute,
    spec: ConnectionTestSpec,
) -> ConnectionTestAnswer:
    """Runs the test on a proxy replica that holds the connection's latest route.

    The test may wait on the replica for a place as long as its patience lasts, rather than be
    turned back and sent again; it starts only while its connection's timeout still fits. The
    status says it was sent before it is: an operator that stops meanwhile leaves that behind,
    and the next one does not send it again (see ``run``).
    """
    revision = runtime.journal.revision("connection", key)
    if revision is None or runtime.routes.unpublished("connection", key):
        raise Waiting(
            Reason.PROXY_BEHIND, "the connection's latest route is not published yet", 0.5
        )
    request = ReplicaTestRequest(
        connection=key,
        method=spec.method,
        path=spec.path,
        body=spec.body,
        min_table_version=revision,
    )
    waits = max(0.0, PATIENCE_SECONDS - _age_seconds(test))
    sent = Verdict(ConditionType.PASSED, "Unknown", Reason.RUNNING, SENT_MESSAGE)
    await runtime.status.write(
        CONNECTION_TEST,
        test,
        [sent],
        ConnectionTestStatus(),
        kind_key(CONNECTION_TEST, test),
        summary=ConditionType.PASSED,
        events=False,
    )
    return await ask(runtime, request, within=route.limits.timeout_seconds + 5 + waits)


async def _save_sample(
    runtime: Runtime,
    test: Resource,
    spec: ConnectionTestSpec,
    label: str,
    response: UpstreamAnswer,
    sample_body: Any,
    secrets: list[str],
) -> Verdict:
    """Keeps a passing test's answer (``response``: its status field) as a sample."""
    connection = runtime.routes.connection_resource(f"{test.namespace}/{spec.connection}")
    if connection is None:
        missing = f"no ExternalConnection {spec.connection!r}"
        return Verdict(ConditionType.SAMPLE_SAVED, "False", Reason.CONNECTION_NOT_FOUND, missing)
    owner = {"kind": EXTERNAL_CONNECTION.kind, "name": connection.name, "uid": connection.uid}
    try:
        sample = ConnectionSampleSpec(
            connection=spec.connection,
            label=label,
            saved_at=now(),
            request=SampledRequest(
                method=spec.method,
                path=samples.Redaction(secrets).text(spec.path),
                body=samples.sent(spec.body, secrets),
            ),
            status_code=response.status_code,
            content_type=response.content_type,
            body=sample_body,
        )
    except ValidationError as error:
        return Verdict(
            ConditionType.SAMPLE_SAVED, "False", Reason.INVALID_SAMPLE, spec_error(error)
        )
    try:
        await sample_saving.save(
            runtime.kube.samples,
            test.namespace,
            owner,
            test.name,
            sample.model_dump(by_alias=True, mode="json"),
        )
    except sample_saving.SampleRefused as error:
        return Verdict(ConditionType.SAMPLE_SAVED, "False", error.reason, str(error))
    except ApiError as error:
        # The test's own verdict stands; saving again is asking again.
        message = f"the sample was not saved (HTTP {error.status}): ask again"
        return Verdict(ConditionType.SAMPLE_SAVED, "False", Reason.SAVE_ERROR, message)
    return Verdict(
        ConditionType.SAMPLE_SAVED, "True", Reason.SAVED, f"saved as sample {test.name!r}"
    )


async def save_after(runtime: Runtime, test: Resource, stored: StoredConnectionTest) -> None:
    """Saves a finished test as a sample when its annotation asks, once its result was seen.

    The annotation is a request: once answered (in status: ``sample``, or ``SampleSaved=False``
    with the reason) the operator removes it, so the caller knows the answer is for this request
    and can ask again. A test is saved once; asking again later leaves it as it is.
    """
    label = stored.annotations.get(SAVE_AS_SAMPLE_ANNOTATION)
    if label is None or not stored.status.finished_at:
        return
    if not stored.status.sample:
        verdict = samples.save_refusal(stored.status, label) or await _saved(
            runtime, test, stored, label.strip()
        )
        # Every other condition (Passed) as it stands: the status patch replaces the list.
        kept = [
            # The CRD schema holds a condition's status to True, False or Unknown.
            Verdict(ConditionType(c.type), cast(ConditionStatus, c.status), c.reason, c.message)
            for c in stored.status.conditions
            if c.type != ConditionType.SAMPLE_SAVED
        ]
        fields = ConnectionTestStatus(sample=test.name) if verdict.ok else ConnectionTestStatus()
        key = kind_key(CONNECTION_TEST, test)
        await runtime.status.write(
            CONNECTION_TEST, test, [*kept, verdict], fields, key, summary=ConditionType.PASSED
        )
        forget_resource(runtime, key)
    await runtime.kube.resources.annotate(
        CONNECTION_TEST, test.namespace, test.name, SAVE_AS_SAMPLE_ANNOTATION, None
    )


def _spec(test: Resource) -> ConnectionTestSpec:
    """The test's spec, parsed strictly: what is sent and saved."""
    return ConnectionTestSpec.model_validate(test.spec)


async def _saved(
    runtime: Runtime, test: Resource, stored: StoredConnectionTest, label: str
) -> Verdict:
    spec = _spec(test)
    namespace = test.namespace
    status = stored.status
    try:
        connection = runtime.routes.connection_resource(f"{namespace}/{spec.connection}")
        secrets = (
            await stored_secrets(
                runtime,
                namespace,
                spec.connection,
                ExternalConnectionSpec.model_validate(connection.spec),
            )
            if connection is not None
            else []
        )
        return await _save_sample(
            runtime,
            test,
            spec,
            label,
            UpstreamAnswer.model_validate(status.response or {}),
            status.sample_body,
            secrets,
        )
    except (ApiError, ValidationError) as error:
        # An event handler is not retried: the answer says so, and asking again retries.
        reason = f"HTTP {error.status}" if isinstance(error, ApiError) else "its spec"
        return Verdict(
            ConditionType.SAMPLE_SAVED,
            "False",
            Reason.SAVE_ERROR,
            f"the sample was not saved ({reason}): ask again",
        )


def _not_left_running(runtime: Runtime, test: StoredConnectionTest, key: str) -> None:
    """Raises Finished for a test an earlier run sent and never saw the end of: an operator
    that stopped (a rollout, a leader change) or failed meanwhile. Its request may have
    reached the upstream, so it is not sent again."""
    # What this process wrote last, if anything: a body from the watch may be older.
    written = runtime.status.condition(key, ConditionType.PASSED)
    if written is not None:
        last = written.reason
    else:
        last = test.status.condition(ConditionType.PASSED).reason
    if last == Reason.RUNNING:
        raise Finished(
            Verdict(
                ConditionType.PASSED,
                "False",
                Reason.OUTCOME_UNKNOWN,
                "the operator stopped while a proxy replica held this test: the request may "
                "have reached the upstream, so it is not sent again; run a new test to try again",
            )
        )


async def run(runtime: Runtime, test: Resource, stored: StoredConnectionTest) -> None:
    """Runs the test once; a finished test is never run again. ``stored``: the same test,
    read as the use cases read one."""
    if stored.status.finished_at:
        return
    key = kind_key(CONNECTION_TEST, test)
    started = time.perf_counter()
    # What the test found: the fields given are those written (the timing is added at the end).
    found = ConnectionTestStatus()
    verdicts: list[Verdict] = []
    try:
        _not_left_running(runtime, stored, key)
        try:
            spec = _spec(test)
        except ValidationError as error:
            raise Finished(
                Verdict(ConditionType.PASSED, "False", Reason.INVALID_SPEC, spec_error(error))
            ) from None
        connection_key, route, connection_spec = _connection(runtime, test, spec)
        answer = await _run_on_proxy(runtime, test, connection_key, route, spec)
    except Finished as finished:
        verdicts.append(finished.verdict)
    except Waiting as waiting:
        if _age_seconds(test) > PATIENCE_SECONDS:
            verdicts.append(Verdict(ConditionType.PASSED, "False", waiting.reason, waiting.message))
        else:
            pending = Verdict(ConditionType.PASSED, "Unknown", Reason.PENDING, waiting.message)
            await runtime.status.write(
                CONNECTION_TEST,
                test,
                [pending],
                ConnectionTestStatus(),
                key,
                summary=ConditionType.PASSED,
            )
            raise kopf.TemporaryError(waiting.message, delay=waiting.delay) from None
    else:
        secrets = await stored_secrets(runtime, test.namespace, spec.connection, connection_spec)
        outcome = await result(answer, spec.method, spec.path, secrets)
        verdicts.append(outcome.verdict)
        response = UpstreamAnswer.model_validate(outcome.response)
        found = (
            ConnectionTestStatus(response=response, sample_body=outcome.sample_body)
            if outcome.passed
            else ConnectionTestStatus(response=response)
        )
        if spec.save_as_sample is not None:
            saved = (
                await _save_sample(
                    runtime,
                    test,
                    spec,
                    spec.save_as_sample.label,
                    response,
                    outcome.sample_body,
                    secrets,
                )
                if outcome.passed
                else Verdict(
                    ConditionType.SAMPLE_SAVED,
                    "False",
                    Reason.TEST_FAILED,
                    "only a passing test is saved as a sample",
                )
            )
            verdicts.append(saved)
            if saved.ok:
                found = found.model_copy(update={"sample": test.name})
    written = found.model_copy(
        update={"duration_ms": int((time.perf_counter() - started) * 1000), "finished_at": now()}
    )
    await runtime.status.write(
        CONNECTION_TEST, test, verdicts, written, key, summary=ConditionType.PASSED
    )
    forget_resource(runtime, key)  # a finished test is never written again


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
async def test_created(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await run(memo.runtime, resource_of(body), StoredConnectionTest.of(body))


# An event handler, not an update handler: kopf leaves annotations under its own storage prefix
# (gatehouse.dev) out of the changes it diffs. save_after removes the annotation it answered, so
# the events its own writes cause do not match this filter.
@kopf.on.event(GROUP, VERSION, PLURAL, annotations={SAVE_AS_SAMPLE_ANNOTATION: kopf.PRESENT})
async def sample_asked(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    if event["type"] != "DELETED":
        await save_after(memo.runtime, resource_of(body), StoredConnectionTest.of(body))


async def expire_finished(runtime: Runtime) -> None:
    """Deletes finished tests whose ttlSecondsAfterFinished has passed (run by housekeeping).

    A sweep rather than a kopf timer per test: timers would put kopf's finalizer on every test,
    and tests would then outlive an uninstalled operator.
    """
    now = datetime.datetime.now(datetime.UTC)
    for body in await runtime.kube.resources.existing(CONNECTION_TEST):
        test = StoredConnectionTest.of(body)
        finished_at = test.status.finished_at
        if not finished_at:
            continue
        ttl = test.spec.ttl_seconds_after_finished
        if now >= datetime.datetime.fromisoformat(finished_at) + datetime.timedelta(seconds=ttl):
            namespace = body["metadata"]["namespace"]
            await runtime.kube.resources.delete_custom(CONNECTION_TEST, namespace, test.name)
