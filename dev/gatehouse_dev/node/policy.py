"""The dev node's NetworkPolicy enforcer: kube-router's network policy controller alone.

The node's bridge CNI enforces no NetworkPolicy, so the chart's (the bundled store admits only
the proxies) would hold nowhere the suite looks. kube-router is built from its pinned Go module
(``dev/go/kube-router``; the Go module proxy serves v2.1.0 alone) and cached as the node's other
binaries are, in a folder of its own. The supervisor runs it in the node's network namespace with
no routing, no service proxy (kube-proxy's), no CNI configuration (the bridge's) and no listening
port: it watches Pods and NetworkPolicies through the node's API server and writes iptables rules
and ipsets (Debian's ``ipset``) in that namespace only. Dev tooling: never part of a release.

Security flaws are reported for kube-router v2.1.0, and it is the only version the Go module
proxy serves here. So it stays dev and test only: it runs inside the throwaway node's namespaces,
listens on no port, reads through its own read-only RBAC, and what it guards is the suite's own
Pods; nothing of Gatehouse ships it, and a cluster's operators bring their own network plugin. The
other enforcer served, sigs.k8s.io/kube-network-policies (nftables and an NFQUEUE), is untried.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gatehouse_dev.binaries import GO_MODULES_DIR
from gatehouse_dev.go_tools import ensure_go_tool
from gatehouse_dev.node.layout import NODE_NAME, SERVICE_CIDR

MODULE_DIR = GO_MODULES_DIR / "kube-router"
MODULE = "github.com/cloudnativelabs/kube-router/v2"


def ensure_kube_router() -> Path:
    """The cached kube-router binary, built when missing (static: no cgo)."""
    return ensure_go_tool(
        MODULE_DIR, MODULE, f"{MODULE}/cmd/kube-router", name="kube-router", what="network policy"
    )


# kube-router runs as this user, with the rights of rbac() alone.
USER = "gatehouse-dev:kube-router"


def rbac() -> str:
    """What kube-router's network policy controller reads: it starts informers on pods,
    namespaces, policies, nodes, services, endpoints and EndpointSlices, and waits for all."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": USER},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods", "namespaces", "nodes", "services", "endpoints"],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["networking.k8s.io"],
                "resources": ["networkpolicies"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": USER},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": USER,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    return yaml.safe_dump_all([role, binding])


def args(kubeconfig: Path) -> list[str]:
    """The network policy controller alone: no routes, no service proxy (kube-proxy's), no CNI
    configuration (the bridge's), and no listening port."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={NODE_NAME}",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        "--run-loadbalancer=false",
        "--enable-cni=false",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--health-port=0",
        "--metrics-port=0",
        "--v=1",
    ]
