"""A cached answer: the vendor's answer as the app was sent it (scrubbed, its headers filtered),
and the times that say whether it may still be served.

Times are wall-clock seconds (every replica's clock is the node's, kept by NTP); an answer is
*fresh* until ``fresh_until``, then *stale*: served still while revalidated
(``stale-while-revalidate``) or when the vendor fails (``stale-if-error``), revalidated with a
conditional request where it has a validator, and gone from the store once no window is left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gatehouse_proxy.errors import ProxyException

# The encoding's version: an entry of another is read as a miss (the store keeps it till it ends).
_FORMAT = 1


class UnreadableAnswer(ProxyException):
    """Bytes that are no answer of this format."""


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    status: int
    headers: tuple[tuple[str, str], ...]  # as relayed to the app, the proxy's own excepted
    body: bytes
    stored_at: float  # when the vendor's answer (or its 304) arrived
    fresh_until: float
    stale_while_revalidate: int  # seconds past fresh_until
    stale_if_error: int
    # The request headers the answer varies on and their values in the request that made it.
    vary: tuple[tuple[str, str], ...] = ()
    etag: str = ""
    last_modified: str = ""

    def age(self, now: float) -> int:
        return max(0, int(now - self.stored_at))

    def fresh(self, now: float) -> bool:
        return now < self.fresh_until

    def usable_while_revalidating(self, now: float) -> bool:
        return now < self.fresh_until + self.stale_while_revalidate

    def usable_on_error(self, now: float) -> bool:
        return now < self.fresh_until + self.stale_if_error

    @property
    def revalidatable(self) -> bool:
        return bool(self.etag or self.last_modified)

    def conditions(self) -> list[tuple[str, str]]:
        """The conditional request's headers (RFC 9111 4.3.1)."""
        conditions = []
        if self.etag:
            conditions.append(("If-None-Match", self.etag))
        if self.last_modified:
            conditions.append(("If-Modified-Since", self.last_modified))
        return conditions

    def matches(self, request_headers: dict[str, str]) -> bool:
        """Whether a request (its headers, names lower case, lines joined) selects this answer
        (RFC 9111 4.1): each header it varies on has the same value, or is absent in both."""
        return all(request_headers.get(name, "") == value for name, value in self.vary)

    def encode(self) -> bytes:
        head = {
            "f": _FORMAT,
            "s": self.status,
            "h": self.headers,
            "t": self.stored_at,
            "u": self.fresh_until,
            "w": self.stale_while_revalidate,
            "e": self.stale_if_error,
            "v": self.vary,
            "g": self.etag,
            "m": self.last_modified,
        }
        return json.dumps(head, separators=(",", ":")).encode() + b"\n" + self.body

    @classmethod
    def decode(cls, data: bytes) -> CachedAnswer:
        head, _, body = data.partition(b"\n")
        try:
            read = json.loads(head)
            if read["f"] != _FORMAT:
                raise UnreadableAnswer("another format")
            return cls(
                status=int(read["s"]),
                headers=tuple((str(name), str(value)) for name, value in read["h"]),
                body=body,
                stored_at=float(read["t"]),
                fresh_until=float(read["u"]),
                stale_while_revalidate=int(read["w"]),
                stale_if_error=int(read["e"]),
                vary=tuple((str(name), str(value)) for name, value in read["v"]),
                etag=str(read["g"]),
                last_modified=str(read["m"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise UnreadableAnswer(str(error)) from None
