"""Session fixtures: one real control plane for the whole run (or the user's cluster)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatehouse_dev.binaries import ensure_binaries
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import ControlPlane


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    binaries = ensure_binaries()
    configured = os.environ.get("KUBECONFIG")
    if configured:
        yield Cluster(kubeconfig=Path(configured), binaries=binaries, local=False)
        return
    controlplane = ControlPlane(tmp_path_factory.mktemp("controlplane"), binaries)
    controlplane.start()
    try:
        yield controlplane.cluster()
    finally:
        controlplane.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test: a bare API server never finishes deleting one, so never reuse."""
    name = f"gh-test-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
