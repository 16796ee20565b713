"""Where everything of the dev node lives: addresses, names, and the files its servers read.

The node runs in namespaces of its own, so these addresses exist only there: nothing here is
routed on the host. Pure functions: the supervisor writes what they return.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NODE_NAME = "gatehouse-node"
NODE_IP = "10.200.0.2"
# The veth peer the default route points at: no host is there. Locally sent packets to a Service
# need some route before kube-proxy's OUTPUT rules rewrite their destination.
GATEWAY_IP = "10.200.0.1"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
DNS_SERVICE_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
APISERVER_PORT = 6443
ETCD_PORT = 2379
# Every container cgroup goes below this one, so that what a killed node leaves behind is
# recognisably ours and nothing of the host's is touched.
CGROUP_ROOT = "gatehouse-node"
# Inside the node's private mount namespace: a tmpfs that dies with it.
RUN_DIR = Path("/run/gatehouse-node")
CONTAINERD_SOCKET = Path("/run/containerd/containerd.sock")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class NodeFiles:
    """The node's folder on disk (logs, certificates, containerd's images)."""

    root: Path

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def controlplane(self) -> Path:
        return self.root / "controlplane"

    @property
    def pki(self) -> Path:
        return self.controlplane / "pki"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd"

    @property
    def volumes(self) -> Path:
        """The local PersistentVolumes' folders (:mod:`gatehouse_dev.node.storage`)."""
        return self.root / "volumes"

    @property
    def ready_marker(self) -> Path:
        return self.root / "ready"

    @property
    def host_kubeconfig(self) -> Path:
        """The administrator's kubeconfig for tools on the host (through the API relay)."""
        return self.root / "kubeconfig"


def containerd_config(files: NodeFiles) -> str:
    # restrict_oom_score_adj: this VM lacks CAP_SYS_RESOURCE, so runc cannot give the pause
    # container its negative OOM score; containerd then keeps scores at or above its own.
    return f"""version = 2
root = "{files.containerd_root}"
state = "/run/containerd"
[grpc]
  address = "{CONTAINERD_SOCKET}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{files.config / "cni"}"
"""


def cni_config() -> str:
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": "gatehouse-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": True,
                    # A Pod reaching itself through its own Service comes back over the bridge.
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(RUN_DIR / "cni-ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def kubelet_config(files: NodeFiles) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(files.pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(files.pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(files.pki / "kubelet-serving.key"),
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        # The machine mounts cgroup v1 hierarchies; kubelet 1.35+ refuses them unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_ROOT}",
        # The host's kernel settings stay as they are: kubelet checks them and does not write.
        # The supervisor shows it the values it wants, in the node's own mount namespace only.
        "protectKernelDefaults": True,
        "failSwapOn": False,
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [DNS_SERVICE_IP],
        "resolvConf": str(files.config / "resolv.conf"),
        "readOnlyPort": 0,
        # Imported images cannot be pulled again: never collect them, never evict for disk.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "serializeImagePulls": False,
        "podLogsDir": "/var/log/pods",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    }
    return yaml.safe_dump(config)


def kube_proxy_config(kubeconfig: Path) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": NODE_NAME,
        # Zeroes leave the host-wide conntrack table size and timeouts as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
    }
    return yaml.safe_dump(config)


# Values kubelet insists on (it refuses to start with protectKernelDefaults when they differ).
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


def hosts_file() -> str:
    return f"127.0.0.1 localhost\n{NODE_IP} {NODE_NAME}\n"


def resolv_conf() -> str:
    # Pods with dnsPolicy Default (CoreDNS) get this: no resolver outside the node is reachable.
    return f"nameserver {GATEWAY_IP}\n"
