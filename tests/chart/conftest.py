from __future__ import annotations

import pytest

from tests.chart.exported import Exported, exported


@pytest.fixture(scope="session")
def found() -> Exported:
    """What the proxy and the operator export."""
    return exported()
