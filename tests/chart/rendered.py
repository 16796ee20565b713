"""The chart rendered by the real helm, as the tests of what it ships read it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from gatehouse_dev.binaries import ensure_binaries

CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"


def render(*values: str) -> list[dict[str, Any]]:
    """``helm template gh`` with ``--set`` for each of ``values``."""
    settings = [arg for value in values for arg in ("--set", value)]
    rendered = subprocess.run(
        [str(ensure_binaries().helm), "template", "gh", str(CHART), *settings],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def notes(*values: str) -> str:
    """NOTES.txt as ``helm install gh`` prints it into gatehouse-system (a client-side dry run),
    with ``--set`` for each of ``values``."""
    settings = [arg for value in values for arg in ("--set", value)]
    done = subprocess.run(
        [
            str(ensure_binaries().helm), "install", "gh", str(CHART), "-n", "gatehouse-system",
            "--dry-run=client", *settings,
        ],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.partition("NOTES:")[2]


def of_kind(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents if doc["kind"] == kind]
