"""The dev tools built from a Go module of their own under ``dev/go`` (promtool, the
OpenTelemetry Collector, kube-router), each cached like the control plane's binaries in a folder
keyed by its version, its module's go.sum and the Go toolchain.

A tool's key holds its recipe (``binaries.recipe``: its package, tags and the code that builds
it), so a tool added or changed here rebuilds nothing else.
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
    recipe,
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

    def target(directory: Path) -> _GoTarget:
        binary = directory / name
        if tags:
            return _TaggedGoTarget(binary, package, module_dir, _stripped, False, tags)
        return _GoTarget(binary, package, module_dir, _stripped, cgo=False)

    how = recipe([target(Path())], _stripped, _TaggedGoTarget.build) + f"\ntags={tags}"
    directory = cache_root() / "bin" / _cache_key(prefix, (module_dir,), how)
    _ensure(directory, what, [target(directory)])
    return directory / name
