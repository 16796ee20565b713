"""Builds the control-plane binaries (kube-apiserver, etcd, kubectl, helm) from pinned Go modules.

The versions live in one place, the go.mod files under ``dev/go/``; this module reads them from
there. Built binaries are cached in a folder keyed by those versions, the go.sum contents and the Go
toolchain, so only the first run on a machine pays for the build.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

GO_MODULES_DIR = Path(__file__).resolve().parent.parent / "go"
KUBERNETES_MODULE_DIR = GO_MODULES_DIR / "kubernetes"
HELM_MODULE_DIR = GO_MODULES_DIR / "helm"


class BuildError(RuntimeError):
    """A binary could not be built; the message carries the command and its output."""


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    helm: str

    @classmethod
    def pinned(cls) -> Versions:
        k8s_mod = (KUBERNETES_MODULE_DIR / "go.mod").read_text()
        helm_mod = (HELM_MODULE_DIR / "go.mod").read_text()
        return cls(
            kubernetes=_required_version(k8s_mod, "k8s.io/kubernetes"),
            etcd=_required_version(k8s_mod, "go.etcd.io/etcd/server/v3"),
            helm=_required_version(helm_mod, "helm.sh/helm/v4"),
        )


@dataclass(frozen=True)
class Binaries:
    versions: Versions
    kube_apiserver: Path
    etcd: Path
    kubectl: Path
    helm: Path

    @property
    def directory(self) -> Path:
        return self.kube_apiserver.parent


def _required_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise BuildError(f"{module} is not required in the pinned go.mod")
    return match.group(1)


def cache_root() -> Path:
    configured = os.environ.get("GATEHOUSE_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "gatehouse"


def _go(*args: str, cwd: Path) -> str:
    try:
        done = subprocess.run(["go", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise BuildError(
            "the Go toolchain is not on PATH; install Go 1.26 or newer (see README)"
        ) from None
    if done.returncode != 0:
        raise BuildError(f"`go {' '.join(args)}` in {cwd} failed:\n{done.stderr.strip()}")
    return done.stdout


def _cache_key(versions: Versions) -> str:
    digest = hashlib.sha256()
    for module_dir in (KUBERNETES_MODULE_DIR, HELM_MODULE_DIR):
        for name in ("go.mod", "go.sum"):
            digest.update((module_dir / name).read_bytes())
    digest.update(_go("env", "GOVERSION", cwd=KUBERNETES_MODULE_DIR).encode())
    digest.update(Path(__file__).read_bytes())  # ldflags below are part of what is built
    return (
        f"k8s-{versions.kubernetes}-etcd-{versions.etcd}-helm-{versions.helm}"
        f"-{digest.hexdigest()[:12]}"
    )


def _kubernetes_ldflags(version: str) -> str:
    """Stamps the release into the binaries, so /version does not say v0.0.0-master.

    Helm's kubeVersion checks and kubectl's version-skew warning both read it.
    """
    info = json.loads(_go("list", "-m", "-json", "k8s.io/kubernetes", cwd=KUBERNETES_MODULE_DIR))
    major, minor = version.removeprefix("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    stamps = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "",
        "buildDate": info.get("Time", "1970-01-01T00:00:00Z"),
    }
    return " ".join(["-s", "-w", *(f"-X {pkg}.{key}={value}" for key, value in stamps.items())])


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(package: str, output: Path, module_dir: Path, ldflags: str) -> float:
    started = time.monotonic()
    partial = output.with_name(output.name + ".partial")
    print(f"gatehouse: building {output.name} from {package} ...", file=sys.stderr, flush=True)
    _go("build", "-trimpath", "-ldflags", ldflags, "-o", str(partial), package, cwd=module_dir)
    partial.rename(output)
    return time.monotonic() - started


def _helm_ldflags(version: str) -> str:
    return f"-s -w -X helm.sh/helm/v4/internal/version.version={version}"


def ensure_binaries() -> Binaries:
    """Returns the cached binaries, building whichever are missing."""
    versions = Versions.pinned()
    directory = cache_root() / "bin" / _cache_key(versions)
    binaries = Binaries(
        versions=versions,
        kube_apiserver=directory / "kube-apiserver",
        etcd=directory / "etcd",
        kubectl=directory / "kubectl",
        helm=directory / "helm",
    )
    targets = [
        (binaries.kube_apiserver, "k8s.io/kubernetes/cmd/kube-apiserver", KUBERNETES_MODULE_DIR),
        (binaries.kubectl, "k8s.io/kubernetes/cmd/kubectl", KUBERNETES_MODULE_DIR),
        (binaries.etcd, "go.etcd.io/etcd/server/v3", KUBERNETES_MODULE_DIR),
        (binaries.helm, "helm.sh/helm/v4/cmd/helm", HELM_MODULE_DIR),
    ]
    missing = [target for target in targets if not target[0].exists()]
    if not missing:
        return binaries
    with _exclusive(directory.with_name(directory.name + ".lock")):
        directory.mkdir(parents=True, exist_ok=True)
        ldflags = {
            KUBERNETES_MODULE_DIR: _kubernetes_ldflags(versions.kubernetes),
            HELM_MODULE_DIR: _helm_ldflags(versions.helm),
        }
        took = {
            path.name: _build(package, path, module_dir, ldflags[module_dir])
            for path, package, module_dir in missing
            if not path.exists()  # another process may have built it while we waited
        }
        if took:
            detail = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in took.items())
            print(
                f"gatehouse: built control-plane binaries in {sum(took.values()):.0f}s "
                f"({detail}); cached in {directory}",
                file=sys.stderr,
                flush=True,
            )
    return binaries
