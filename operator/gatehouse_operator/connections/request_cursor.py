"""A follower's cursor (``gatehouse requests -f``, the service API's ``after``): where it stands
in each replica's records of one connection or app, as the text an answer's ``cursor`` gives and
the next ask sends back unchanged.

URL-safe base64 of ``{"replica": [instance, seq, number]}`` (``Position``, by replica name). A
long follow across rollouts keeps the names of replicas gone (one that comes back goes on where
it was), at most ``MAX_REPLICAS``, those not heard from most recently dropped first.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping

from pydantic import TypeAdapter, ValidationError

from gatehouse_contract.activity import Position
from gatehouse_operator.connections.errors import Refused

MAX_REPLICAS = 64
MAX_CHARS = 16_384  # 64 replicas' positions take about 10,000
_POSITIONS = TypeAdapter(dict[str, tuple[str, int, int]])
_BAD = "after: give the cursor an earlier answer's `cursor` gave, unchanged"


def read(raw: str | None) -> dict[str, Position] | None:
    """The positions ``raw`` holds; None when absent (a first page). A 400 naming ``after``
    when it is not a cursor an answer gave."""
    if raw is None or raw == "":
        return None
    if len(raw) > MAX_CHARS:
        raise Refused(400, "invalid_request", f"{_BAD} (at most {MAX_CHARS} characters)")
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        found = _POSITIONS.validate_json(text)
        positions = {
            name: Position(instance=instance, seq=seq, number=number)
            for name, (instance, seq, number) in found.items()
        }
    except (binascii.Error, ValueError, ValidationError):
        raise Refused(400, "invalid_request", _BAD) from None
    if len(positions) > MAX_REPLICAS or any(len(name) > 253 for name in positions):
        raise Refused(400, "invalid_request", _BAD)
    return positions


def written(before: Mapping[str, Position] | None, now: Mapping[str, Position]) -> str:
    """The cursor after a page: each replica's position as it answered (``now``), else as the
    follower held it (``before``)."""
    merged = {name: where for name, where in (before or {}).items() if name not in now}
    merged.update(now)
    kept = list(merged.items())[-MAX_REPLICAS:]
    text = json.dumps(
        {name: [where.instance, where.seq, where.number] for name, where in kept},
        separators=(",", ":"),
    )
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
