"""The local stack in the background: ``make up`` starts it, ``make down`` stops it.

State lives in ``.gatehouse/dev/`` of the checkout: the control plane's folder, the pids of what
was started, and ``env``, a file to source that points kubectl and the tools at the stack.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gatehouse_dev.binaries import ensure_binaries
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import ControlPlane
from gatehouse_dev.processes import terminate_pid


def _log(message: str) -> None:
    print(f"gatehouse: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StackPaths:
    root: Path

    @classmethod
    def for_checkout(cls) -> StackPaths:
        return cls(Path(os.environ.get("GATEHOUSE_DEV_DIR", ".gatehouse/dev")).resolve())

    @property
    def env_file(self) -> Path:
        return self.root / "env"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def controlplane(self) -> Path:
        return self.root / "controlplane"


def _running(pids: list[int]) -> bool:
    try:
        for pid in pids:
            os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return bool(pids)


def _user_kubeconfig(paths: StackPaths) -> Path | None:
    """The KUBECONFIG a user set for a cluster of their own, if any (ours does not count)."""
    configured = os.environ.get("KUBECONFIG")
    if not configured:
        return None
    path = Path(configured).resolve()
    return None if path.is_relative_to(paths.root) else path


def up(paths: StackPaths) -> Cluster:
    """Starts the stack unless it is already running; returns the cluster it uses."""
    binaries = ensure_binaries()
    existing = _user_kubeconfig(paths)
    if existing is not None:
        _log(f"using the cluster of KUBECONFIG={existing}; no local control plane is started")
        cluster = Cluster(kubeconfig=existing, binaries=binaries, local=False)
        _write_env(paths, cluster)
        return cluster

    if paths.state_file.exists():
        state = json.loads(paths.state_file.read_text())
        if _running(state["pids"]):
            _log(f"the local stack is already up (pids {state['pids']})")
            return Cluster(kubeconfig=Path(state["kubeconfig"]), binaries=binaries)
        _log("a previous local stack is gone; cleaning up after it")
        down(paths)

    paths.root.mkdir(parents=True, exist_ok=True)
    controlplane = ControlPlane(paths.controlplane, binaries)
    controlplane.start(detached=True)
    paths.state_file.write_text(
        json.dumps({"pids": controlplane.pids(), "kubeconfig": str(controlplane.kubeconfig)})
    )
    cluster = Cluster(kubeconfig=controlplane.kubeconfig, binaries=binaries)
    _write_env(paths, cluster)
    _log(
        f"control plane up at {controlplane.endpoints.apiserver_url}; "
        f"logs in {controlplane.logs}; `source {paths.env_file}` to use it"
    )
    return cluster


def _write_env(paths: StackPaths, cluster: Cluster) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    lines = [
        f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}",
        f'export PATH={shlex.quote(str(cluster.binaries.directory))}:"$PATH"',
    ]
    paths.env_file.write_text("\n".join(lines) + "\n")


def down(paths: StackPaths) -> None:
    if paths.state_file.exists():
        state = json.loads(paths.state_file.read_text())
        # Reverse start order: the API server before etcd.
        for pid in reversed(state["pids"]):
            terminate_pid(pid)
        _log(f"stopped pids {state['pids']}")
    shutil.rmtree(paths.controlplane, ignore_errors=True)
    for leftover in (paths.state_file, paths.env_file):
        leftover.unlink(missing_ok=True)
