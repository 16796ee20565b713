"""``python -m gatehouse_dev.release``: the release's artifacts, into ``dist/``.

- ``image``: the Dockerfile's two images (operator, proxy) as OCI archives, built with buildah at
  the commit's time, so one commit gives one digest; ``BASE_IMAGE=local`` builds on the dev
  node's Debian base where the Dockerfile's pinned base cannot be pulled.
- ``chart``: the chart packaged by helm, after checking that its version, its appVersion, the
  package's version and the CHANGELOG's newest section are one version.

``make image``, ``make chart`` and ``make release`` (both) call it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from gatehouse_dev.binaries import BuildError, ensure_binaries
from gatehouse_dev.node import images

REPO = images.REPO
DIST = REPO / "dist"
CHART = REPO / "charts" / "gatehouse"


def release_version(root: Path = REPO) -> str:
    """The one version of a release; a :class:`BuildError` names whichever file disagrees."""
    version: str = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((root / "charts" / "gatehouse" / "Chart.yaml").read_text())
    for field in ("version", "appVersion"):
        if str(chart[field]) != version:
            raise BuildError(
                f"charts/gatehouse/Chart.yaml: {field} is {chart[field]}, pyproject.toml's "
                f"version is {version}: a chart release is a Gatehouse release"
            )
    newest = re.search(r"^## (\S+)", (root / "CHANGELOG.md").read_text(), re.MULTILINE)
    if newest is None or newest.group(1) != version:
        raise BuildError(
            f"CHANGELOG.md: its newest section must be ## {version} (with its upgrade notes)"
        )
    return version


def _base() -> str:
    base = os.environ.get("BASE_IMAGE", "")
    if base == "local":
        return images.ensure_base()
    if base:
        return base
    dockerfile = (REPO / "Dockerfile").read_text()
    default = re.search(r"^ARG BASE_IMAGE=(\S+)", dockerfile, re.MULTILINE)
    if default is None:
        raise BuildError("Dockerfile: no default BASE_IMAGE")
    return default.group(1)


def build_images(version: str) -> list[Path]:
    DIST.mkdir(exist_ok=True)
    base, revision = _base(), images.head_commit("%H") or "unknown"
    written = []
    for target, reference in images.chart_image_references().items():
        archive = DIST / f"gatehouse-{target}-{version}.oci.tar"
        image_id = images.build_image(base, target, reference, revision=revision)
        archive.unlink(missing_ok=True)
        images.buildah("push", "--quiet", reference, f"oci-archive:{archive}:{reference}")
        print(f"{reference}  {image_id}  {archive.stat().st_size / 1e6:.1f} MB  {archive}")
        written.append(archive)
    return written


def package_chart(version: str) -> Path:
    DIST.mkdir(exist_ok=True)
    helm = ensure_binaries().helm
    subprocess.run(
        [str(helm), "package", str(CHART), "--destination", str(DIST)],
        check=True,
        capture_output=True,
    )
    package = DIST / f"gatehouse-{version}.tgz"
    digest = hashlib.sha256(package.read_bytes()).hexdigest()
    print(f"{package}  sha256:{digest}")
    return package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-dev release", description=__doc__)
    parser.add_argument("artifact", choices=("image", "chart", "all"))
    args = parser.parse_args(argv)
    try:
        version = release_version()
        if args.artifact in ("image", "all"):
            build_images(version)
        if args.artifact in ("chart", "all"):
            package_chart(version)
    except (BuildError, subprocess.CalledProcessError) as error:
        detail = error.stderr.decode() if isinstance(error, subprocess.CalledProcessError) else ""
        print(f"make {args.artifact}: {error} {detail}".strip(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
