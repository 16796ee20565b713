"""A real Kubernetes control plane on loopback: etcd and kube-apiserver, as envtest runs them.

No kubelet, scheduler or controller-manager: the API server alone, with real schema validation,
server-side apply, RBAC, impersonation, TokenReview and admission webhooks. Tests, ``make up`` and
``make demo`` all start it through :class:`ControlPlane`.

The API server presents a client certificate to admission webhooks (an AdmissionConfiguration),
from a CA of its own that signs nothing else, so Gatehouse's webhook runs as a hardened
installation runs it: answering the API server alone (docs/security/who-may-do-what.md, "Who may
call the admission webhook"). To a Service's webhook on the chart's port it presents instead the
files a cluster admin would point it at: the chart's webhook makes the API server's certificate
itself, and :func:`present_webhook_client` copies it from the release's Secret, as that page
says to (the API server reads the admission kubeconfig once, the files it names at each new
connection).
"""

from __future__ import annotations

import base64
import os
import shlex
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from gatehouse_dev import pki
from gatehouse_dev.binaries import Binaries
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import Server, free_port
from gatehouse_dev.waiting import wait_for

ADMIN_USER = "gatehouse-dev-admin"
CONTEXT = "gatehouse-dev"
# The common name of the client certificate the API server presents to admission webhooks.
WEBHOOK_CLIENT_NAME = "kube-apiserver"
# The chart's webhook port (webhook.port's default): to a Service's webhook on it, the API server
# presents the certificate in webhook_client_slot.
CHART_WEBHOOK_PORT = 9443


@dataclass(frozen=True)
class Endpoints:
    etcd_port: int
    apiserver_port: int

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"


class ControlPlane:
    """etcd + kube-apiserver in ``workdir``, reachable through ``workdir/kubeconfig``."""

    def __init__(
        self,
        workdir: Path,
        binaries: Binaries,
        *,
        endpoints: Endpoints | None = None,
        apiserver_flags: dict[str, str] | None = None,
        serving_hosts: tuple[str, ...] = (),
    ) -> None:
        """``apiserver_flags`` replace or add to the envtest set (a node that runs Pods needs
        the ServiceAccount admission plugin, the Node authorizer and a way to reach kubelets)."""
        self.workdir = workdir
        self.binaries = binaries
        self.kubeconfig = workdir / "kubeconfig"
        self.logs = workdir / "logs"
        self.endpoints = endpoints or Endpoints(etcd_port=free_port(), apiserver_port=free_port())
        self.apiserver_flags = apiserver_flags or {}
        self.serving_hosts = serving_hosts
        self.servers: list[Server] = []

    @property
    def webhook_client_ca(self) -> Path:
        return webhook_client_ca(self.workdir)

    def cluster(self) -> Cluster:
        """The handle tests and tools reach this control plane by."""
        return Cluster(self.kubeconfig, self.binaries, webhook_client_ca=self.webhook_client_ca)

    def start(
        self,
        *,
        detached: bool = False,
        timeout: float = 60.0,
        before_apiserver: Callable[[pki.CertificateAuthority], None] | None = None,
    ) -> None:
        """Starts both servers and returns once the API server answers ``/readyz``.

        Without ``detached`` the servers die with this process, even when it is killed.
        ``before_apiserver`` may issue certificates the API server's flags name.
        """
        certs = self.workdir / "pki"
        certs.mkdir(parents=True, exist_ok=True)
        self.ca = ca = pki.CertificateAuthority(certs)
        serving = ca.issue(
            "apiserver",
            "kube-apiserver",
            hosts=("127.0.0.1", "::1", "localhost", "kubernetes.default.svc", *self.serving_hosts),
        )
        admin = ca.issue("admin", ADMIN_USER, organizations=("system:masters",), client=True)
        sa_key = certs / "service-account.key"
        pki.write_service_account_key(sa_key)
        admission = self._write_admission_configuration()

        if before_apiserver is not None:
            before_apiserver(ca)
        try:
            etcd = self._start_etcd(detached)
            etcd.wait_until(self._etcd_healthy, timeout)
            apiserver = self._start_apiserver(ca, serving, sa_key, admission, detached)
            tls = _client_tls(ca.cert_path, admin)
            apiserver.wait_until(lambda: self._apiserver_ready(tls), timeout)
        except BaseException:
            self.stop()
            raise
        self._write_kubeconfig(ca.cert_path, admin)

    def _start_etcd(self, detached: bool) -> Server:
        url = self.endpoints.etcd_url
        server = Server(
            "etcd",
            [
                str(self.binaries.etcd),
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                "--listen-peer-urls=http://127.0.0.1:0",
                # Durability buys nothing for throwaway test data and costs seconds per run.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.logs / "etcd.log",
        )
        self.servers.append(server)
        server.start(detached=detached)
        return server

    def _write_admission_configuration(self) -> Path:
        """The API server's AdmissionConfiguration: the webhook plugins present the client
        certificate of a CA of their own to every webhook. The user name ``*`` matches any
        webhook's address: here they are all Gatehouse's, at ports and in release namespaces
        each test picks (an installation names its webhook's Service: see
        docs/security/who-may-do-what.md, "Who may call the admission webhook")."""
        folder = self.webhook_client_ca.parent
        folder.mkdir(parents=True, exist_ok=True)
        clients = pki.CertificateAuthority(folder, "gatehouse-dev-webhook-client-ca")
        presented = clients.issue("apiserver", WEBHOOK_CLIENT_NAME, client=True)
        # Until a release's certificate is presented there, the control plane's own.
        slot = webhook_client_slot(self.webhook_client_ca)
        pki.write_private(slot, presented.cert_path.read_bytes() + presented.key_path.read_bytes())

        def user(name: str, files: pki.KeyPair) -> dict[str, Any]:
            return {
                "name": name,
                "user": {
                    "client-certificate": str(files.cert_path),
                    "client-key": str(files.key_path),
                },
            }

        kubeconfig = folder / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "users": [
                        # <service>.<namespace>.svc:<port>: a Service's webhook on the chart's port.
                        user(f"*.svc:{CHART_WEBHOOK_PORT}", pki.KeyPair(slot, slot)),
                        user("*", presented),
                    ],
                }
            )
        )
        plugins = [
            {
                "name": plugin,
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": str(kubeconfig),
                },
            }
            for plugin in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
        ]
        configuration = folder / "admission.yaml"
        configuration.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "AdmissionConfiguration",
                    "plugins": plugins,
                }
            )
        )
        return configuration

    def _start_apiserver(
        self,
        ca: pki.CertificateAuthority,
        serving: pki.KeyPair,
        sa_key: Path,
        admission: Path,
        detached: bool,
    ) -> Server:
        flags = {
            "etcd-servers": self.endpoints.etcd_url,
            "secure-port": str(self.endpoints.apiserver_port),
            "bind-address": "127.0.0.1",
            "advertise-address": "127.0.0.1",
            "cert-dir": str(self.workdir / "pki"),
            "tls-cert-file": str(serving.cert_path),
            "tls-private-key-file": str(serving.key_path),
            "client-ca-file": str(ca.cert_path),
            "authorization-mode": "RBAC",
            "service-cluster-ip-range": "10.0.0.0/24",
            "allow-privileged": "true",
            # No controller-manager runs to create service-account tokens for Pods.
            "disable-admission-plugins": "ServiceAccount",
            "service-account-issuer": "https://kubernetes.default.svc.cluster.local",
            "service-account-key-file": str(sa_key),
            "service-account-signing-key-file": str(sa_key),
            "admission-control-config-file": str(admission),
            **self.apiserver_flags,
        }
        server = Server(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                *(f"--{name}={value}" for name, value in flags.items()),
                # Last, so that they win: e.g. feature gates, or AlwaysAllow to see a test fail.
                *shlex.split(os.environ.get("GATEHOUSE_APISERVER_ARGS", "")),
            ],
            self.logs / "kube-apiserver.log",
        )
        self.servers.append(server)
        server.start(detached=detached)
        return server

    def _etcd_healthy(self) -> bool:
        try:
            reply = httpx.get(f"{self.endpoints.etcd_url}/health", timeout=1)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200 and reply.json().get("health") == "true"

    def _apiserver_ready(self, tls: ssl.SSLContext) -> bool:
        try:
            reply = httpx.get(f"{self.endpoints.apiserver_url}/readyz", verify=tls, timeout=2)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    def _write_kubeconfig(self, ca_cert: Path, admin: pki.KeyPair) -> None:
        self.kubeconfig.write_text(
            yaml.safe_dump(kubeconfig(self.endpoints.apiserver_url, ca_cert, admin))
        )
        self.kubeconfig.chmod(0o600)

    def stop(self) -> None:
        # The API server first: stopping etcd under it makes it log errors until it exits.
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()

    def pids(self) -> list[int]:
        return [server.pid for server in self.servers]


