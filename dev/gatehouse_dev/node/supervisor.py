"""The dev node's supervisor: PID 1 of the node's own PID, network and mount namespaces.

Started by :mod:`gatehouse_dev.node.cluster` as
``unshare --net --pid --mount-proc --propagation private --kill-child=SIGTERM -- python -m
gatehouse_dev.node.supervisor``. It makes the node's network (a veth pair; nothing on the host),
shows kubelet the kernel settings it wants (bind mounts in this mount namespace only), runs etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and
kube-router's network policy controller (the bridge CNI enforces no NetworkPolicy), and
relays the host's connections to the API server through a listening socket the host opened and
handed down. On SIGTERM it kills everything and removes the cgroups it made. If it is killed
outright the kernel ends every process of the PID namespace with it, and the next node start
removes the empty cgroups left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import yaml

from gatehouse_dev import pki
from gatehouse_dev.binaries import Binaries, NodeBinaries, Versions
from gatehouse_dev.controlplane import ControlPlane, Endpoints, kubeconfig
from gatehouse_dev.node import cgroups, layout, policy
from gatehouse_dev.node.layout import NodeFiles
from gatehouse_dev.processes import Server, StartupError

RELAY_BUFFER = 64 * 1024
NODE_REGISTERED_SECONDS = 60.0


def _log(message: str) -> None:
    print(f"node: {message}", flush=True)


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StartupError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")


def _succeeds(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _mount(*args: str) -> None:
    _run("mount", *args)


def make_network() -> None:
    _run("ip", "link", "set", "lo", "up")
    _run("ip", "link", "add", "gh-node", "type", "veth", "peer", "name", "gh-gateway")
    _run("ip", "addr", "add", f"{layout.NODE_IP}/24", "dev", "gh-node")
    _run("ip", "link", "set", "gh-node", "up")
    _run("ip", "link", "set", "gh-gateway", "up")
    _run("ip", "route", "add", "default", "via", layout.GATEWAY_IP, "dev", "gh-node")
    # Per network namespace: Service traffic between Pods is routed, and bridged packets must
    # pass kube-proxy's rules.
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    Path("/proc/sys/net/bridge/bridge-nf-call-iptables").write_text("1")


def make_mounts(files: NodeFiles) -> None:
    for target in ("/run", "/var/log"):
        _mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", target)
    for folder in (Path("/var/log/pods"), Path("/var/log/containers"), layout.RUN_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    pod_logs = files.logs / "pods"
    pod_logs.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(pod_logs), "/var/log/pods")
    etc = files.config / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "hosts").write_text(layout.hosts_file())
    (etc / "resolv.conf").write_text(layout.resolv_conf())
    for name in ("hosts", "resolv.conf"):
        _mount("--bind", str(etc / name), f"/etc/{name}")
    sysctls = files.config / "sysctl"
    for key, value in layout.KUBELET_SYSCTLS.items():
        live = Path("/proc/sys") / key
        if live.read_text().strip() == value:
            continue
        shown = sysctls / key.replace("/", ".")
        shown.parent.mkdir(parents=True, exist_ok=True)
        shown.write_text(value + "\n")
        _mount("--bind", "-o", "ro", str(shown), str(live))


def write_configs(files: NodeFiles) -> None:
    (files.config / "cni").mkdir(parents=True, exist_ok=True)
    (files.config / "cni" / "10-gatehouse-node.conflist").write_text(layout.cni_config())
    (files.config / "containerd.toml").write_text(layout.containerd_config(files))
    (files.config / "kubelet.yaml").write_text(layout.kubelet_config(files))
    (files.config / "resolv.conf").write_text(layout.resolv_conf())


def component_kubeconfig(
    files: NodeFiles, ca: pki.CertificateAuthority, name: str, user: str, groups: tuple[str, ...]
) -> Path:
    pair = ca.issue(name, user, organizations=groups, client=True)
    path = files.config / f"{name}.kubeconfig"
    server = f"https://127.0.0.1:{layout.APISERVER_PORT}"
    path.write_text(yaml.safe_dump(kubeconfig(server, ca.cert_path, pair)))
    return path


class Supervisor:
    def __init__(
        self, files: NodeFiles, binaries: Binaries, node: NodeBinaries, kube_router: Path
    ) -> None:
        self.files = files
        self.binaries = binaries
        self.node = node
        self.kube_router = kube_router
        self.controlplane = ControlPlane(
            files.controlplane,
            binaries,
            endpoints=Endpoints(etcd_port=layout.ETCD_PORT, apiserver_port=layout.APISERVER_PORT),
            apiserver_flags={
                "bind-address": "0.0.0.0",  # noqa: S104 (only the node's own network namespace)
                "advertise-address": layout.NODE_IP,
                "authorization-mode": "Node,RBAC",
                "disable-admission-plugins": "",
                "enable-admission-plugins": "NodeRestriction",
                "service-cluster-ip-range": layout.SERVICE_CIDR,
                "kubelet-client-certificate": str(files.pki / "apiserver-kubelet-client.crt"),
                "kubelet-client-key": str(files.pki / "apiserver-kubelet-client.key"),
                # Else it asks the host's DNS server for the node's name, and times out.
                "kubelet-preferred-address-types": "InternalIP,Hostname",
            },
            serving_hosts=(
                layout.NODE_IP,
                "10.96.0.1",
                "kubernetes",
                "kubernetes.default",
                f"kubernetes.default.svc.{layout.CLUSTER_DOMAIN}",
            ),
        )
        self.servers: list[Server] = []

    def _server(self, name: str, argv: Iterable[str]) -> Server:
        server = Server(name, list(argv), self.files.logs / f"{name}.log")
        server.start(detached=False)
        self.servers.append(server)
        return server

    def start(self) -> None:
        write_configs(self.files)
        _log("starting etcd and kube-apiserver")
        self.controlplane.start(before_apiserver=self._before_apiserver, timeout=90)
        ca = self.controlplane.ca
        pki_dir = self.files.pki
        sa_key = pki_dir / "service-account.key"
        kcm = component_kubeconfig(
            self.files, ca, "kube-controller-manager", "system:kube-controller-manager", ()
        )
        scheduler = component_kubeconfig(
            self.files, ca, "kube-scheduler", "system:kube-scheduler", ()
        )
        kubelet = component_kubeconfig(
            self.files, ca, "kubelet", f"system:node:{layout.NODE_NAME}", ("system:nodes",)
        )
        proxy = component_kubeconfig(self.files, ca, "kube-proxy", "system:kube-proxy", ())
        ca.issue("kubelet-serving", layout.NODE_NAME, hosts=(layout.NODE_IP, layout.NODE_NAME))
        _log("starting kube-controller-manager and kube-scheduler")
        self._server(
            "kube-controller-manager",
            [
                str(self.node.kube_controller_manager),
                f"--kubeconfig={kcm}",
                f"--authentication-kubeconfig={kcm}",
                f"--authorization-kubeconfig={kcm}",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={pki_dir / 'ca.crt'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
                f"--cluster-cidr={layout.CLUSTER_CIDR}",
                "--bind-address=127.0.0.1",
                "--leader-elect=false",
                "--cluster-name=gatehouse-dev",
            ],
        )
        self._server(
            "kube-scheduler",
            [
                str(self.node.kube_scheduler),
                f"--kubeconfig={scheduler}",
                f"--authentication-kubeconfig={scheduler}",
                f"--authorization-kubeconfig={scheduler}",
                "--bind-address=127.0.0.1",
                "--leader-elect=false",
            ],
        )
        cgroups.prepare(layout.CGROUP_ROOT)
        _log("starting containerd")
        containerd = self._server(
            "containerd", ["containerd", f"--config={self.files.config / 'containerd.toml'}"]
        )
        containerd.wait_until(layout.CONTAINERD_SOCKET.exists, 30)
        self._import_images()
        _log("starting kubelet and kube-proxy")
        self._server(
            "kubelet",
            [
                str(self.node.kubelet),
                f"--config={self.files.config / 'kubelet.yaml'}",
                f"--kubeconfig={kubelet}",
                f"--root-dir={layout.RUN_DIR / 'kubelet'}",
                f"--hostname-override={layout.NODE_NAME}",
                f"--node-ip={layout.NODE_IP}",
                "--v=1",
            ],
        )
        proxy_config = self.files.config / "kube-proxy.yaml"
        proxy_config.write_text(layout.kube_proxy_config(proxy))
        self._server("kube-proxy", [str(self.node.kube_proxy), f"--config={proxy_config}"])
        self._start_policy_enforcer(ca)

    def _start_policy_enforcer(self, ca: pki.CertificateAuthority) -> None:
        """kube-router's network policy controller, with read rights of its own; it reads its
        node's object at start, so the kubelet must have registered it."""
        kubeconfig = component_kubeconfig(self.files, ca, "kube-router", policy.USER, ())
        rbac = self.files.config / "kube-router-rbac.yaml"
        rbac.write_text(policy.rbac())
        admin = f"--kubeconfig={self.controlplane.kubeconfig}"
        _run(str(self.binaries.kubectl), admin, "apply", "--server-side", "-f", str(rbac))
        deadline = time.monotonic() + NODE_REGISTERED_SECONDS
        while not _succeeds(str(self.binaries.kubectl), admin, "get", "node", layout.NODE_NAME):
            if time.monotonic() > deadline:
                raise StartupError(f"the kubelet did not register {layout.NODE_NAME} in time")
            time.sleep(0.5)
        _log("starting kube-router (network policies)")
        self._server("kube-router", [str(self.kube_router), *policy.args(kubeconfig)])

    def _before_apiserver(self, ca: pki.CertificateAuthority) -> None:
        ca.issue(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )

    def _import_images(self) -> None:
        images = json.loads((self.files.config / "images.json").read_text())
        for archive in images:
            started = time.monotonic()
            _run(
                "ctr",
                f"--address={layout.CONTAINERD_SOCKET}",
                "--namespace=k8s.io",
                "images",
                "import",
                "--no-unpack",
                archive,
            )
            _log(f"imported {Path(archive).name} in {time.monotonic() - started:.1f}s")

    def stop(self) -> None:
        # kubelet first, or it restarts what the next step kills.
        for server in self.servers:
            if server.name == "kubelet":
                server.stop(timeout=0)
        _kill_everything_else()
        for server in self.servers:
            server.stop(timeout=0)
        self.controlplane.stop()
        cgroups.remove(layout.CGROUP_ROOT)


