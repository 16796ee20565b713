"""A handle on the cluster the tests and tools talk to: the local control plane or the user's own.

A user with a cluster of their own opts in by setting KUBECONFIG; otherwise a local control plane
is started. Test users are impersonated (``kubectl --as``), so RBAC decisions are the API server's.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gatehouse_dev.binaries import Binaries
from gatehouse_dev.waiting import wait_for


@dataclass(frozen=True)
class Persona:
    """A user the tests act as. The cluster administrator impersonates it on every request."""

    name: str
    groups: tuple[str, ...] = ()

    def kubectl_flags(self) -> list[str]:
        return [f"--as={self.name}", *(f"--as-group={group}" for group in self.groups)]


# Project admins hold manage:ExternalConnection; builders build data apps and chart types;
# interactive viewers may pick connections to link; nobody has no grants at all.
ADMIN = Persona("admin@gatehouse.test")
BUILDER = Persona("builder@gatehouse.test")
VIEWER = Persona("viewer@gatehouse.test")
NOBODY = Persona("nobody@gatehouse.test")


class KubectlError(RuntimeError):
    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(argv)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    binaries: Binaries
    local: bool = field(default=True)
    # The CA of the client certificate this cluster's API server presents to admission webhooks
    # (ours do, see controlplane); None when it presents none (a cluster of the user's).
    webhook_client_ca: Path | None = None

    def env(self) -> dict[str, str]:
        """The environment for a child process that should talk to this cluster."""
        path = f"{self.binaries.directory}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": path}

    def kubectl(
        self,
        *args: str,
        as_user: Persona | None = None,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        argv = [*(as_user.kubectl_flags() if as_user else []), *args]
        done = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise KubectlError(argv, done.returncode, done.stderr)
        return done

    def token_kubeconfig(self, user: str, token: str, path: Path) -> Path:
        """A kubeconfig at ``path`` that reaches this cluster as the bearer of ``token``."""
        config = yaml.safe_load(
            self.kubectl("config", "view", "--raw", "--minify", "--flatten").stdout
        )
        config["users"] = [{"name": user, "user": {"token": token}}]
        config["contexts"][0]["context"]["user"] = user
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def app_token(self, namespace: str, secret: str, timeout: float = 30) -> str:
        """An app's proxy credential, once the operator has issued it into ``secret``."""

        def read() -> str | None:
            done = self.kubectl(
                "get",
                "secret",
                secret,
                "-n",
                namespace,
                "-o",
                "jsonpath={.data.token}",
                check=False,
            )
            return (
                base64.b64decode(done.stdout).decode()
                if done.returncode == 0 and done.stdout
                else None
            )

        return wait_for(read, timeout=timeout, interval=0.2, what=f"the credential in {secret}")


def secret_watch_events(cluster: Cluster) -> int:
    """Secret events the API server has sent to all its watchers so far (its own metric).

    The API server watches every Secret itself (one event per change); any other watcher's
    events come on top.
    """
    prefix = 'apiserver_watch_events_total{group="",resource="secrets",version="v1"} '
    for line in cluster.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if line.startswith(prefix):
            return int(float(line.removeprefix(prefix)))
    raise RuntimeError("the API server reports no apiserver_watch_events_total for Secrets")
