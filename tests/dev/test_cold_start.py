"""make cold-start's own parts: every cache a build fills is the clone's own, and the table reads
what binaries.py prints after a build (the timing itself is too heavy for the suite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatehouse_dev.cold_start import BUILT, Timed, fresh_environment, table


def test_a_cold_start_fills_caches_of_its_own_and_no_cluster_of_the_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/somewhere/kubeconfig")
    monkeypatch.setenv("GATEHOUSE_CACHE_DIR", "/machine/cache")
    env = fresh_environment(tmp_path)
    for name in ("HOME", "XDG_CACHE_HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "PIP_CACHE_DIR"):
        assert Path(env[name]).is_relative_to(tmp_path), name
    assert "KUBECONFIG" not in env
    assert "GATEHOUSE_CACHE_DIR" not in env


def test_the_table_shows_each_step_its_builds_and_the_verdict() -> None:
    said = (
        "gatehouse: built control-plane binaries in 654s (kube-apiserver+kubectl+etcd 654s, "
        "helm 437s); cached in /x"
    )
    [match] = BUILT.finditer(said)
    build = f"{match[1]} {match[2]}s ({match[3]})"
    shown = table([Timed("make demo", 300.4, 590.0, 1.5, 0, (build,))], {"demo": 300.4})
    assert "make demo                 300      590   1.5  ok" in shown
    assert "built control-plane 654s (kube-apiserver+kubectl+etcd 654s, helm 437s)" in shown
    assert "within the target of 360 s" in shown
