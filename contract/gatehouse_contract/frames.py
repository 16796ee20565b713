"""What travels on the table channel, typed in both directions.

From the operator: the routing table as a ``Snapshot`` (in parts) and then a ``Delta`` per change,
a ``Heartbeat`` when nothing else moved, ``ConnectionTestFrame`` for each test it runs,
``Gather`` when it asks what apps did (recent requests, usage counts) and ``GrantsAsked`` for a
person's account being connected. From a replica: ``Ack``
(the version it holds), ``Nack`` (a table it refused, and why), ``Resync`` (send a snapshot),
``ConnectionTestResult``, ``Throttled`` (a vendor paused a connection), ``RenewalsBounded``
(401s renewed a credential's token as often as it may), ``UsageReport`` and
``Gathered`` (a Gather's answer), ``GrantsAnswered`` (a ``GrantsAsked``'s, see
:mod:`gatehouse_contract.connecting`) and ``Goodbye``. How frames are signed and streams opened is
:mod:`gatehouse_contract.channel`.

The operator serialises each route once, when it changes, and builds snapshot and delta bytes
from those (``gatehouse_operator.table.journal``); a test holds those bytes to these models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from gatehouse_contract.activity import (
    MAX_RECENT,
    MAX_USAGE_ROWS,
    Position,
    RecentRequest,
    RequestsQuery,
    UsageRow,
)
from gatehouse_contract.connecting import GrantsAnswered, GrantsAsked
from gatehouse_contract.connection_tests import ReplicaTestOutcome, ReplicaTestRequest
from gatehouse_contract.routes import AppRoute, ConnectionRoute
from gatehouse_contract.wire import Count, Wire

# --- From the operator --------------------------------------------------------------------------


class ConnectionEntry(Wire):
    rev: int  # the version the entry last changed in
    route: ConnectionRoute


class AppEntry(Wire):
    rev: int
    route: AppRoute


class Snapshot(Wire):
    """One part of the whole table at ``version``; a replica installs it once all parts came."""

    type: Literal["snapshot"] = "snapshot"
    version: int
    digest: str = Field(pattern=r"^[0-9a-f]{1,32}$")  # the XOR of every entry's entry_digest
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1)
    connections: tuple[ConnectionEntry, ...] = ()
    apps: tuple[AppEntry, ...] = ()

    @model_validator(mode="after")
    def _part_of_parts(self) -> Snapshot:
        if self.part >= self.parts:
            raise ValueError(f"part {self.part} of {self.parts} does not exist")
        return self


class Delta(Wire):
    """What changed from ``base`` to ``version``: upserted routes and removed keys."""

    type: Literal["delta"] = "delta"
    base: int
    version: int
    digest: str = Field(pattern=r"^[0-9a-f]{1,32}$")  # the table's digest after the delta
    connections: tuple[ConnectionRoute, ...] = ()
    apps: tuple[AppRoute, ...] = ()
    removed_connections: tuple[str, ...] = ()
    removed_apps: tuple[str, ...] = ()


class Heartbeat(Wire):
    """Nothing changed; the replica answers with an Ack, which tells the operator it is alive.

    ``replicas``: how many replicas (workers count one each) serve a table, for a replica that
    asked for it (FLEET_FEATURE): its share of each quota while the shared store is away. Left
    out for the others, which would not read it."""

    type: Literal["heartbeat"] = "heartbeat"
    version: int
    time: float
    replicas: int = 0


# What a replica names in its channel request's FEATURES_HEADER to say which optional fields it
# reads: a replica of an earlier release names none, and is sent none.
FEATURES_HEADER = "X-Gatehouse-Features"
FLEET_FEATURE = "fleet"
# The replica answers Gather frames (activity): an operator sends them to no other replica, and
# a replica answers with UsageReport and Gathered only what it was asked, so neither side of an
# earlier release ever sees them.
ACTIVITY_FEATURE = "activity"
# The replica reads a RequestsQuery's ``cursor`` and ``after`` and answers them with a Gathered's
# ``position`` and ``lost`` (``gatehouse requests -f``): the operator sends those fields to no
# other replica, and asks no other for a follower's next page.
CURSOR_FEATURE = "cursor"
# The replica answers GrantsAsked frames (connecting accounts, gatehouse_contract.connecting): an
# operator asks no other replica.
GRANTS_FEATURE = "grants"


class ConnectionTestFrame(Wire):
    """Run this test; answer with a ConnectionTestResult carrying the same id."""

    # "probe": the name of the first release, kept so that adjacent releases understand each other.
    type: Literal["probe"] = "probe"
    id: str = Field(max_length=100)
    request: ReplicaTestRequest


class Gather(Wire):
    """Send what apps did: the recent requests ``requests`` asks for, and (``usage``) the usage
    counted since the last report, of ``usage_namespace`` or ("") every namespace, which the
    replica then forgets. Answered by UsageReport parts, then one Gathered with the same id."""

    type: Literal["gather"] = "gather"
    id: str = Field(max_length=100)
    requests: RequestsQuery | None = None
    usage: bool = False
    usage_namespace: str = Field(default="", max_length=253)


OperatorFrame = Snapshot | Delta | Heartbeat | ConnectionTestFrame | Gather | GrantsAsked

# --- From a replica -----------------------------------------------------------------------------


class Ack(Wire):
    """The replica holds ``version`` (sent after each install and each heartbeat)."""

    type: Literal["ack"] = "ack"
    version: Count


class Nack(Wire):
    """The replica refused a snapshot or delta and keeps what it had."""

    type: Literal["nack"] = "nack"
    version: Count
    installed: Count  # the version the replica holds instead
    reason: str = Field(max_length=1000)


class Resync(Wire):
    """The replica's table and the stream disagree (a gap, a mismatch): send a snapshot."""

    type: Literal["resync"] = "resync"
    reason: str = Field(max_length=1000)


