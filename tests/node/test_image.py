"""The images as released: one commit builds one digest, and each image carries what its program
needs and nothing to build with, its dependencies in layers of their own. Built with the node's
buildah on its Debian base, from the project's Dockerfile and lock files (never from a layer
cache: see images.build_image)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gatehouse_dev.node import images

pytestmark = pytest.mark.node

TAGS = ("localhost/gatehouse-repro:first", "localhost/gatehouse-repro:second")


@pytest.fixture(scope="module")
def two_builds() -> Iterator[tuple[str, str]]:
    base = images.ensure_base()
    built: list[str] = []
    try:
        built += [images.build_image(base, "operator", tag) for tag in TAGS]
        yield built[0], built[1]
    finally:
        for image_id in set(built):
            images.buildah("rmi", "--force", image_id)


def test_one_commit_builds_one_image_digest(two_builds: tuple[str, str]) -> None:
    first, second = two_builds
    assert first == second


def in_image(image: str, script: str) -> str:
    container = images.buildah("from", "--quiet", image)
    try:
        return images.buildah("run", "--isolation=chroot", container, "--", "sh", "-c", script)
    finally:
        images.buildah("rm", container)


def test_the_images_carry_their_program_and_no_build_tools(two_builds: tuple[str, str]) -> None:
    config = json.loads(images.buildah("inspect", "--type=image", TAGS[0]))["OCIv1"]["config"]
    assert config["Cmd"] == ["python", "-m", "gatehouse_operator"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "gatehouse-operator"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    for label in ("version", "revision", "created", "source", "base.name"):
        assert labels[f"org.opencontainers.image.{label}"], label

    listing = "ls /opt/gatehouse/lib/python3.11/site-packages /opt/gatehouse/bin"
    operator = in_image(TAGS[0], listing).split()
    assert "kubernetes" in operator
    assert "kopf" in operator
    assert not [name for name in operator if name.startswith(("pip", "setuptools", "wheel"))]

    reference = "localhost/gatehouse-repro:proxy"
    proxy_image = images.build_image(images.ensure_base(), "proxy", reference)
    try:
        proxy = in_image(reference, listing).split()
        config = json.loads(images.buildah("inspect", "--type=image", reference))["OCIv1"]
        assert config["config"]["Cmd"] == ["python", "-m", "gatehouse_proxy"]
        # The base and the proxy's dependencies are one layer pair in both: pulled once.
        operator_layers = json.loads(images.buildah("inspect", "--type=image", TAGS[0]))
        shared = operator_layers["OCIv1"]["rootfs"]["diff_ids"][:2]
        assert config["rootfs"]["diff_ids"][:2] == shared
    finally:
        images.buildah("rmi", "--force", proxy_image)
    assert "gatehouse_proxy" in proxy
    assert "aiohttp" in proxy
    assert not [name for name in proxy if name.startswith(("kubernetes", "kopf", "pip"))]
