"""What both programs say of themselves alike: their build, their log lines, their process.

One release's operator and proxy are read side by side in one log pipeline and one Prometheus:
the same JSON fields in each line, and the same ``*_build_info`` and process series.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
import platform

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Gauge,
)


def version() -> str:
    """The installed release's version ("unknown" when run from a tree that is not installed)."""
    try:
        return importlib.metadata.version("gatehouse")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def register_process_metrics(registry: CollectorRegistry, program: str) -> None:
    """``gatehouse_<program>_build_info`` and Prometheus' default ``process_*`` and ``python_*``
    series, in a registry of the program's own (its default registry is not served)."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    Gauge(
        f"gatehouse_{program}_build_info",
        "1, labelled with the running release's version and Python's.",
        ["version", "python_version"],
        registry=registry,
    ).labels(version(), platform.python_version()).set(1)


# Fields a line may carry besides the schema's own, given as logging's ``extra``: the proxy's
# audit trail sets them (the fetch, and its trace id).
STRUCTURED_FIELDS = ("trace_id", "request")


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and, when the
    line is about a Kubernetes object, ``object`` (kopf's reference to it); an audit line has
    ``trace_id`` and ``request`` too."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        reference = getattr(record, "k8s_ref", None)
        if reference:
            entry["object"] = reference
        for name in STRUCTURED_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