class ConnectionTestResult(Wire):
    """The outcome of the ConnectionTestFrame with the same id."""

    type: Literal["probeResult"] = "probeResult"  # see ConnectionTestFrame.type
    id: str = Field(max_length=100)  # the ConnectionTestFrame's
    result: ReplicaTestOutcome


class Goodbye(Wire):
    """The replica is shutting down: it stops serving now, not after a grace period."""

    type: Literal["goodbye"] = "goodbye"


# The longest a vendor's Retry-After pauses a connection: a day-long "come back tomorrow" is the
# daily quota's to enforce, not a header's. The proxy reads no more than this
# (gatehouse_proxy.http.retry_after), and a Throttled frame that says more is refused where it is
# read.
MAX_PAUSE_SECONDS = 3600
# What a vendor's pause covers: the whole connection (the credential's limit) or the endpoint
# the answer came on (a path prefix).
PauseScope = Literal["credential", "endpoint"]
# An endpoint as frames and Events show it; a longer one is cut by the replica that names it.
MAX_ENDPOINT_CHARS = 256


class Throttled(Wire):
    """An upstream answered ``status`` (429 or 503) with a Retry-After: the replica paused
    ``scope`` for the fleet for ``seconds``: the whole connection, or only ``endpoint`` (the
    path prefix the answer came on; see gatehouse_proxy.rules.matcher.endpoint_of). Sent once per
    pause, by the replica that saw it; an operator of an earlier release logs it and reads on,
    and a frame of an earlier replica (no scope) paused the whole connection."""

    type: Literal["throttled"] = "throttled"
    connection: str = Field(max_length=600)  # the route's key, namespace/name
    status: int = Field(ge=400, le=599)
    # What the vendor wrote, as the replica bounded it: the operator does arithmetic and dates
    # with it.
    seconds: float = Field(gt=0, le=MAX_PAUSE_SECONDS, allow_inf_nan=False)
    scope: PauseScope = "credential"
    endpoint: str = Field(default="", max_length=MAX_ENDPOINT_CHARS)


