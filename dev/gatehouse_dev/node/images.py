"""Container images for the dev node, built here without any registry.

- The Gatehouse images (the operator's and the proxy's) are built from the project's own
  ``Dockerfile`` (Debian's buildah), on a base made locally: a debootstrap rootfs of Debian
  bookworm, whose Python is 3.11 like the Dockerfile's default base. So the node runs what ships,
  not a second recipe.
- pause and CoreDNS are one static binary each, in an image of one file.
- The shared store the chart bundles is Debian's redis-server package on a debootstrap rootfs of
  its own, named as the chart's default store image (as pause is named as Kubernetes' own): the
  chart installs with its default values, and its start script runs whichever of valkey-server
  and redis-server the image has.

Each is written as a docker-archive that containerd imports, and cached under the cache folder,
keyed by what went into it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import yaml

from gatehouse_dev.binaries import BuildError, cache_root

REPO = Path(__file__).resolve().parents[3]
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
STORE_PACKAGES = ("redis-server",)
# The Dockerfile's build context: the lock files, what pip needs to build the wheel, and the
# Dockerfile itself.
CONTEXT = (
    "Dockerfile",
    ".dockerignore",
    "requirements",
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "contract",
    "operator",
    "proxy",
)
HOST_CA_BUNDLE = "/etc/ssl/host-ca-bundle.crt"


def _images_dir() -> Path:
    return cache_root() / "images"


def buildah(*args: str) -> str:
    root = _images_dir()
    done = subprocess.run(
        [
            "buildah",
            f"--root={root / 'storage'}",
            f"--runroot={root / 'run'}",
            "--log-level=warn",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BuildError(f"`buildah {' '.join(args)}` failed:\n{done.stderr.strip()[-3000:]}")
    return done.stdout.strip()


def _log(message: str) -> None:
    print(f"gatehouse: {message}", file=sys.stderr, flush=True)


def _debian_mirror() -> str:
    """The mirror this machine's apt uses: the one package source known to be reachable."""
    configured = os.environ.get("GATEHOUSE_DEBIAN_MIRROR")
    if configured:
        return configured
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        match = re.search(r"^URIs:\s*(\S+)", sources.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    return "http://deb.debian.org/debian"


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


def _exists(image: str) -> bool:
    return image in buildah("images", "--format", "{{.Name}}:{{.Tag}}").split()


def ensure_base() -> str:
    """The locally made base image (``BASE_IMAGE`` for the Dockerfile)."""
    return _debian_image("gatehouse-base", BASE_PACKAGES, "python3")


def _debian_image(name: str, packages: tuple[str, ...], cmd: str) -> str:
    """An image of a debootstrap rootfs (minbase) with ``packages``, made once and kept in
    buildah's storage under a name keyed by the recipe."""
    recipe = f"{DEBIAN_SUITE} minbase {' '.join(packages)}".encode()
    image = f"localhost/{name}:{DEBIAN_SUITE}-{_digest(recipe)}"
    if _exists(image):
        return image
    started = time.monotonic()
    _log(f"making the image {image} (debootstrap {DEBIAN_SUITE}) ...")
    with tempfile.TemporaryDirectory(prefix="gatehouse-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        done = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages)}",
                DEBIAN_SUITE,
                str(rootfs),
                _debian_mirror(),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BuildError(f"debootstrap failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        # Package lists and caches are not part of an image.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / leftover, ignore_errors=True)
        container = buildah("from", "scratch")
        try:
            mount = Path(buildah("mount", container))
            subprocess.run(["cp", "-a", f"{rootfs}/.", str(mount)], check=True)
            buildah("config", "--cmd", cmd, container)
            buildah("commit", "--quiet", container, image)
        finally:
            buildah("rm", container)
    _log(f"made {image} in {time.monotonic() - started:.0f}s")
    return image


def chart_store_reference() -> str:
    """The image the chart's bundled store names by default."""
    values = yaml.safe_load((REPO / "charts" / "gatehouse" / "values.yaml").read_text())
    image = values["store"]["image"]
    return f"{image['repository']}:{image['tag']}"


def ensure_store_image() -> Path:
    """A docker-archive of the store's image (Debian's redis-server, running as the chart's
    non-root uid when nothing else says), named as the chart's default store image."""
    reference = chart_store_reference()
    base = _debian_image("gatehouse-store-base", STORE_PACKAGES, "redis-server")
    key = _digest(base.encode(), reference.encode())
    archive = _images_dir() / f"store-{key}.tar"
    if archive.exists():
        return archive
    for stale in _images_dir().glob("store-*.tar"):
        stale.unlink()
    container = buildah("from", base)
    try:
        buildah("config", "--user", "65532:65532", "--workingdir", "/data", container)
        tag = f"localhost/gatehouse-store:{key}"
        buildah("commit", "--quiet", container, tag)
    finally:
        buildah("rm", container)
    _write_archive(tag, archive, reference)
    buildah("rmi", tag)
    return archive


def _host_trust() -> list[str]:
    """Build-time volumes that let pip in the build trust what the host trusts.

    Where the machine reaches PyPI through a TLS-intercepting proxy, only the host's CA bundle
    knows its certificate. The bundle and a pip.conf naming it are mounted into the RUN steps
    only: volumes are not part of the committed image.
    """
    bundle = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
    if not bundle.is_file():
        return []
    pip_conf = _images_dir() / "pip.conf"
    pip_conf.parent.mkdir(parents=True, exist_ok=True)
    pip_conf.write_text(f"[global]\ncert = {HOST_CA_BUNDLE}\n")
    return [f"--volume={bundle}:{HOST_CA_BUNDLE}:ro", f"--volume={pip_conf}:/etc/pip.conf:ro"]


def _context_files() -> list[Path]:
    files: list[Path] = []
    for name in CONTEXT:
        path = REPO / name
        if path.is_dir():
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            )
        elif path.exists():
            files.append(path)
    return files


def chart_image_references() -> dict[str, str]:
    """The images the chart's default values name, by Dockerfile target: the node holds our
    builds under those names."""
    chart = yaml.safe_load((REPO / "charts" / "gatehouse" / "Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "charts" / "gatehouse" / "values.yaml").read_text())
    repositories = {"operator": values["image"], "proxy": values["proxy"]["image"]}
    return {
        target: f"{image['repository']}:{chart['appVersion']}"
        for target, image in repositories.items()
    }


def head_commit(field: str) -> str:
    """A field of the checkout's commit (``git log`` format: %H, %ct); empty outside one."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", f"--format={field}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def build_image(base: str, target: str, tag: str, *, revision: str = "unknown") -> str:
    """Builds one of the Dockerfile's targets as ``tag``; returns the image's id (the digest of
    its config, which names every layer's content).

    Every file and the image itself are stamped with one fixed time, not the commit's, so a layer
    is a function of its inputs alone. Never from the layer cache: Debian's buildah (1.28) keys a
    ``COPY --from`` by its text, not by the stage's content, and reused another commit's
    dependency layers here (a changed lock file would ship the old packages).
    """
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    args = {
        "BASE_IMAGE": base,
        "VERSION": version,
        "CREATED": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(head_commit("%ct") or 0))),
        "REVISION": revision,
    }
    with tempfile.TemporaryDirectory(prefix="gatehouse-build-") as scratch:
        iidfile = Path(scratch) / "iid"
        buildah(
            "build",
            "--isolation=chroot",
            # A layer per instruction: the dependencies are layers of their own, shared by the
            # two images.
            "--layers",
            "--no-cache",
            "--timestamp=0",
            *_host_trust(),
            *(f"--build-arg={name}={value}" for name, value in args.items()),
            f"--target={target}",
            f"--file={REPO / 'Dockerfile'}",
            f"--iidfile={iidfile}",
            f"--tag={tag}",
            str(REPO),
        )
        image_id = iidfile.read_text().strip()
    # The build stages' images, a layer per instruction, are never used again (no cache). A build
    # killed midway leaves its working containers behind, and they would hold those images: this
    # storage is ours alone and no container in it outlives a build.
    buildah("rm", "--all")
    buildah("rmi", "--prune")
    return image_id


def ensure_gatehouse_images() -> list[Path]:
    """Docker-archives of the Dockerfile's two images, named as the chart expects them."""
    base = ensure_base()
    files = _context_files()
    key = _digest(
        base.encode(),
        *(str(path.relative_to(REPO)).encode() for path in files),
        *(path.read_bytes() for path in files),
    )
    # Archives of earlier sources are never used again.
    for stale in _images_dir().glob("gatehouse-*.tar"):
        if not stale.name.endswith(f"-{key}.tar"):
            stale.unlink()
    archives = []
    for target, reference in chart_image_references().items():
        archive = _images_dir() / f"gatehouse-{target}-{key}.tar"
        archives.append(archive)
        if archive.exists():
            continue
        started = time.monotonic()
        _log(f"building the Gatehouse {target} image from Dockerfile (buildah) ...")
        tag = f"localhost/gatehouse-{target}:{key}"
        image_id = build_image(base, target, tag)
        _write_archive(tag, archive, reference)
        buildah("rmi", "--force", image_id)  # every name it has: the archive is what is kept
        _log(f"built the {target} image in {time.monotonic() - started:.0f}s: {archive}")
    return archives


def ensure_binary_image(binary: Path, reference: str) -> Path:
    """A one-file image: ``binary`` at ``/`` as its entrypoint (static binaries only)."""
    key = _digest(binary.read_bytes(), reference.encode())
    archive = _images_dir() / f"{binary.name}-{key}.tar"
    if archive.exists():
        return archive
    container = buildah("from", "scratch")
    try:
        buildah("copy", "--chmod=0755", container, str(binary), f"/{binary.name}")
        buildah("config", f'--entrypoint=["/{binary.name}"]', container)
        tag = f"localhost/{binary.name}:{key}"
        buildah("commit", "--quiet", container, tag)
    finally:
        buildah("rm", container)
    _write_archive(tag, archive, reference)
    buildah("rmi", tag)
    return archive


def _write_archive(tag: str, archive: Path, reference: str) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    buildah("push", "--quiet", tag, f"docker-archive:{partial}:{reference}")
    partial.rename(archive)
