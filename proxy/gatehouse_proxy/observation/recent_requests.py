"""The replica's recent requests (the inspector): its last fetches per connection and per app.

A record is a small tuple of names, codes, sizes, times and the path the app asked for with its
query and matrix-parameter values replaced (:func:`scrubbed_path`): never a header value or a
body. Records live in
memory only, for as long as the bounds leave them:

- at most ``per_route`` (200) per connection and as many per app, the newest;
- at most ``per_namespace`` (5,000) per namespace, so that one tenant's traffic keeps at most a
  quarter of the whole and cannot push every other tenant's history out;
- at most ``total`` (20,000) in all, the oldest going first.

A record is shared by its connection's list, its app's list and the two queues that enforce the
namespace and total bounds. A record a namespace's bound takes stays in the total's queue (a
deque cannot lose an element from its middle cheaply) but no longer counts against ``total``;
when that queue holds a quarter more than ``total`` it is rebuilt without them. So at most
``1.25 * total`` records are held whatever the number of connections, and one tenant's traffic
never takes another's place under ``total`` (docs/operating/inspector-and-audit.md, "The
inspector, usage and the audit trail", has the bytes measured at 10,000 connections).

A follower (``gatehouse requests -f``) is given the records after where it stands
(:class:`~gatehouse_contract.activity.Position`), oldest first: a record's ``seq`` (the replica's
count, kept in the order records are added) says which it was given, and each connection's and
app's count of the records it ever kept (``Route.dropped`` plus those held) says how many past
its position were taken by the bounds before it asked (``lost``). A route whose every record was
taken is forgotten, its count kept among the last ``EMPTIED`` such routes', so its numbers go on
when it is used again.
"""

from __future__ import annotations

import re
import secrets
from bisect import bisect_right
from collections import deque
from typing import NamedTuple

from gatehouse_contract.activity import (
    MAX_PATH_CHARS,
    SCRUBBED_VALUE,
    START,
    Position,
    RequestsQuery,
)
from gatehouse_contract.routes import namespace_of

PER_ROUTE = 200
PER_NAMESPACE = 5_000
TOTAL = 20_000
EMPTIED = 10_000  # routes whose count is kept after their last record was taken

# Bytes a path may keep as they came: printable ASCII without a space.
_PRINTABLE = bytes(range(0x21, 0x7F))
_VALUES = re.compile(rb"=[^&]*")
_SCRUBBED = b"=" + SCRUBBED_VALUE.encode()
_BARE = SCRUBBED_VALUE.encode()
# A path segment's parameters (RFC 3986 3.3: "/items;sid=...", Java's ";jsessionid="), each
# running to the next ";" or "/"; a "%3B" is data in a segment, as servers read it.
_MATRIX = re.compile(rb";([^;/=]*)(=[^;/]*)?")


def _matrix_scrubbed(parameter: re.Match[bytes]) -> bytes:
    if parameter[2] is not None:
        return b";" + parameter[1] + _SCRUBBED
    return b";" + _BARE if parameter[1] else b";"


class Record(NamedTuple):
    seq: int
    time: float  # when the answer ended (or the request was refused), seconds since the epoch
    app: str  # the app's routing key, namespace/Kind/name
    connection: str  # the connection's routing key, namespace/name; "" if none was found
    method: str
    path: str
    status: int
    code: str
    duration_ms: float
    request_bytes: int
    response_bytes: int
    trace_id: str
    viewer: str = ""  # the verified viewer's id; "" when none, or when the installation keeps none
    cache: str = ""  # what the connection's cache did (Fetch.cache); "" none


def scrubbed_path(raw_path: bytes, query: bytes) -> str:
    """The path as the app sent it (percent-encoded, relative to the connection's base URL),
    with each query parameter's value replaced and a parameter without ``=`` replaced whole
    (it may be a bare token): ``/items?page=*&q=*``; a path segment's parameters alike:
    ``/items;sid=*;*/2``. The segments themselves are kept. Bytes outside printable ASCII are
    percent-encoded, so a record prints on one line; cut at MAX_PATH_CHARS."""
    if b";" in raw_path:
        raw_path = _MATRIX.sub(_matrix_scrubbed, raw_path)
    path = _printable(raw_path)
    if query:
        # From each parameter's first "=" to its end: a value's own "=" go with it.
        scrubbed = _VALUES.sub(_SCRUBBED, query)
        if scrubbed.count(b"=") != scrubbed.count(b"&") + 1:  # a parameter without "="
            scrubbed = b"&".join(part if b"=" in part else _BARE for part in scrubbed.split(b"&"))
        path += "?" + _printable(scrubbed)
    if len(path) > MAX_PATH_CHARS:
        return path[:MAX_PATH_CHARS] + "…"
    return path


class Route:
    """One connection's or app's records, oldest first, and how many it held were taken."""

    __slots__ = ("dropped", "records")

    def __init__(self, dropped: int) -> None:
        self.records: list[Record] = []
        self.dropped = dropped


class Page(NamedTuple):
    """A follower's next records (oldest first), where it then stands, and how many records past
    where it stood the replica no longer held."""

    records: list[Record]
    position: Position
    lost: int


