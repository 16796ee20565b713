"""The dev node's cgroups: one root folder per mounted hierarchy, made at start, removed at stop.

The machine mounts cgroup v1 hierarchies (plus v2 at ``unified``) and they are never remounted:
kubelet and runc put every Pod below ``/<root>`` of each, so removing those folders, deepest
first once their processes are gone, leaves the host's cgroups as they were.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")


def _hierarchies() -> Iterator[Path]:
    for entry in sorted(CGROUP_MOUNT.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            yield entry


def prepare(root: str) -> None:
    for hierarchy in _hierarchies():
        folder = hierarchy / root
        folder.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            # A new v1 cpuset starts with no CPUs and no memory nodes: nothing could run in it.
            for name in ("cpuset.cpus", "cpuset.mems"):
                (folder / name).write_text((hierarchy / name).read_text())


def remove(root: str) -> list[Path]:
    """Removes ``root`` in every hierarchy, deepest first; returns what could not be removed."""
    left: list[Path] = []
    for hierarchy in _hierarchies():
        top = hierarchy / root
        if not top.is_dir():
            continue
        for folder, _, _ in sorted(os.walk(top), key=lambda entry: -entry[0].count("/")):
            with contextlib.suppress(FileNotFoundError):
                try:
                    Path(folder).rmdir()
                except OSError:
                    left.append(Path(folder))
    return left