def _kill_everything_else() -> None:
    """SIGKILL for every process of this PID namespace but us: shims, containers, servers."""
    me = os.getpid()
    for _ in range(50):
        others = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
        others = [pid for pid in others if pid != me]
        if not others:
            return
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap_orphans(set())
        time.sleep(0.1)


def _reap_orphans(managed: set[int]) -> None:
    """As PID 1 we inherit every orphan (containerd's shims): reap those we did not start."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in managed:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(RELAY_BUFFER):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
    try:
        server_reader, server_writer = await asyncio.open_connection(
            "127.0.0.1", layout.APISERVER_PORT
        )
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))


async def serve(supervisor: Supervisor, listener: socket.socket) -> None:
    """Relays the host's API connections until SIGTERM, reaping orphans as they come."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    server = await asyncio.start_server(_relay, sock=listener)
    supervisor.files.ready_marker.write_text(str(os.getpid()))
    _log("ready")
    while not stopping.is_set():
        managed = {s.pid for s in supervisor.servers + supervisor.controlplane.servers}
        _reap_orphans(managed)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), 1.0)
    server.close()
    _log("stopping")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-dev-node-supervisor", description=__doc__)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--binaries", type=Path, required=True, help="JSON written by the host")
    args = parser.parse_args(argv)
    files = NodeFiles(args.workdir)
    paths = json.loads(args.binaries.read_text())
    binaries = Binaries(
        versions=Versions.pinned(),
        **{key: Path(value) for key, value in paths["controlplane"].items()},
    )
    node = NodeBinaries(**{key: Path(value) for key, value in paths["node"].items()})
    listener = socket.socket(fileno=args.listen_fd)
    supervisor = Supervisor(files, binaries, node, Path(paths["kube_router"]))
    # SIGTERM during start-up must still tear down: handled as an exception until serve() runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cgroups.remove(layout.CGROUP_ROOT)  # what a killed node left behind
        make_network()
        make_mounts(files)
        supervisor.start()
        asyncio.run(serve(supervisor, listener))
    except StartupError as error:
        _log(f"could not start: {error}")
        return 1
    finally:
        supervisor.stop()
        _log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
