"""Builds the Kubernetes binaries the dev tooling runs, from pinned Go modules.

Two sets, cached apart so that tools which need only the first never build the second: the control
plane (kube-apiserver, etcd, kubectl, helm) and the node (kubelet, kube-proxy, kube-scheduler,
kube-controller-manager, CoreDNS, and the pause binary compiled from the Kubernetes module's C
source). The versions live in one place, the go.mod files under ``dev/go/``; this module reads them
from there. Built binaries are cached in folders keyed by those versions, the go.sum contents, the
Go toolchain and the recipe (what is built, and the code that decides how: not this file's other
lines), so only the first run on a machine pays for the build, and an unrelated edit here
rebuilds nothing.

A cold build is CPU-bound (about 10 minutes of two cores, mostly compiling kube-apiserver's
packages; docs/development/local-control-plane.md, "Cold start", has the figures), so it is cut
where it can be: the Kubernetes binaries are built without cgo, as Kubernetes releases all but
the kubelet (no C compiler run, no cgo variants of net and os/user), and the binaries of one
module and flags are built by one ``go build``, the modules' builds side by side, so that one
binary's link overlaps the others' compiling and the module downloads of one overlap the other's
compiling.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

GO_MODULES_DIR = Path(__file__).resolve().parent.parent / "go"
KUBERNETES_MODULE_DIR = GO_MODULES_DIR / "kubernetes"
HELM_MODULE_DIR = GO_MODULES_DIR / "helm"
K8S = "k8s.io/kubernetes"
COREDNS_MODULE_DIR = GO_MODULES_DIR / "coredns"


class BuildError(RuntimeError):
    """A binary could not be built; the message carries the command and its output."""


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    helm: str
    coredns: str

    @classmethod
    def pinned(cls) -> Versions:
        k8s_mod = (KUBERNETES_MODULE_DIR / "go.mod").read_text()
        helm_mod = (HELM_MODULE_DIR / "go.mod").read_text()
        coredns_mod = (COREDNS_MODULE_DIR / "go.mod").read_text()
        return cls(
            kubernetes=_required_version(k8s_mod, "k8s.io/kubernetes"),
            etcd=_required_version(k8s_mod, "go.etcd.io/etcd/server/v3"),
            helm=_required_version(helm_mod, "helm.sh/helm/v4"),
            coredns=_required_version(coredns_mod, "github.com/coredns/coredns"),
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


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    kube_proxy: Path
    kube_scheduler: Path
    kube_controller_manager: Path
    coredns: Path
    pause: Path


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


def _go(*args: str, cwd: Path, cgo: bool = True) -> str:
    env = None if cgo else {**os.environ, "CGO_ENABLED": "0"}
    try:
        done = subprocess.run(
            ["go", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise BuildError(
            "the Go toolchain is not on PATH; install Go 1.21 or newer (it fetches the 1.26"
            " toolchain the pins need by itself)"
            ' (see README, "The two commands")'
        ) from None
    if done.returncode != 0:
        raise BuildError(f"`go {' '.join(args)}` in {cwd} failed:\n{done.stderr.strip()}")
    return done.stdout


def _cache_key(prefix: str, module_dirs: tuple[Path, ...], recipe: str) -> str:
    """The cache folder's name: ``prefix`` (the versions), then a digest of the modules' go.mod
    and go.sum, the Go toolchain and ``recipe`` (what is built and how)."""
    digest = hashlib.sha256()
    for module_dir in module_dirs:
        for name in ("go.mod", "go.sum"):
            digest.update((module_dir / name).read_bytes())
    digest.update(_go("env", "GOVERSION", cwd=KUBERNETES_MODULE_DIR).encode())
    digest.update(recipe.encode())
    return f"{prefix}-{digest.hexdigest()[:12]}"


def recipe(targets: Sequence[_Target], *how: Callable[..., object]) -> str:
    """What ``targets`` are (name, package, cgo) and the source of the code that decides how they
    are built (``how``: their ldflags, their build methods): a change to either is a new cache
    folder; a change to anything else is not."""
    shapes = [
        f"{target.output.name} {target.package} cgo={getattr(target, 'cgo', True)}"
        for target in targets
    ]
    code = {inspect.getsource(function) for function in (*how, *_BUILDERS)}
    return "\n".join([*shapes, *sorted(code)])


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


@dataclass(frozen=True)
class _GoTarget:
    output: Path
    package: str
    module_dir: Path
    ldflags: Callable[[], str]
    cgo: bool = True

    def build(self, partial: Path) -> None:
        _go(
            "build",
            "-trimpath",
            "-ldflags",
            self.ldflags(),
            "-o",
            str(partial),
            self.package,
            cwd=self.module_dir,
            cgo=self.cgo,
        )


@dataclass(frozen=True)
class _PauseTarget:
    """The pod sandbox's pause binary, from the C source in the pinned Kubernetes module.

    Compiled statically, so the one-file image holding it needs no libc.
    """

    output: Path

    @property
    def package(self) -> str:
        return "build/pause/linux/pause.c"

    def build(self, partial: Path) -> None:
        info = json.loads(
            _go("mod", "download", "-json", "k8s.io/kubernetes", cwd=KUBERNETES_MODULE_DIR)
        )
        source = Path(info["Dir"]) / self.package
        done = subprocess.run(
            ["gcc", "-Os", "-static", "-o", str(partial), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BuildError(f"compiling {source} failed:\n{done.stderr.strip()}")
        partial.chmod(0o755)


_Target = _GoTarget | _PauseTarget


def _go_binary_name(package: str) -> str:
    """The file ``go build -o DIR/`` writes a main package to: its last path element, or the one
    before a major-version suffix (go.etcd.io/etcd/server/v3 is ``server``)."""
    elements = package.rstrip("/").split("/")
    last = elements[-1]
    if len(elements) > 1 and re.fullmatch(r"v[0-9]+", last):
        return elements[-2]
    return last


def _build_together(targets: Sequence[_GoTarget]) -> None:
    """Several main packages of one module with the same flags, in one ``go build``: while one
    links (one core), the next compiles on the other."""
    first = targets[0]
    partial = first.output.parent / f".partial-{first.output.name}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        _go(
            "build",
            "-trimpath",
            "-ldflags",
            first.ldflags(),
            "-o",
            f"{partial}/",
            *(target.package for target in targets),
            cwd=first.module_dir,
            cgo=first.cgo,
        )
        for target in targets:
            (partial / _go_binary_name(target.package)).rename(target.output)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


# The code every cached folder's recipe holds: how a target is built.
_BUILDERS: tuple[Callable[..., object], ...] = (
    _go,
    _GoTarget.build,
    _PauseTarget.build,
    _build_together,
    _go_binary_name,
)


def _build(targets: Sequence[_Target]) -> float:
    """Builds ``targets`` (one, or several of one module and flags); the seconds it took."""
    started = time.monotonic()
    names = "+".join(target.output.name for target in targets)
    print(f"gatehouse: building {names} ...", file=sys.stderr, flush=True)
    if len(targets) > 1:
        _build_together(targets)  # type: ignore[arg-type]  # grouped by _batches
    else:
        [target] = targets
        partial = target.output.with_name(target.output.name + ".partial")
        target.build(partial)
        partial.rename(target.output)
    return time.monotonic() - started


def _batches(targets: Sequence[_Target]) -> list[list[_Target]]:
    """``targets`` grouped into builds: plain Go targets of one module, flags and cgo together;
    any other (the C pause binary, a Go target with tags) alone."""
    batches: dict[object, list[_Target]] = {}
    for target in targets:
        key: object = target
        if type(target) is _GoTarget:
            key = (target.module_dir, target.ldflags(), target.cgo)
        batches.setdefault(key, []).append(target)
    return list(batches.values())


def _ensure(directory: Path, what: str, targets: list[_Target]) -> None:
    """Builds whichever of ``targets`` are missing, one builder at a time per cache folder; the
    builds of different modules side by side."""
    if all(target.output.exists() for target in targets):
        return
    started = time.monotonic()
    with _exclusive(directory.with_name(directory.name + ".lock")):
        directory.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()  # the wait for another builder is not the build's
        # Another process may have built some while we waited.
        missing = [target for target in targets if not target.output.exists()]
        batches = _batches(missing)
        with ThreadPoolExecutor(max_workers=len(batches)) as builders:
            seconds = list(builders.map(_build, batches))
        took = {
            "+".join(target.output.name for target in batch): spent
            for batch, spent in zip(batches, seconds, strict=True)
        }
    if took:
        detail = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in took.items())
        print(
            f"gatehouse: built {what} binaries in {time.monotonic() - started:.0f}s "
            f"({detail}); cached in {directory}",
            file=sys.stderr,
            flush=True,
        )


def _stripped() -> str:
    return "-s -w"


def _helm_ldflags(version: str) -> str:
    return f"-s -w -X helm.sh/helm/v4/internal/version.version={version}"


def ensure_binaries(*, helm: bool = True) -> Binaries:
    """Returns the cached control-plane binaries, building whichever are missing; without
    ``helm``, helm is left unbuilt if it is (``make demo`` needs none, and it is a tenth of a
    fresh machine's first minutes)."""
    versions = Versions.pinned()
    kubernetes = functools.partial(_kubernetes_ldflags, versions.kubernetes)

    def targets(directory: Path) -> list[_Target]:
        # No cgo, as Kubernetes releases them: the local control plane needs none of it.
        return [
            _GoTarget(
                directory / "kube-apiserver",
                f"{K8S}/cmd/kube-apiserver",
                KUBERNETES_MODULE_DIR,
                kubernetes,
                cgo=False,
            ),
            _GoTarget(
                directory / "kubectl",
                f"{K8S}/cmd/kubectl",
                KUBERNETES_MODULE_DIR,
                kubernetes,
                cgo=False,
            ),
            _GoTarget(
                directory / "etcd",
                "go.etcd.io/etcd/server/v3",
                KUBERNETES_MODULE_DIR,
                kubernetes,
                cgo=False,
            ),
            _GoTarget(
                directory / "helm",
                "helm.sh/helm/v4/cmd/helm",
                HELM_MODULE_DIR,
                functools.partial(_helm_ldflags, versions.helm),
                cgo=False,
            ),
        ]

    directory = (
        cache_root()
        / "bin"
        / _cache_key(
            f"k8s-{versions.kubernetes}-etcd-{versions.etcd}-helm-{versions.helm}",
            (KUBERNETES_MODULE_DIR, HELM_MODULE_DIR),
            recipe(targets(Path()), _kubernetes_ldflags, _helm_ldflags, _stripped),
        )
    )
    binaries = Binaries(
        versions=versions,
        kube_apiserver=directory / "kube-apiserver",
        etcd=directory / "etcd",
        kubectl=directory / "kubectl",
        helm=directory / "helm",
    )
    needed = [target for target in targets(directory) if helm or target.output != binaries.helm]
    _ensure(directory, "control-plane", needed)
    return binaries


def ensure_registry() -> Path:
    """The cached OCI registry (CNCF distribution's) the node tests push the chart to, built
    apart from the control plane: the local stack and the demo never need it."""

    def targets(directory: Path) -> list[_Target]:
        return [
            _GoTarget(
                directory / "registry",
                "gatehouse.dev/dev/helm/registry",
                HELM_MODULE_DIR,
                _stripped,
                cgo=False,
            )
        ]

    directory = (
        cache_root()
        / "bin"
        / _cache_key("registry", (HELM_MODULE_DIR,), recipe(targets(Path()), _stripped))
    )
    [registry] = targets(directory)
    _ensure(directory, "registry", [registry])
    return registry.output


def ensure_node_binaries() -> NodeBinaries:
    """Returns the cached binaries of a node that runs Pods, building whichever are missing."""
    versions = Versions.pinned()
    kubernetes = functools.partial(_kubernetes_ldflags, versions.kubernetes)

    def targets(directory: Path) -> list[_Target]:
        return [
            # No cgo, as the control plane: their only cgo is the standard library's (net,
            # os/user), which has pure-Go twins, and one compile of the module's packages then
            # serves both sets (Kubernetes links its released kubelet to libc; this one is not).
            *(
                _GoTarget(
                    directory / name,
                    f"{K8S}/cmd/{name}",
                    KUBERNETES_MODULE_DIR,
                    kubernetes,
                    cgo=False,
                )
                for name in ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager")
            ),
            # Static (no cgo): it runs alone in a one-file image.
            _GoTarget(
                directory / "coredns",
                "github.com/coredns/coredns",
                COREDNS_MODULE_DIR,
                _stripped,
                cgo=False,
            ),
            _PauseTarget(directory / "pause"),
        ]

    directory = (
        cache_root()
        / "bin"
        / _cache_key(
            f"node-k8s-{versions.kubernetes}-coredns-{versions.coredns}",
            (KUBERNETES_MODULE_DIR, COREDNS_MODULE_DIR),
            recipe(targets(Path()), _kubernetes_ldflags, _stripped),
        )
    )
    node = NodeBinaries(
        kubelet=directory / "kubelet",
        kube_proxy=directory / "kube-proxy",
        kube_scheduler=directory / "kube-scheduler",
        kube_controller_manager=directory / "kube-controller-manager",
        coredns=directory / "coredns",
        pause=directory / "pause",
    )
    _ensure(directory, "node", targets(directory))
    return node


if __name__ == "__main__":
    # `make demo` and `make up` build the control plane with the standard library alone, while
    # the virtualenv installs beside it; `--no-helm` for the demo.
    print(ensure_binaries(helm="--no-helm" not in sys.argv).directory)
