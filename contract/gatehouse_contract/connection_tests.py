"""Connection tests: the operator asks a proxy replica to make one request as an app's would.

The shapes of that call: the request, the answer, and the four outcomes a replica reports. It
travels on the table channel (see :mod:`gatehouse_contract.frames`), which only the operator can
speak: no port of the proxy takes it.

A test's request reaches the upstream at most once. The operator sends a test again only when
it knows the request was not sent: a replica turned it away (``TESTS_BUSY``), it found no place
in time or its replica stopped before sending it (``TEST_NOT_STARTED``), or no replica could take
it. Once a replica has sent the request, what comes back is the test's result, whatever it is:
the answer, a refusal, ``TEST_TIMED_OUT``, or nothing (the operator then reports that it does not
know the outcome, and does not send it again).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from gatehouse_contract.errors import RefusalCode, as_refusal_code
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_contract.wire import Count, HttpStatus, Wire

# Tests have their own rate bucket per connection, so testing cannot starve an app.
CONNECTION_TEST_CALLER = "gatehouse/connection-test"
# What a test's answer keeps of the body: well over what a result shows (4,000 characters) and a
# sample keeps (16 KiB), so both come out as from the whole body for most answers, and small
# enough that scrubbing, sending and redacting it are bounded whatever the connection's
# maxResponseBytes (up to 25 MiB) lets through.
MAX_ANSWER_BODY_BYTES = 64 * 1024
MAX_CONTENT_TYPE_CHARS = 256
MAX_LOCATION_CHARS = 2048
# Well over what a test's status shows of it (1,024 characters).
MAX_PROBLEM_MESSAGE_CHARS = 4096


# A test starts only while its connection's timeout and this margin fit before its deadline.
START_MARGIN_SECONDS = 1.0
# How long past a test's deadline the operator waits for its replica's report.
ANSWER_GRACE_SECONDS = 5.0

# The replica's own refusal codes for a test (besides the proxy's, as an app's fetch gets them).
# Sent again by the operator: the request was never sent upstream.
TESTS_BUSY: Final[RefusalCode] = "tests_busy"  # the namespace's queue on the replica is full
TEST_NOT_STARTED: Final[RefusalCode] = (
    "test_not_started"  # no place before it had to start, or its replica stopped
)
NOT_SENT: frozenset[RefusalCode] = frozenset({TESTS_BUSY, TEST_NOT_STARTED})
# Final: the request was sent, and the upstream had not answered by the test's deadline.
TEST_TIMED_OUT: Final[RefusalCode] = "test_timed_out"
# Earlier replicas said this both of a test dropped while it waited and of one cancelled in
# flight: whether its request was sent is unknown, so it is final too.
TEST_EXPIRED = "test_expired"


class ReplicaTestRequest(Wire):
    """A test as the operator hands it to a proxy replica (what a user asks for is the service
    API's ``ConnectionTestRequest``, in the operator)."""

    connection: str = Field(description="The connection's routing key, namespace/name.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str = Field(pattern=r"^/", description="Path and optional query under the origin.")
    body: Any = None
    # The operator's newest table when it sent the test: an older replica answers "stale"
    # instead of testing against a connection it has not seen yet.
    min_table_version: int = 0
    # The test's deadline, counted by the replica from when it arrives: a test starts only while
    # its connection's timeoutSeconds (and START_MARGIN_SECONDS) fits before it, so that the
    # upstream's own timeout ends it first; one still running then is cancelled. The operator
    # waits ANSWER_GRACE_SECONDS longer, to hear which of the two it was.
    within_seconds: float = Field(default=60.0, gt=0, le=600)
    # A connection that is not saved ("Test this draft"): its route, compiled and encrypted by the
    # operator as a saved one's would be. The replica uses it for this request only; it never
    # enters the table, and nothing it caches outlives the request.
    draft: ConnectionRoute | None = None

    @model_validator(mode="after")
    def _draft_is_the_connection(self) -> ReplicaTestRequest:
        if self.draft is not None and self.draft.key != self.connection:
            raise ValueError("a draft's route must have the test's connection key")
        return self


class ConnectionTestAnswer(Wire):
    """What the upstream answered, as a test shows it: also what an app's fetch would be refused
    (a redirect, never followed; a body over the connection's maxResponseBytes, read up to it)."""

    status_code: HttpStatus
    content_type: str = Field(max_length=MAX_CONTENT_TYPE_CHARS)
    # Its first MAX_ANSWER_BODY_BYTES, scrubbed, decoded as UTF-8 (invalid bytes replaced).
    body: str = Field(max_length=MAX_ANSWER_BODY_BYTES)
    # A vendor's Content-Length may claim more than this: the replica says MAX_COUNT then.
    size_bytes: Count = Field(description="The whole body's size (what was read of it, if over).")
    truncated: bool = Field(default=False, description="Whether the body is a prefix.")
    # Sent only when set, so that a replica and an operator of adjacent releases still read each
    # other's answers to every test but those.
    location: str = Field(
        default="", max_length=MAX_LOCATION_CHARS, description="A redirect's Location, scrubbed."
    )
    over_limit: bool = Field(
        default=False, description="The body exceeds maxResponseBytes; reading stopped there."
    )

    @model_serializer(mode="wrap")
    def _only_what_is_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, value in (("location", ""), ("overLimit", False)):  # by alias, as Wire sends
            if data.get(name, value) == value:
                data.pop(name, None)
        return data


class Problem(Wire):
    # snake_case, as the proxy's error bodies have it: a refusal's code, or a failure's own
    # ("internal", "unreadable"). A string on the wire, so that a newer replica's code still reads.
    code: str = Field(max_length=64)
    # It may quote what a tenant sent (a path) or a vendor said (a token endpoint's
    # description): a replica cuts it (``Problem.of``), and a longer one is refused.
    message: str = Field(max_length=MAX_PROBLEM_MESSAGE_CHARS)

    @classmethod
    def of(cls, code: str, message: str) -> Problem:
        """A problem as a replica reports it: its message cut to what the frame carries."""
        if len(message) > MAX_PROBLEM_MESSAGE_CHARS:
            message = message[: MAX_PROBLEM_MESSAGE_CHARS - 1] + "…"
        return cls(code=code, message=message)

    @property
    def refusal(self) -> RefusalCode | None:
        """The code as a refusal this release knows; None for a failure's, a newer replica's
        (during a rolling upgrade) or an older one's (``TEST_EXPIRED``)."""
        return as_refusal_code(self.code)


class TableBehind(Wire):
    table_version: Count  # what the replica holds, older than the test's min_table_version


# What a replica reports: one key names the outcome (the shapes are those of the first release,
# kept so that an operator and replicas of adjacent releases understand each other).


class Answered(Wire):
    """Upstream answered; whatever its status, the test ran."""

    answered: ConnectionTestAnswer


class ProxyRefused(Wire):
    """The proxy's own rules refused the request, as they would an app's; the code says which."""

    refused: Problem


class Stale(Wire):
    """The replica has not installed the table the test needs yet: another may have."""

    stale: TableBehind


class Failed(Wire):
    """The test could not run: the replica failed, or its answer could not be read."""

    error: Problem


# What a replica reports of a test (the service API's ConnectionTestOutcome is the operator's).
ReplicaTestOutcome = Answered | ProxyRefused | Stale | Failed
