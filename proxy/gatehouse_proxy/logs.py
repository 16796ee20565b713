"""The proxy's log lines: text for people, or one JSON object per line for collectors.

Nothing logged here carries a credential, a query string or a header value; the format only
changes how the same messages are written.
"""

from __future__ import annotations

import datetime
import json
import logging

FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(level: str, log_format: str) -> None:
    """Root logging; uvicorn's loggers propagate here (it is given no config of its own)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter() if log_format == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
