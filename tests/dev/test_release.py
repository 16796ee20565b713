"""The release's version policy: pyproject.toml's version is the chart's version and appVersion,
and the CHANGELOG's newest section; ``make chart`` and ``make image`` refuse otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gatehouse_dev.binaries import BuildError
from gatehouse_dev.release import REPO, release_version


def test_the_checkout_is_one_version() -> None:
    assert release_version()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in ("pyproject.toml", "CHANGELOG.md", "charts/gatehouse/Chart.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_a_chart_behind_the_package_is_refused(checkout: Path) -> None:
    chart = checkout / "charts/gatehouse/Chart.yaml"
    chart.write_text(chart.read_text().replace("appVersion:", "appVersion: '0.0.1'\nold:"))
    with pytest.raises(BuildError, match=r"Chart\.yaml: appVersion is 0\.0\.1"):
        release_version(checkout)


def test_a_release_without_its_changelog_section_is_refused(checkout: Path) -> None:
    changelog = checkout / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace("## ", "## 9.9.9 ", 1))
    with pytest.raises(BuildError, match=r"CHANGELOG\.md: its newest section must be"):
        release_version(checkout)
