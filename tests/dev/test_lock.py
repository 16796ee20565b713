"""The images' lock files agree with pyproject.toml: every declared dependency is pinned at a
version it allows, every pin has a hash, the operator's file only adds to the proxy's, and the
Dockerfile's base is pinned by digest. (``make lock`` rewrites them; the image build installs
nothing else.)"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gatehouse_dev import lock

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\$")
HASH = r"    --hash=sha256:[0-9a-f]{64}( \\)?"


def pins(name: str) -> dict[str, str]:
    text = (ROOT / "requirements" / name).read_text()
    found: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", text.split("\n\n", 1)[-1].strip()):
        if entry.startswith("#"):
            continue
        head, *hashes = entry.splitlines()
        match = PIN.match(head)
        assert match, f"{name}: {head!r} is not a pin"
        assert hashes
        assert all(re.fullmatch(HASH, line) for line in hashes)
        found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def assert_pinned(declared: list[str], pinned: dict[str, str]) -> None:
    for item in declared:
        requirement = Requirement(item)
        version = pinned.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not in the lock: run make lock"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{requirement.name}=={version} is outside {requirement.specifier}: run make lock"
        )


def test_the_locks_pin_what_pyproject_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    proxy, operator = pins("proxy.txt"), pins("operator.txt")
    assert not set(proxy) & set(operator), "the operator's lock only adds to the proxy's"
    assert_pinned(project["project"]["dependencies"], proxy)
    assert_pinned(project["project"]["optional-dependencies"]["operator"], {**proxy, **operator})
    assert_pinned(project["build-system"]["requires"], pins("build.txt"))
    assert "kubernetes" in operator
    assert "kubernetes" not in proxy


def test_the_dockerfile_installs_the_locks_against_their_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=\S+@sha256:[0-9a-f]{64}$", dockerfile, re.MULTILINE)
    for name in ("build.txt", "proxy.txt", "operator.txt"):
        assert f"requirements/{name}" in dockerfile
    installs = re.findall(r"pip[^&]*? install [^&]*", dockerfile)
    assert installs
    assert all("--require-hashes" in step or "--no-index" in step for step in installs), installs


@pytest.mark.parametrize("architecture", lock.ARCHITECTURES)
def test_platform_tags_run_from_the_images_glibc_down(architecture: str) -> None:
    tags = lock.platform_tags(architecture)
    assert tags[0] == f"manylinux_2_{lock.GLIBC_MINOR}_{architecture}"
    assert f"manylinux2014_{architecture}" in tags
    assert ("manylinux1_x86_64" in tags) == (architecture == "x86_64")


def test_a_rendered_lock_reads_back() -> None:
    rendered = lock.render({"b-pkg": lock.Pin("1.0", {"b" * 64, "a" * 64})}, "what")
    assert rendered.endswith(
        f"b-pkg==1.0 \\\n    --hash=sha256:{'a' * 64} \\\n    --hash=sha256:{'b' * 64}\n"
    )


def test_the_locks_hold_what_the_oldest_python_311_needs() -> None:
    """pip reads markers against the Python that runs it: a lock made on 3.11.7 lacked what
    redis needs below 3.11.3 (async-timeout), and the image failed its ``pip check`` on Debian
    bookworm's 3.11.2, the dev node's base. Every dependency a pinned package (as installed
    here, at its pinned version) declares for 3.11.0 is pinned too."""
    pinned = {**pins("proxy.txt"), **pins("operator.txt")}
    oldest = {"python_full_version": lock.OLDEST_PYTHON, "python_version": "3.11", "extra": ""}
    checked = 0
    for name, version in pinned.items():
        try:
            installed = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if installed.version != version:
            continue
        checked += 1
        for text in installed.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(oldest):
                assert canonicalize_name(requirement.name) in pinned, (
                    f"{name} needs {requirement} on Python {lock.OLDEST_PYTHON}: run make lock"
                )
    assert checked > 10
