"""The OpenTelemetry Collector the traces' tests export to: built from the Go module pinned in
``dev/go/otelcol`` (the OTLP receiver and the file exporter, nothing else) and cached like the
other dev binaries, and run on 127.0.0.1 writing every span it receives to a JSON-lines file.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gatehouse_dev.binaries import GO_MODULES_DIR
from gatehouse_dev.go_tools import ensure_go_tool
from gatehouse_dev.processes import Server, free_port

OTELCOL_MODULE_DIR = GO_MODULES_DIR / "otelcol"


def ensure_otelcol() -> Path:
    """Returns the cached collector, building it when missing."""
    return ensure_go_tool(
        OTELCOL_MODULE_DIR,
        "go.opentelemetry.io/collector/otelcol",
        "gatehouse.dev/dev/otelcol",
        name="otelcol",
        what="collector",
    )


def _config(port: int, output: Path) -> dict[str, Any]:
    return {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{port}"}}}},
        # Flushed at once, so a test reads what was received without waiting on a buffer.
        "exporters": {"file": {"path": str(output), "flush_interval": "100ms"}},
        "service": {
            "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["file"]}},
            # No metrics server of its own (it would take port 8888).
            "telemetry": {"metrics": {"level": "none"}},
        },
    }


class Collector:
    """One collector process: OTLP over HTTP at ``endpoint``, spans in ``output``."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.output = workdir / "spans.jsonl"
        config = workdir / "otelcol.json"  # JSON is YAML: the collector reads either
        config.write_text(json.dumps(_config(self.port, self.output)))
        self.server = Server(
            "otelcol", [str(ensure_otelcol()), f"--config=file:{config}"], workdir / "otelcol.log"
        )

    def start(self) -> None:
        self.server.start(detached=False)
        self.server.wait_until(self._listening, timeout=30)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        self.server.stop()

    def spans(self) -> Iterator[dict[str, Any]]:
        """Every span received so far (OTLP JSON: ids in hex), with its resource's attributes
        under ``resource``."""
        if not self.output.exists():
            return
        for line in self.output.read_text().splitlines():
            for resource_spans in json.loads(line).get("resourceSpans", []):
                resource = {
                    item["key"]: next(iter(item["value"].values()))
                    for item in resource_spans.get("resource", {}).get("attributes", [])
                }
                for scope_spans in resource_spans.get("scopeSpans", []):
                    for span in scope_spans.get("spans", []):
                        yield {**span, "resource": resource}
