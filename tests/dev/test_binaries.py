"""The pinned versions come from the go.mod files, the one place they are written."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from gatehouse_dev import binaries
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


def _binaries_from(source: str, tmp_path: Path, name: str) -> ModuleType:
    """binaries.py as it would read with ``source``, loaded from beside the real one's go
    modules (its builds stubbed: nothing is built)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    vars(module).update(
        GO_MODULES_DIR=binaries.GO_MODULES_DIR,
        KUBERNETES_MODULE_DIR=binaries.KUBERNETES_MODULE_DIR,
        HELM_MODULE_DIR=binaries.HELM_MODULE_DIR,
        COREDNS_MODULE_DIR=binaries.COREDNS_MODULE_DIR,
        _ensure=lambda directory, what, targets: None,
    )
    return module


def test_a_cached_folder_is_keyed_by_what_is_built_not_by_the_files_other_lines(
    tmp_path: Path,
) -> None:
    """Issue 50: any edit of binaries.py (a comment) made every cached binary be built again,
    ten minutes of two cores; now only a change to what is built, or how, does."""
    source = Path(binaries.__file__).read_text()
    same = _binaries_from(source, tmp_path, "binaries_same")
    edited = _binaries_from(source + "\n# an unrelated comment\n", tmp_path, "binaries_edited")
    flags = source.replace(
        'def _stripped() -> str:\n    return "-s -w"', "def _stripped() -> str:\n    return '-w'"
    )
    assert flags != source
    rebuilt = _binaries_from(flags, tmp_path, "binaries_flags")
    for ensure in ("ensure_binaries", "ensure_node_binaries"):
        folder = getattr(same, ensure)()
        folder = getattr(folder, "directory", None) or folder.kubelet.parent
        other = getattr(edited, ensure)()
        assert (getattr(other, "directory", None) or other.kubelet.parent) == folder
    assert rebuilt.ensure_binaries().directory != same.ensure_binaries().directory


def test_the_binaries_of_one_module_and_flags_are_built_together() -> None:
    assert binaries._go_binary_name("go.etcd.io/etcd/server/v3") == "server"
    assert binaries._go_binary_name("k8s.io/kubernetes/cmd/kube-apiserver") == "kube-apiserver"
    made = binaries._GoTarget(Path("/x/a"), "example.com/a", Path("/m"), lambda: "-s -w")
    also = binaries._GoTarget(Path("/x/b"), "example.com/b/v2", Path("/m"), lambda: "-s -w")
    static = binaries._GoTarget(Path("/x/c"), "example.com/c", Path("/m"), lambda: "-s", cgo=False)
    pause = binaries._PauseTarget(Path("/x/pause"))
    assert binaries._batches([made, static, also, pause]) == [[made, also], [static], [pause]]
