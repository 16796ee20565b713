"""Builds promtool, which unit-tests the chart's alerts, from the Go module pinned in
``dev/go/prometheus``.

Cached apart from the control plane (``make up`` never needs it) in a folder keyed by the
version, the go.sum contents and the Go toolchain. Built without Prometheus' service discoveries
(``remove_all_sd``): ``promtool test rules`` needs none, and they are most of its build.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gatehouse_dev.binaries import (
    GO_MODULES_DIR,
    _cache_key,
    _ensure,
    _go,
    _GoTarget,
    _required_version,
    _stripped,
    cache_root,
)

PROMETHEUS_MODULE_DIR = GO_MODULES_DIR / "prometheus"
PROMETHEUS = "github.com/prometheus/prometheus"
TAGS = "remove_all_sd"


@dataclass(frozen=True)
class _TaggedGoTarget(_GoTarget):
    tags: str = ""

    def build(self, partial: Path) -> None:
        _go(
            "build",
            "-trimpath",
            "-tags",
            self.tags,
            "-ldflags",
            self.ldflags(),
            "-o",
            str(partial),
            self.package,
            cwd=self.module_dir,
            cgo=self.cgo,
        )


def ensure_promtool() -> Path:
    """Returns the cached promtool, building it when missing."""
    version = _required_version((PROMETHEUS_MODULE_DIR / "go.mod").read_text(), PROMETHEUS)
    key = _cache_key(f"promtool-{version}-{TAGS}", (PROMETHEUS_MODULE_DIR,))
    directory = cache_root() / "bin" / key
    promtool = directory / "promtool"
    target = _TaggedGoTarget(
        promtool, f"{PROMETHEUS}/cmd/promtool", PROMETHEUS_MODULE_DIR, _stripped, False, TAGS
    )
    _ensure(directory, "promtool", [target])
    return promtool
