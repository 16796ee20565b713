"""The dev tools built from a Go module of their own under ``dev/go`` (promtool, the
OpenTelemetry Collector, kube-router), each cached like the control plane's binaries in a folder
keyed by its version, its module's go.sum and the Go toolchain.

Apart from ``binaries`` because that file's own bytes key every cached control-plane folder: a
tool added or changed here rebuilds nothing else. What a build does is not in a tool's key, so a
change to the flags below changes the tool's name prefix too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gatehouse_dev.binaries import (
    _cache_key,
    _ensure,
    _go,
    _GoTarget,
    _required_version,
    _stripped,
    cache_root,
)


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


def ensure_go_tool(
    module_dir: Path, versioned_by: str, package: str, *, name: str, what: str, tags: str = ""
) -> Path:
    """The cached binary ``name`` of ``package`` (static: no cgo), built from ``module_dir``
    when missing; its version is the one ``module_dir``'s go.mod requires of ``versioned_by``."""
    version = _required_version((module_dir / "go.mod").read_text(), versioned_by)
    prefix = f"{name}-{version}" + (f"-{tags}" if tags else "")
    directory = cache_root() / "bin" / _cache_key(prefix, (module_dir,))
    binary = directory / name
    target = (
        _TaggedGoTarget(binary, package, module_dir, _stripped, False, tags)
        if tags
        else _GoTarget(binary, package, module_dir, _stripped, cgo=False)
    )
    _ensure(directory, what, [target])
    return binary
