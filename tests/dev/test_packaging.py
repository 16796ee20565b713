"""What the gatehouse wheel (and so the image) ships: the two programs and their contract, nothing
of the dev tooling, its two commands and no ``service`` that would shadow Debian's, and the
declared bounds."""

from __future__ import annotations

import configparser
import subprocess
import sys
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(into: Path) -> zipfile.ZipFile:
    subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--wheel-dir", str(into), str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )  # fmt: skip
    (wheel,) = into.glob("gatehouse-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_ships_the_two_programs_and_their_contract_only(tmp_path: Path) -> None:
    with build_wheel(tmp_path) as wheel:
        names = wheel.namelist()
        metadata_dir = next(name.split("/")[0] for name in names if ".dist-info/" in name)
        entry_points = configparser.ConfigParser()
        entry_points.read_string(wheel.read(f"{metadata_dir}/entry_points.txt").decode())
        metadata = HeaderParser().parsestr(wheel.read(f"{metadata_dir}/METADATA").decode())

    top_level = {name.split("/")[0] for name in names if not name.startswith(metadata_dir)}
    assert top_level == {"gatehouse_contract", "gatehouse_operator", "gatehouse_proxy"}
    assert set(entry_points["console_scripts"]) == {
        "gatehouse",
        "gatehouse-service",
        "kubectl-gatehouse",
        "kubectl_complete-gatehouse",
    }
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    operator = project["optional-dependencies"]["operator"]
    shipped = metadata.get_all("Requires-Dist") or []
    assert {str(Requirement(item)) for item in shipped} == {
        *(str(Requirement(item)) for item in project["dependencies"]),
        *(str(Requirement(f'{item}; extra == "operator"')) for item in operator),
    }
    assert metadata.get_all("Provides-Extra") == ["operator"]
    assert "kubernetes>=37" in operator  # the first release with kubernetes.aio
    # The proxy's install has no Kubernetes client: it is the base install.
    assert not [item for item in project["dependencies"] if item.startswith(("kopf", "kube"))]


def test_without_the_operator_extra_the_clis_say_what_to_install() -> None:
    """The base install is the proxy's: the CLIs name the extra instead of a traceback."""
    blocked = "import sys; sys.modules['kopf'] = None; sys.modules['kubernetes'] = None; "
    for script in ("gatehouse", "gatehouse_service", "kubectl_gatehouse"):
        done = subprocess.run(
            [
                sys.executable, "-c",
                blocked
                + f"from gatehouse_operator.cli import scripts; sys.exit(scripts.{script}())",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "pip install 'gatehouse[operator]'" in done.stderr
        assert "Traceback" not in done.stderr
