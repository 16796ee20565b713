"""The local stack's identity for a newcomer: a client-certificate user bound to gatehouse-admin.

``make up`` adds it to the kubeconfig it writes as the context ``newcomer`` (the administrator's
context stays the current one, for the demo and kubectl), so ``gatehouse open --context
newcomer`` opens the page as a Gatehouse admin who is not a cluster administrator: what a
platform team would grant, with no token to make or paste.
"""

from __future__ import annotations

from gatehouse_dev import pki
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import CONTEXT
from gatehouse_operator.api.roles import ADMIN_ROLE

NEWCOMER = "newcomer@gatehouse.dev"
NEWCOMER_CONTEXT = "newcomer"
NEWCOMER_ACCOUNT = "gatehouse-newcomer"
# As long as a working day's stack; `make up` again after it gives a new one.
TOKEN_HOURS = 24


def add_newcomer(cluster: Cluster, ca: pki.CertificateAuthority) -> None:
    """Issues the newcomer's certificate, binds it to gatehouse-admin in every namespace and
    adds its user and context to the cluster's kubeconfig."""
    pair = ca.issue("newcomer", NEWCOMER, client=True)
    binding = cluster.kubectl("get", "clusterrolebinding", "gatehouse-newcomer", check=False)
    if binding.returncode != 0:
        cluster.kubectl(
            "create",
            "clusterrolebinding",
            "gatehouse-newcomer",
            f"--clusterrole={ADMIN_ROLE}",
            f"--user={NEWCOMER}",
        )
    cluster.kubectl(
        "config",
        "set-credentials",
        NEWCOMER_CONTEXT,
        f"--client-certificate={pair.cert_path}",
        f"--client-key={pair.key_path}",
        "--embed-certs=true",
    )
    cluster.kubectl(
        "config",
        "set-context",
        NEWCOMER_CONTEXT,
        f"--cluster={CONTEXT}",
        f"--user={NEWCOMER_CONTEXT}",
        "--namespace=default",
    )


def newcomer_token(cluster: Cluster) -> str:
    """A token of the ServiceAccount ``gatehouse-newcomer``, bound to gatehouse-admin in every
    namespace: what the service API's CLIs send."""
    found = cluster.kubectl("get", "serviceaccount", NEWCOMER_ACCOUNT, "-n", "default", check=False)
    if found.returncode != 0:
        cluster.kubectl("create", "serviceaccount", NEWCOMER_ACCOUNT, "-n", "default")
        cluster.kubectl(
            "create",
            "clusterrolebinding",
            f"{NEWCOMER_ACCOUNT}-account",  # beside the certificate user's gatehouse-newcomer
            f"--clusterrole={ADMIN_ROLE}",
            f"--serviceaccount=default:{NEWCOMER_ACCOUNT}",
        )
    made = cluster.kubectl(
        "create", "token", NEWCOMER_ACCOUNT, "-n", "default", f"--duration={TOKEN_HOURS}h"
    )
    return made.stdout.strip()