# The most new tokens 401s may make a credential renew within RENEWAL_WINDOW_SECONDS.
MAX_RENEWALS = 2
RENEWAL_WINDOW_SECONDS = 60


class RenewalsBounded(Wire):
    """401s made the connection's credential renew its token ``renewals`` times within a
    window, the most it may: the replica that was refused a renewal relays further 401s as they
    are, keeping the token, for ``seconds``. Sent once per window, by that replica; an operator
    of an earlier release logs it and reads on."""

    type: Literal["renewalsBounded"] = "renewalsBounded"
    connection: str = Field(max_length=600)  # the route's key, namespace/name
    renewals: int = Field(ge=0, le=MAX_RENEWALS)
    seconds: float = Field(ge=0, le=RENEWAL_WINDOW_SECONDS, allow_inf_nan=False)


class UsageReport(Wire):
    """Part of a Gather's usage: rows the operator adds to its history as they come."""

    type: Literal["usage"] = "usage"
    id: str = Field(max_length=100)
    rows: tuple[UsageRow, ...] = Field(default=(), max_length=MAX_USAGE_ROWS)


class Gathered(Wire):
    """A Gather's end: the recent requests it asked for, newest first, or oldest first when it
    asked for those ``after`` a position (its UsageReport parts came before it, on the same
    stream). Asked with ``cursor``: where the records stand after these (``position``), and
    how many records past ``after`` the replica no longer holds (``lost``); left out
    otherwise."""

    type: Literal["gathered"] = "gathered"
    id: str = Field(max_length=100)
    requests: tuple[RecentRequest, ...] = Field(default=(), max_length=MAX_RECENT)
    position: Position | None = None
    lost: Count = 0


# What a replica of an earlier release does not read, left out of what it is sent.
CURSOR_FIELDS: dict[str, set[str]] = {"requests": {"cursor", "after"}}
# What an operator of an earlier release does not read, left out of what it is answered.
POSITION_FIELDS = {"position", "lost"}


ReplicaMessage = (
    Ack
    | Nack
    | Resync
    | ConnectionTestResult
    | Goodbye
    | Throttled
    | RenewalsBounded
    | UsageReport
    | Gathered
    | GrantsAnswered
)

# --- Reading ------------------------------------------------------------------------------------


class Unreadable(ValueError):
    """A message that is none of its side's types; what can be told of it travels with it."""

    def __init__(self, reason: str, kind: str, test_id: str) -> None:
        super().__init__(reason)
        self.kind = kind  # its "type", when it had a readable one
        self.test_id = test_id  # its "id", when it was a connection test's


class _Head(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = ""
    id: str = ""


_operator_frame: TypeAdapter[OperatorFrame] = TypeAdapter(
    Annotated[OperatorFrame, Field(discriminator="type")]
)
_replica_message: TypeAdapter[ReplicaMessage] = TypeAdapter(
    Annotated[ReplicaMessage, Field(discriminator="type")]
)


def read_operator_frame(payload: bytes) -> OperatorFrame:
    try:
        return _operator_frame.validate_json(payload)
    except ValidationError as error:
        raise _unreadable(payload, error) from None


def read_replica_message(data: str | bytes) -> ReplicaMessage:
    try:
        return _replica_message.validate_json(data)
    except ValidationError as error:
        raise _unreadable(data, error) from None


def _unreadable(data: str | bytes, error: ValidationError) -> Unreadable:
    try:
        head = _Head.model_validate_json(data)
    except ValidationError:
        head = _Head()
    first = error.errors()[0] if error.errors() else None
    if first is None:
        reason = str(error)
    else:
        # The field's path without the union's tag, as a person would name it.
        where = ".".join(str(part) for part in first["loc"] if part != head.type)
        reason = f"{where}: {first['msg']}" if where else first["msg"]
    return Unreadable(reason[:1000], head.type[:40], head.id[:100])
