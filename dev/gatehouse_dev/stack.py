"""The local stack in the background: ``make up`` starts it, ``make down`` stops it.

The stack is the control plane (unless KUBECONFIG names a cluster of the user's), the CRDs, the
operator, the shared store (redis-server), one proxy and the example upstream on 127.0.0.1:18080
that ``examples/demo`` calls.
State lives in ``.gatehouse/dev/`` of the checkout: the control plane's folder, logs, the pids of
what was started, and ``env``, a file to source that points kubectl and the tools at the stack.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from gatehouse_dev.binaries import ensure_binaries
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import ControlPlane
from gatehouse_dev.newcomer import NEWCOMER, NEWCOMER_CONTEXT, add_newcomer, newcomer_token
from gatehouse_dev.processes import alive, terminate_pid
from gatehouse_dev.services import LocalGatehouse, remove_webhooks

DEMO_UPSTREAM_PORT = int(os.environ.get("GATEHOUSE_DEMO_UPSTREAM_PORT", "18080"))


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


@dataclass(frozen=True)
class RunningStack:
    cluster: Cluster
    proxy_url: str
    api_url: str = ""
    token: str = ""  # the newcomer's, for the service API's CLIs ($GATEHOUSE_TOKEN)


def _user_kubeconfig(paths: StackPaths) -> Path | None:
    """The KUBECONFIG a user set for a cluster of their own, if any (ours does not count)."""
    configured = os.environ.get("KUBECONFIG")
    if not configured:
        return None
    path = Path(configured).resolve()
    return None if path.is_relative_to(paths.root) else path


def up(paths: StackPaths, *, helm: bool = True) -> RunningStack:
    """Starts the stack unless it is already running; ``helm=False`` leaves helm unbuilt if it
    is (the demo uses none; the env file's PATH has it once ``make up`` has built it)."""
    binaries = ensure_binaries(helm=helm)
    if paths.state_file.exists():
        state = json.loads(paths.state_file.read_text())
        if state["pids"] and all(alive(pid) for pid in state["pids"]):
            _log(f"the local stack is already up (pids {state['pids']})")
            _log(open_hint(state["local"]))
            found = state.get("webhook_client_ca")
            cluster = Cluster(
                Path(state["kubeconfig"]),
                binaries,
                local=state["local"],
                webhook_client_ca=Path(found) if found else None,
            )
            return RunningStack(cluster, state["proxy_url"], state.get("api_url", ""))
        _log("a previous local stack is gone; cleaning up after it")
        down(paths)

    paths.root.mkdir(parents=True, exist_ok=True)
    pids: list[int] = []
    existing = _user_kubeconfig(paths)
    controlplane = None
    if existing is not None:
        _log(f"using the cluster of KUBECONFIG={existing}; no local control plane is started")
        cluster = Cluster(existing, binaries, local=False)
    else:
        controlplane = ControlPlane(paths.controlplane, binaries)
        controlplane.start(detached=True)
        pids += controlplane.pids()
        cluster = controlplane.cluster()
        _log(f"control plane up at {controlplane.endpoints.apiserver_url}")

    gatehouse = LocalGatehouse(cluster, paths.root / "gatehouse", detached=True)
    try:
        gatehouse.install_crds()
        token = ""
        if controlplane is not None:
            add_newcomer(cluster, controlplane.ca)
            token = newcomer_token(cluster)
        gatehouse.write_keyring()
        gatehouse.write_sealing_keys()
        gatehouse.start_store()
        gatehouse.start_upstream(DEMO_UPSTREAM_PORT)
        gatehouse.start_operator()
        proxy = gatehouse.start_proxy()
    except BaseException:
        gatehouse.stop()
        for pid in reversed(pids):
            terminate_pid(pid)
        raise
    pids += [server.pid for server in gatehouse.servers]
    paths.state_file.write_text(
        json.dumps(
            {
                "pids": pids,
                "kubeconfig": str(cluster.kubeconfig),
                "local": cluster.local,
                "webhook_client_ca": str(cluster.webhook_client_ca or ""),
                "proxy_url": proxy.url,
                "api_url": gatehouse.api_url,
            }
        )
    )
    running = RunningStack(cluster, proxy.url, gatehouse.api_url, token)
    write_env(paths, running)
    _log(f"proxy at {proxy.url}, service API at {gatehouse.api_url}")
    _log(f"logs in {gatehouse.workdir / 'logs'}")
    _log(f"`source {paths.env_file}` to use the stack, `make down` to stop it")
    _log(open_hint(cluster.local))
    return running


def open_hint(local: bool) -> str:
    """How to open the page, as `make up` prints it."""
    if local:
        return (
            f"the page: `gatehouse open --context {NEWCOMER_CONTEXT}` (after sourcing the env) "
            f"opens it signed in as {NEWCOMER}, a gatehouse-admin; plain `gatehouse open` as "
            "the cluster's administrator"
        )
    return "the page: `gatehouse open` (after sourcing the env) opens it as your kubeconfig's user"


def write_env(paths: StackPaths, running: RunningStack) -> None:
    """The file users source: the cluster, the endpoints, and a PATH with kubectl, helm and
    Gatehouse's own commands (``gatehouse``, ``gatehouse-service``) from this environment."""
    tools = [str(running.cluster.binaries.directory), sysconfig.get_path("scripts")]
    lines = [
        f"export KUBECONFIG={shlex.quote(str(running.cluster.kubeconfig))}",
        f'export PATH={shlex.quote(os.pathsep.join(tools))}:"$PATH"',
        f"export GATEHOUSE_PROXY_URL={shlex.quote(running.proxy_url)}",
        f"export GATEHOUSE_API_URL={shlex.quote(running.api_url)}",
    ]
    if running.token:
        lines.append(f"export GATEHOUSE_TOKEN={shlex.quote(running.token)}")
    # It may hold a token: the user's alone to read.
    paths.env_file.touch(mode=0o600)
    paths.env_file.chmod(0o600)
    paths.env_file.write_text("\n".join(lines) + "\n")


def down(paths: StackPaths) -> None:
    if paths.state_file.exists():
        state = json.loads(paths.state_file.read_text())
        # Reverse start order: Gatehouse first, then the API server, etcd last.
        for pid in reversed(state["pids"]):
            terminate_pid(pid)
        _log(f"stopped pids {state['pids']}")
        if not state["local"]:
            remove_webhooks(Cluster(Path(state["kubeconfig"]), ensure_binaries(), local=False))
    for folder in (paths.controlplane, paths.root / "gatehouse"):
        shutil.rmtree(folder, ignore_errors=True)
    for leftover in (paths.state_file, paths.env_file):
        leftover.unlink(missing_ok=True)
