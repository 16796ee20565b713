"""Both command-line tools say in one line why they could not reach a cluster, and exit 2:
no kubeconfig, an unknown context, an API server that is not there (a closed port on 127.0.0.1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gatehouse_dev.processes import free_port
from gatehouse_operator.cli import gatehouse as cli
from gatehouse_operator.connections import runs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
COMMANDS = {
    "gatehouse": ["-m", "gatehouse_operator.cli.gatehouse", "test", "vendor"],
    "gatehouse-service": [
        "-m",
        "gatehouse_operator.cli.service_cli",
        "deploy",
        "--project-dir",
        str(EXAMPLE),
    ],
}


@pytest.fixture
def unreachable(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    server = f"https://127.0.0.1:{free_port()}"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def run(command: str, kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *COMMANDS[command], *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_cluster_is_one_line_and_exit_2(command: str, unreachable: Path, tmp_path: Path) -> None:
    reach = "cannot reach the cluster at https://127.0.0.1:"
    cases = [
        ("kubeconfig: Invalid kube-config file", run(command, tmp_path / "absent")),
        (
            "kubeconfig: Invalid kube-config file. Expected object with name nope",
            run(command, unreachable, "--context", "nope"),
        ),
        (reach, run(command, unreachable)),
        # --kubeconfig wins over $KUBECONFIG, as with kubectl.
        (reach, run(command, tmp_path / "absent", "--kubeconfig", str(unreachable))),
    ]
    for message, done in cases:
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"{command}: {message}"), done.stderr


def test_a_sample_label_is_optional_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = cli._parser()
    assert parser.parse_args(["save-sample", "vendor-1"]).label == ""
    given = parser.parse_args(["test", "vendor", "--save-sample"])
    asked = runs.new_test("vendor", cli._test_spec(given)).body()
    assert asked["spec"]["saveAsSample"] == {"label": ""}
    assert cli.main(["save-sample", "vendor-1", "--label", "x" * 201]) == 2
    assert capsys.readouterr().err == "gatehouse: --label: at most 200 characters (or none)\n"
