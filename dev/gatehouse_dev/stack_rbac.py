"""The chart's RBAC for the local stack's operator and webhook, rendered with helm and kept in
``stack_rbac/``: the stack gives each component exactly the rights an installation gives it, and
``make demo`` needs no helm build for it. ``make crds`` renders them again; a test renders them
and fails when a kept copy has drifted from the chart.

    python -m gatehouse_dev.stack_rbac
"""

from __future__ import annotations

import subprocess
from pathlib import Path

RENDERED = Path(__file__).resolve().parent / "stack_rbac"
CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"
# The release the local stack stands for (gatehouse_dev.services).
RELEASE = NAMESPACE = "gatehouse-dev"
TEMPLATES = {
    "operator": (
        "templates/operator-rbac.yaml",
        # The ConfigMap the operator publishes its public sealing keys in, and the admission
        # policy that holds its Secret writes to its own.
        "templates/sealing-keys.yaml",
        "templates/operator-secret-policy.yaml",
    ),
    "webhook": ("templates/webhook-rbac.yaml",),
}


def render(helm: Path, component: str) -> str:
    """The component's RBAC as ``helm template`` renders it for the stack's release."""
    shown = [arg for template in TEMPLATES[component] for arg in ("--show-only", template)]
    return subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "-n", NAMESPACE, *shown],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def rendered(component: str) -> str:
    """The kept copy the stack applies."""
    return (RENDERED / f"{component}.yaml").read_text()


if __name__ == "__main__":
    from gatehouse_dev.binaries import ensure_binaries

    helm = ensure_binaries().helm
    RENDERED.mkdir(exist_ok=True)
    for name in TEMPLATES:
        (RENDERED / f"{name}.yaml").write_text(render(helm, name))
