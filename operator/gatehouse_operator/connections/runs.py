"""A ConnectionTest run for a caller and waited for, and a sample saved from one: the rules the
service API, the page and the ``gatehouse`` CLI share.

A test is a resource (cert-manager's model): the caller's request becomes a ConnectionTest, the
operator runs it and writes its outcome to the status. A sample is asked for with an annotation,
which the operator removes once the status holds its answer. The CLI (a synchronous client) and
the async callers wait in their own way; what they create, and what they read as done, is here.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping

from pydantic import JsonValue

from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection_test import CONNECTION_TEST, SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.api.stored import StoredConnectionTest
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.models import (
    ConnectionTestOutcome,
    SampleSaveOutcome,
    answer_shown,
)
from gatehouse_operator.connections.samples import save_refusal, typed
from gatehouse_operator.kube.manifests import Manifest, Metadata

# A test answers within the connection's timeout (at most 120 s) once the connection is Ready.
TEST_WAIT_SECONDS = 150.0
# Saving is one ConnectionSample written by the operator once it sees the annotation.
SAVE_WAIT_SECONDS = 30.0
POLL_SECONDS = 0.2

# The test as stored now; None once it is deleted.
Read = Callable[[], Awaitable[StoredConnectionTest | None]]


def new_test(connection: str, spec: Mapping[str, JsonValue], requested_by: str = "") -> Manifest:
    """A new ConnectionTest of ``connection`` with the rest of its ``spec`` as asked (method,
    path, body, saveAsSample): the API server's schema and admission judge it, and name the
    field they refuse, for the page and service API as for the CLI's typed arguments."""
    name = f"{connection[:40]}-{uuid.uuid4().hex[:8]}"
    annotations = {"gatehouse.dev/requested-by": requested_by[:253]} if requested_by else None
    if "path" in spec:
        # What was typed stays in the resource, its printer column and Events: scrubbed first.
        spec = {**spec, "path": typed(str(spec["path"]))}
    metadata = Metadata(name=name, annotations=annotations)
    return Manifest(CONNECTION_TEST, metadata, {"connection": connection, **spec})


def outcome(found: StoredConnectionTest) -> ConnectionTestOutcome | None:
    """The outcome of a finished test; None while it runs."""
    status = found.status
    if not status.finished_at:
        return None
    passed = status.condition(ConditionType.PASSED)
    return ConnectionTestOutcome(
        name=found.name,
        passed=passed.status == "True",
        reason=passed.reason,
        message=passed.message,
        response=answer_shown(status.response) if status.response is not None else None,
        sample=status.sample,
    )


def save_request(found: StoredConnectionTest, label: str) -> SampleSaveOutcome | None:
    """Why ``found`` cannot be saved as a sample now; None when it may be."""
    status = found.status
    if not status.finished_at:
        return SampleSaveOutcome(
            saved=False, reason=Reason.NOT_FINISHED, message="the test has not finished yet"
        )
    refused = save_refusal(status, label)
    if refused is not None:
        return SampleSaveOutcome(saved=False, reason=refused.reason, message=refused.message)
    return None


def saved(found: StoredConnectionTest) -> SampleSaveOutcome | None:
    """The operator's answer to a request to save; None until it gave one."""
    if SAVE_AS_SAMPLE_ANNOTATION in found.annotations:
        return None
    status = found.status
    answer = status.condition(ConditionType.SAMPLE_SAVED)
    return SampleSaveOutcome(
        saved=bool(status.sample),
        sample=status.sample,
        reason=answer.reason,
        message=answer.message,
    )


async def wait_for_outcome(name: str, read: Read) -> ConnectionTestOutcome:
    deadline = time.monotonic() + TEST_WAIT_SECONDS
    while time.monotonic() < deadline:
        found = await read()
        done = outcome(found) if found is not None else None
        if done is not None:
            return done
        await asyncio.sleep(POLL_SECONDS)
    raise Refused(504, "test_timeout", f"ConnectionTest {name} did not finish in time")


async def wait_until_saved(name: str, read: Read) -> SampleSaveOutcome:
    deadline = time.monotonic() + SAVE_WAIT_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        found = await read()
        if found is None:
            raise Refused(404, "not_found", f"ConnectionTest {name!r} was deleted")
        answer = saved(found)
        if answer is not None:
            return answer
    raise Refused(504, "save_timeout", f"ConnectionTest {name} was not saved in time")
