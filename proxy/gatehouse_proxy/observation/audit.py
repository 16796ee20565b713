"""The audit trail: one log line per proxied request, when the installation asks for it.

Off unless ``GATEHOUSE_AUDIT_LOG=on`` (the chart's ``proxy.auditLog.enabled``), and then written
for a share of requests (``GATEHOUSE_AUDIT_SAMPLE``, 0 to 1, default 1: every one). A line is the
inspector's record (``recent_requests.Record``) and this replica's name, in the programs' one log
schema: with ``--log-format json``, ``trace_id`` and ``request`` beside ``time``, ``level``,
``logger`` (``gatehouse.proxy.audit``) and ``message``. It holds what the record holds (the
viewer's id too, unless ``viewers.recordViewerIds`` is off), never a header value, a body or a
query value; it is written whatever the log level (it is opted into).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from gatehouse_proxy.observation.recent_requests import Record

log = logging.getLogger("gatehouse.proxy.audit")


@dataclass(frozen=True)
class AuditSettings:
    enabled: bool = False
    sample_rate: float = 1.0


class AuditTrail:
    def __init__(self, settings: AuditSettings, replica: str) -> None:
        self.enabled = settings.enabled and settings.sample_rate > 0
        self.sample_rate = settings.sample_rate
        self.replica = replica
        if self.enabled:
            log.setLevel(logging.INFO)

    def chosen(self) -> bool:
        """Whether this fetch is written: asked before its line is made, which costs."""
        if not self.enabled:
            return False
        return self.sample_rate >= 1 or random.random() < self.sample_rate  # noqa: S311

    def write(self, record: Record) -> None:
        """The line of a fetch that was :meth:`chosen`."""
        request = {
            "app": record.app,
            "connection": record.connection,
            "method": record.method,
            "path": record.path,
            "status": record.status,
            "code": record.code,
            "duration_ms": round(record.duration_ms, 3),
            "request_bytes": record.request_bytes,
            "response_bytes": record.response_bytes,
            "replica": self.replica,
        }
        if record.viewer:
            request["viewer"] = record.viewer
        log.info(
            "%s %s %s -> %d %s in %.1f ms (%d B in, %d B out) app=%s viewer=%s replica=%s "
            "trace_id=%s",
            record.method,
            record.connection or "-",
            record.path,
            record.status,
            record.code,
            record.duration_ms,
            record.request_bytes,
            record.response_bytes,
            record.app,
            record.viewer or "-",
            self.replica,
            record.trace_id,
            extra={"trace_id": record.trace_id, "request": request},
        )
