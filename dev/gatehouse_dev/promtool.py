"""Builds promtool, which unit-tests the chart's alerts, from the Go module pinned in
``dev/go/prometheus``.

Cached apart from the control plane (``make up`` never needs it) in a folder keyed by the
version, the go.sum contents and the Go toolchain. Built without Prometheus' service discoveries
(``remove_all_sd``): ``promtool test rules`` needs none, and they are most of its build.
"""

from __future__ import annotations

from pathlib import Path

from gatehouse_dev.binaries import GO_MODULES_DIR
from gatehouse_dev.go_tools import ensure_go_tool

PROMETHEUS_MODULE_DIR = GO_MODULES_DIR / "prometheus"
PROMETHEUS = "github.com/prometheus/prometheus"
TAGS = "remove_all_sd"


def ensure_promtool() -> Path:
    """Returns the cached promtool, building it when missing."""
    return ensure_go_tool(
        PROMETHEUS_MODULE_DIR,
        PROMETHEUS,
        f"{PROMETHEUS}/cmd/promtool",
        name="promtool",
        what="promtool",
        tags=TAGS,
    )
