"""How every HTTP surface of Gatehouse says no: ``{"error": {"code", "message"}}``.

The proxy's fetch path, the table channel and the service API answer alike, so that a client
reads one shape whichever it called. The code is stable and machine-readable; the message is for
people and never holds a secret.
"""

from __future__ import annotations


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}
