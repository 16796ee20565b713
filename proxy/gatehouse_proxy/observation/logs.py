"""The proxy's log lines: text for people, or one JSON object per line for collectors.

Nothing logged here carries a credential, a query string or a header value; the format only
changes how the same messages are written.
"""

from __future__ import annotations

import logging

from gatehouse_contract.observability import JSONFormatter

FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str, log_format: str) -> None:
    """Root logging; uvicorn's loggers propagate here (it is given no config of its own)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter() if log_format == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
