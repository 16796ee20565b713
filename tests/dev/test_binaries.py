"""The pinned versions come from the go.mod files, the one place they are written."""

from __future__ import annotations

import re

from gatehouse_dev.binaries import KUBERNETES_MODULE_DIR, Versions


def test_versions_are_read_from_the_go_modules() -> None:
    versions = Versions.pinned()
    assert re.fullmatch(r"v1\.\d+\.\d+", versions.kubernetes)
    assert re.fullmatch(r"v3\.\d+\.\d+", versions.etcd)
    assert re.fullmatch(r"v4\.\d+\.\d+", versions.helm)


def test_every_staging_module_is_replaced_with_the_matching_tag() -> None:
    versions = Versions.pinned()
    staging_tag = "v0." + versions.kubernetes.removeprefix("v1.")
    go_mod = (KUBERNETES_MODULE_DIR / "go.mod").read_text()
    replaced = re.findall(r"^\s*(k8s\.io/\S+) => (\S+) (v\S+)$", go_mod, re.MULTILINE)
    assert len(replaced) >= 30
    for module, target, tag in replaced:
        assert target == module
        assert tag == staging_tag, module
