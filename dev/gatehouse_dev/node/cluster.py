"""A single-node Kubernetes that runs Pods, inside namespaces of its own: ``make cluster-up``.

The host keeps its network, iptables rules, sysctls and cgroup mounts exactly as they were: every
server of the node runs under :mod:`gatehouse_dev.node.supervisor` in a new network, PID and
private mount namespace. The one thing on the host is a listening socket on 127.0.0.1, opened here
and handed down, through which kubectl and helm reach the node's API server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import yaml

from gatehouse_dev import controlplane, pki
from gatehouse_dev.binaries import Binaries, NodeBinaries, ensure_binaries, ensure_node_binaries
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import kubeconfig, webhook_client_ca
from gatehouse_dev.node import coredns, images, layout, policy, storage
from gatehouse_dev.node.layout import NodeFiles
from gatehouse_dev.processes import Server, StartupError, alive, children, log_tail
from gatehouse_dev.waiting import wait_for

STOP_SECONDS = 60.0


def _log(message: str) -> None:
    print(f"gatehouse: {message}", file=sys.stderr, flush=True)


def build() -> tuple[Binaries, NodeBinaries, Path, list[Path]]:
    """What the node needs before it starts: its binaries (kube-router's apart) and image
    archives, built or found in the cache. ``make test`` builds them before the suite, since a
    cold build (Go modules, a Debian base, the image) takes longer than any one test may."""
    node = ensure_node_binaries()
    kube_router = policy.ensure_kube_router()
    archives = [
        images.ensure_binary_image(node.pause, layout.PAUSE_IMAGE),
        images.ensure_binary_image(node.coredns, coredns.IMAGE),
        images.ensure_store_image(),
        *images.ensure_gatehouse_images(),
    ]
    return ensure_binaries(), node, kube_router, archives


class DevNode:
    """The node in ``workdir``; :meth:`start` returns the :class:`Cluster` that reaches it."""

    def __init__(self, workdir: Path) -> None:
        self.files = NodeFiles(workdir)
        self.server: Server | None = None

    def start(self, *, detached: bool = False, timeout: float = 300.0) -> Cluster:
        binaries, node, kube_router, archives = build()
        started = time.monotonic()
        self.files.config.mkdir(parents=True, exist_ok=True)
        self.files.ready_marker.unlink(missing_ok=True)
        (self.files.config / "images.json").write_text(json.dumps([str(a) for a in archives]))
        paths = self.files.config / "binaries.json"
        controlplane = {k: str(v) for k, v in asdict(binaries).items() if k != "versions"}
        paths.write_text(
            json.dumps(
                {
                    "controlplane": controlplane,
                    "node": {k: str(v) for k, v in asdict(node).items()},
                    "kube_router": str(kube_router),
                }
            )
        )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
            port = listener.getsockname()[1]
            self.server = Server(
                "node",
                [
                    "unshare",
                    "--net",
                    "--pid",
                    "--mount-proc",
                    "--propagation=private",
                    # If this process dies, the supervisor is told to tear the node down.
                    "--kill-child=SIGTERM",
                    "--",
                    sys.executable,
                    "-m",
                    "gatehouse_dev.node.supervisor",
                    f"--workdir={self.files.root}",
                    f"--listen-fd={listener.fileno()}",
                    f"--binaries={paths}",
                ],
                self.files.logs / "node.log",
            )
            self.server.start(detached=detached, pass_fds=(listener.fileno(),))
        try:
            self.server.wait_until(self.files.ready_marker.exists, timeout)
            cluster = self._cluster(port, binaries)
            wait_for(self._node_ready(cluster), timeout=120, interval=1, what="a Ready node")
            cluster.kubectl("apply", "--server-side", "-f", "-", stdin=coredns.manifests())
            # What a cluster gives a chart: the bundled store's claim binds to one of these.
            cluster.kubectl(
                "apply", "--server-side", "-f", "-", stdin=storage.manifests(self.files)
            )
            cluster.kubectl(
                "rollout",
                "status",
                "deployment/coredns",
                "-n",
                "kube-system",
                "--timeout=120s",
                timeout=130,
            )
        except (StartupError, TimeoutError) as error:
            self.stop()
            raise StartupError(
                f"{error}\nlast lines of {self.files.logs / 'node.log'}:\n"
                f"{log_tail(self.files.logs / 'node.log')}"
            ) from error
        _log(f"node ready in {time.monotonic() - started:.0f}s; KUBECONFIG={cluster.kubeconfig}")
        return cluster

    def _cluster(self, port: int, binaries: Binaries) -> Cluster:
        admin = pki.KeyPair(self.files.pki / "admin.crt", self.files.pki / "admin.key")
        config = kubeconfig(f"https://127.0.0.1:{port}", self.files.pki / "ca.crt", admin)
        self.files.host_kubeconfig.write_text(yaml.safe_dump(config))
        self.files.host_kubeconfig.chmod(0o600)
        return Cluster(
            kubeconfig=self.files.host_kubeconfig,
            binaries=binaries,
            webhook_client_ca=webhook_client_ca(self.files.controlplane),
        )

    @staticmethod
    def _node_ready(cluster: Cluster) -> Callable[[], bool]:
        def ready() -> bool:
            done = cluster.kubectl(
                "get",
                "node",
                layout.NODE_NAME,
                "-o",
                'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                check=False,
            )
            return done.stdout.strip() == "True"

        return ready

    def stop(self) -> None:
        if self.server is not None and self.server.process is not None:
            stop_node(self.server.pid)
            self.server.process.wait(timeout=STOP_SECONDS)
            self.server = None


def _supervisor_pid(unshare_pid: int) -> int | None:
    """The supervisor's pid on the host: the one child of ``unshare``."""
    try:
        started = children(unshare_pid)
    except OSError:
        return None
    return started[0] if started else None


def stop_node(unshare_pid: int) -> None:
    """SIGTERM to the supervisor, and wait while it tears the node down; then SIGKILL."""
    supervisor = _supervisor_pid(unshare_pid)
    target = supervisor or unshare_pid
    try:
        os.kill(target, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_SECONDS
    while alive(target) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(target):
        # The kernel ends every process of the node's PID namespace with its first one.
        os.kill(target, signal.SIGKILL)


def _state_file(root: Path) -> Path:
    return root / "state.json"


def up(root: Path) -> Cluster:
    """``make cluster-up``: the node in the background, with ``root/env`` to source."""
    state = _state_file(root)
    if state.exists():
        pid = json.loads(state.read_text())["pid"]
        if alive(pid):
            raise StartupError(f"the dev node is already up (pid {pid}); `make cluster-down` first")
        down(root)
    node = DevNode(root)
    cluster = node.start(detached=True)
    assert node.server is not None
    state.write_text(json.dumps({"pid": node.server.pid}))
    tools = cluster.binaries.directory
    (root / "env").write_text(
        f'export KUBECONFIG={cluster.kubeconfig}\nexport PATH={tools}:"$PATH"\n'
    )
    _log(f"`source {root / 'env'}` to use the node, `make cluster-down` to stop it")
    return cluster


def present_webhook_client(root: Path, namespace: str, secret: str) -> None:
    """``python -m gatehouse_dev cluster-webhook-client``: after ``helm install`` on the node, its
    API server presents the client certificate the release's webhook made (the Secret ``secret``
    in ``namespace``), as a cluster admin sets it up; until then the webhook refuses its calls."""
    files = NodeFiles(root)
    cluster = Cluster(
        kubeconfig=files.host_kubeconfig,
        binaries=ensure_binaries(),
        webhook_client_ca=webhook_client_ca(files.controlplane),
    )
    controlplane.present_webhook_client(cluster, namespace, secret)
    _log(f"the node's API server presents {namespace}/{secret} to the chart's webhook")


def down(root: Path) -> None:
    """``make cluster-down``: stops the node and deletes its folder."""
    state = _state_file(root)
    if state.exists():
        stop_node(json.loads(state.read_text())["pid"])
        _log("the dev node is stopped")
    shutil.rmtree(root, ignore_errors=True)
