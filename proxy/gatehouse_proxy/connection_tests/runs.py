"""Runs an operator's ConnectionTest through the same steps as an app's fetch
(:meth:`Passage.through <gatehouse_proxy.passage.steps.Passage.through>`), and reads what the
vendor answered, scrubbed, within bounds.

Refusals are part of the result, with their detail: the admin running a test should see why,
unlike app code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial

from gatehouse_contract.connection_tests import (
    CONNECTION_TEST_CALLER,
    MAX_ANSWER_BODY_BYTES,
    MAX_CONTENT_TYPE_CHARS,
    MAX_LOCATION_CHARS,
    Answered,
    ConnectionTestAnswer,
    Problem,
    ProxyRefused,
    ReplicaTestOutcome,
    ReplicaTestRequest,
    Stale,
    TableBehind,
)
from gatehouse_contract.redaction import Redactor, scrubbed_prefix
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_contract.wire import MAX_COUNT
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.http.media_types import as_read
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.passage.routing import available, current_table
from gatehouse_proxy.passage.steps import Passage, Passed, Testing
from gatehouse_proxy.table.feed import TableStore
from gatehouse_proxy.upstream.forwarder import is_redirect


class ConnectionTests:
    def __init__(self, table: TableStore, passage: Passage) -> None:
        self.table = table
        self.passage = passage

    async def run(
        self, test: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ReplicaTestOutcome:
        """The test's outcome, calling ``sending`` just before its request goes upstream."""
        try:
            if test.draft is not None:
                answer = await self._draft(test.draft, test, sending)
            else:
                table = current_table(self.table)
                if table.version < test.min_table_version:
                    return Stale(stale=TableBehind(table_version=table.version))
                connection = table.connections.get(test.connection)
                if connection is None:
                    raise ProxyError(
                        "unknown_alias", f"no connection {test.connection!r} is routed"
                    )
                answer = await self._test(available(connection), test, Testing(sending))
        except ProxyError as error:
            return ProxyRefused(refused=Problem.of(error.code, error.message))
        return Answered(answered=answer)

    async def _draft(
        self, draft: ConnectionRoute, test: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ConnectionTestAnswer:
        """A draft's test: the same way, then its access token (if any) is dropped."""
        try:
            return await self._test(draft, test, Testing(sending, draft=True))
        finally:
            self.passage.injector.discard(draft)

    async def _test(
        self, connection: ConnectionRoute, test: ReplicaTestRequest, testing: Testing
    ) -> ConnectionTestAnswer:
        path, _, query = test.path.partition("?")
        fetch = Fetch(test.method, path.encode(), query.encode(), None, time.perf_counter())
        fetch.app = fetch.app_uid = CONNECTION_TEST_CALLER
        fetch.connection = connection.key
        passed = await self.passage.through(fetch, connection, TestRequest(test), testing)
        # A test always reaches the vendor: it is never answered from the cache.
        assert isinstance(passed, Passed)
        upstream, injection, place, _ = passed
        namespace = namespace_of(connection.key)
        redact = Redactor(injection.secrets)
        try:
            # Read up to the connection's maxResponseBytes, no further: the test shows what an
            # app's fetch of it would be refused.
            prefix = await scrubbed_prefix(
                upstream.body(stop_at_limit=True),
                redact,
                MAX_ANSWER_BODY_BYTES,
                partial(self.passage.turns.take, namespace),
            )
        finally:
            upstream.release()
            place.release()
        answered = upstream.response.headers
        # A redirect's target, shown and never followed: it may echo the injected credential, as
        # may any header.
        location = answered.get("location", "") if is_redirect(upstream.status) else ""
        # The type as an app's fetch would be given it.
        media_type = "" if upstream.media_type is None else as_read(str(upstream.media_type))
        content_type, location = (_text(value) for value in redact.headers([media_type, location]))
        return ConnectionTestAnswer(
            status_code=upstream.status,
            content_type=content_type[:MAX_CONTENT_TYPE_CHARS],
            # A cut inside a character leaves one replacement character, not an error.
            body=prefix.data.decode("utf-8", errors="replace"),
            # Over the limit, what it says of itself, when it says (of its compressed self, when
            # decoded: not its size).
            size_bytes=min(
                max(prefix.size, 0 if upstream.codings else upstream.response.content_length or 0),
                MAX_COUNT,
            ),
            truncated=not prefix.whole or upstream.over_limit,
            location=location[:MAX_LOCATION_CHARS],
            over_limit=upstream.over_limit,
        )


class TestRequest:
    """What a test asks to send: its JSON body, if any, and that body's type."""

    def __init__(self, test: ReplicaTestRequest) -> None:
        self._body = b"" if test.body is None else json.dumps(test.body).encode()

    def headers(self) -> list[tuple[str, str]]:
        return [("content-type", "application/json")] if self._body else []

    async def body(self, limit: int, take: Callable[[int], None]) -> list[bytes]:
        body = self._body
        if len(body) > limit:
            raise ProxyError("request_too_large", f"the request body exceeds {limit} bytes")
        take(len(body))
        return [body] if body else []


def _text(value: str) -> str:
    """A header value as aiohttp reads it, as text a status may hold: bytes that are not UTF-8
    (kept as surrogates, which no JSON encoder takes) as U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
