"""Session fixture: a real single-node cluster that runs Pods, and the host's state around it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.node import cgroups, layout
from gatehouse_dev.node.cluster import DevNode


def host_state(*, node_running: bool = False) -> dict[str, str]:
    """What the node must never change on the host: links, addresses, routes, firewall rules,
    kernel settings, mounts and cgroups. The kernel has one cgroup tree, so a running node's own
    folders (below ``gatehouse-node`` in each hierarchy) are the one thing it adds, until it stops.
    """

    def run(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    sysctls = ["net/ipv4/ip_forward", *layout.KUBELET_SYSCTLS]
    return {
        "links": run("ip", "-o", "link"),
        "addresses": run("ip", "-o", "addr"),
        "routes": run("ip", "route", "show", "table", "all"),
        "iptables": run("iptables-save"),
        "sysctls": "\n".join(f"{k}={(Path('/proc/sys') / k).read_text().strip()}" for k in sysctls),
        "mounts": "\n".join(
            line.split(" - ")[0].split(" ", 4)[4]  # mount point and options, not ids
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
        ),
        "cgroups": "\n".join(
            str(path)
            for hierarchy in sorted(cgroups.CGROUP_MOUNT.iterdir())
            if hierarchy.is_dir()
            for path in sorted(hierarchy.iterdir())
            if path.is_dir() and not (node_running and path.name == layout.CGROUP_ROOT)
        ),
    }


@pytest.fixture(scope="session")
def host_before() -> dict[str, str]:
    return host_state()


@pytest.fixture(scope="session")
def node(
    host_before: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    dev_node = DevNode(tmp_path_factory.mktemp("node"))
    cluster = dev_node.start()
    try:
        yield cluster
    finally:
        dev_node.stop()
    assert host_state() == host_before, "the node left the host changed"
