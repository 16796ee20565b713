"""The local stack's RBAC is the chart's: the kept copies the stack applies are what helm renders
now (``make crds`` renders them again)."""

from __future__ import annotations

import pytest

from gatehouse_dev import stack_rbac
from gatehouse_dev.binaries import ensure_binaries


@pytest.mark.parametrize("component", sorted(stack_rbac.TEMPLATES))
def test_the_stacks_rbac_is_the_charts_as_rendered_now(component: str) -> None:
    assert stack_rbac.rendered(component) == stack_rbac.render(ensure_binaries().helm, component), (
        "run `make crds`: the chart changed since its RBAC was rendered for the local stack"
    )
