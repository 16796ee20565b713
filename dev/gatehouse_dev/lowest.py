"""``python -m gatehouse_dev.lowest``: pins every direct dependency at its declared lower bound.

``make test-lowest`` installs with these constraints and runs the unit tests, so a lower bound in
pyproject.toml is one that has been seen to work, not a guess.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement


def constraints(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["operator"]]
    pins = []
    for item in declared:
        requirement = Requirement(item)
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if lower:
            pins.append(f"{requirement.name}=={lower[0]}")
    return pins


def main() -> int:
    pyproject = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("pyproject.toml")
    print("\n".join(constraints(pyproject)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