def webhook_client_ca(workdir: Path) -> Path:
    """The CA that signs the client certificate the API server of the control plane in
    ``workdir`` presents to webhooks (and nothing else): what a webhook trusts to know it."""
    return workdir / "pki" / "webhook-clients" / "ca.crt"


def webhook_client_slot(webhook_client_ca: Path) -> Path:
    """The file the API server reads the client certificate and its key from (one file, both
    PEM blocks: replaced whole, it is never read half old) for a Service's webhook on the
    chart's port, beside ``webhook_client_ca``."""
    return webhook_client_ca.parent / "service-webhooks.pem"


def present_webhook_client(cluster: Cluster, namespace: str, secret: str) -> None:
    """Has the API server of ``cluster`` (a local control plane, or the dev node's) present to
    a Service's webhook on the chart's port the client certificate in the Secret ``secret``,
    which the chart's webhook makes at its first start: what a cluster admin does on each
    control-plane node. The API server's next connection presents it (client-go reads the file
    again, at most once a second)."""
    if cluster.webhook_client_ca is None:
        raise ValueError("a cluster of the user's: its API server is configured by its admin")
    slot = webhook_client_slot(cluster.webhook_client_ca)

    def read() -> dict[str, str] | None:
        done = cluster.kubectl(
            "get", "secret", secret, "-n", namespace, "-o", "jsonpath={.data}", check=False
        )
        data: dict[str, str] = yaml.safe_load(done.stdout or "{}") if done.returncode == 0 else {}
        return data if data.get("tls.crt") and data.get("tls.key") else None

    found = wait_for(read, timeout=60, interval=0.5, what=f"the Secret {namespace}/{secret}")
    staged = slot.with_name(f".{slot.name}.new")
    pki.write_private(
        staged, b"".join(base64.b64decode(found[key]) for key in ("tls.crt", "tls.key"))
    )
    staged.replace(slot)


def _client_tls(ca_cert: Path, client: pki.KeyPair) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_cert))
    context.load_cert_chain(str(client.cert_path), str(client.key_path))
    return context


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(server: str, ca_cert: Path, admin: pki.KeyPair) -> dict[str, Any]:
    """A self-contained kubeconfig (certificates inline) for the cluster administrator."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": ADMIN_USER,
                "user": {
                    "client-certificate-data": _b64(admin.cert_path),
                    "client-key-data": _b64(admin.key_path),
                },
            }
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": ADMIN_USER}}],
        "current-context": CONTEXT,
    }