def _printable(raw: bytes) -> str:
    if not raw.translate(None, _PRINTABLE):
        return raw.decode("ascii")
    return "".join(chr(byte) if 0x21 <= byte < 0x7F else f"%{byte:02X}" for byte in raw)


class RecentRequests:
    def __init__(
        self, per_route: int = PER_ROUTE, per_namespace: int = PER_NAMESPACE, total: int = TOTAL
    ) -> None:
        self.per_route = per_route
        self.per_namespace = per_namespace
        self.total = total
        # Oldest first, everywhere.
        self._all: deque[Record] = deque()
        self._namespaces: dict[str, deque[Record]] = {}
        self._connections: dict[str, Route] = {}
        self._apps: dict[str, Route] = {}
        self._taken: set[int] = set()  # seqs of records in ``_all`` a namespace's bound took
        self._emptied: dict[str, int] = {}  # a forgotten route's ``dropped``, oldest first
        # This process's records: a restarted replica counts from 1 again under a new one.
        self.instance = secrets.token_hex(8)
        self._seq = 0

    def next_seq(self) -> int:
        """The next record's ``seq``: records are added in the order of their seqs."""
        self._seq += 1
        return self._seq

    def __len__(self) -> int:
        """Records in the namespaces' queues: what counts against ``total``."""
        return len(self._all) - len(self._taken)

    def add(self, record: Record, namespace: str) -> None:
        """Keeps ``record`` (of ``namespace``, its app's) as the newest."""
        self._all.append(record)
        kept = self._namespaces.get(namespace)
        if kept is None:
            kept = self._namespaces[namespace] = deque()
        kept.append(record)
        for lists, key in ((self._connections, record.connection), (self._apps, record.app)):
            if not key:
                continue
            found = lists.get(key)
            if found is None:
                found = lists[key] = Route(self._emptied.pop(key, 0))
            found.records.append(record)
            if len(found.records) > self.per_route:
                del found.records[0]
                found.dropped += 1
        if len(kept) > self.per_namespace:
            taken = kept.popleft()
            self._unlist(taken)
            self._taken.add(taken.seq)
        while len(self) > self.total:
            oldest = self._all.popleft()
            if oldest.seq in self._taken:
                self._taken.discard(oldest.seq)
                continue
            # The oldest record kept is the oldest of its namespace's queue.
            oldest_namespace = namespace_of(oldest.app)
            queue = self._namespaces[oldest_namespace]
            queue.popleft()
            if not queue:
                del self._namespaces[oldest_namespace]
            self._unlist(oldest)
        if len(self._all) > self.total + self.total // 4:  # rebuilt every total/4 at most
            self._all = deque(r for r in self._all if r.seq not in self._taken)
            self._taken.clear()

    def _unlist(self, record: Record) -> None:
        """Takes the oldest record of its namespace out of its route lists, where it is first
        unless their own bound took it already."""
        for lists, key in ((self._connections, record.connection), (self._apps, record.app)):
            found = lists.get(key)
            if found and found.records[0] is record:
                del found.records[0]
                found.dropped += 1
                if not found.records:
                    del lists[key]
                    self._emptied[key] = found.dropped
                    if len(self._emptied) > EMPTIED:
                        del self._emptied[next(iter(self._emptied))]

    def _route(self, query: RequestsQuery) -> tuple[list[Record], int]:
        """The records of the connection or app ``query`` asks about, and how many it dropped."""
        key = query.connection or query.app
        found = (self._connections if query.connection else self._apps).get(key)
        if found is None:
            return [], self._emptied.get(key, 0)
        return found.records, found.dropped

    def position(self, query: RequestsQuery) -> Position:
        """Where a follower given every record of ``query``'s route stands."""
        records, dropped = self._route(query)
        return Position(
            instance=self.instance,
            seq=records[-1].seq if records else 0,
            number=dropped + len(records),
        )

    def after(self, query: RequestsQuery, after: Position) -> Page:
        """The records of ``query``'s route after ``after``, oldest first, at most
        ``query.limit``; where the follower then stands; how many past ``after`` were taken.
        ``after`` of another process (or START): every record this one holds is new."""
        if after.instance != self.instance:
            after = START
        records, dropped = self._route(query)
        first = bisect_right(records, after.seq, key=lambda record: record.seq)
        chosen = records[first : first + query.limit]
        lost = max(0, dropped + first - after.number)
        newest = Position(
            instance=self.instance,
            seq=chosen[-1].seq if chosen else after.seq,
            number=dropped + first + len(chosen),
        )
        if query.connection and query.app:  # both named: the connection's records of the app
            chosen = [record for record in chosen if record.app == query.app]
        return Page(chosen, newest, lost)

    def recent(self, query: RequestsQuery) -> list[Record]:
        """The newest records the query asks for, newest first."""
        found, _ = self._route(query)
        chosen: list[Record] = []
        for record in reversed(found):
            if record.time <= query.since:
                break  # a list is in the order its records ended
            if query.app and record.app != query.app:
                continue
            chosen.append(record)
            if len(chosen) == query.limit:
                break
        return chosen
