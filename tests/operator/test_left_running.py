"""A test an earlier run sent and never saw the end of is not sent again: what this process
wrote last decides, else the stored status."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.stored import StoredConnectionTest
from gatehouse_operator.connections.testing import Finished
from gatehouse_operator.controllers.connection_tests import _not_left_running
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.status import Condition

KEY = "team/ConnectionTest/crm-1"


class Written:
    """The status writer's memory of what it wrote, as _not_left_running reads it."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason

    def condition(self, key: str, type_: ConditionType) -> Condition | None:
        assert (key, type_) == (KEY, ConditionType.PASSED)
        if self.reason is None:
            return None
        return Condition(ConditionType.PASSED, "False", self.reason, "", "", 1)


class FakeRuntime:
    def __init__(self, reason: str | None) -> None:
        self.status = Written(reason)


def _body(reason: str | None) -> dict[str, Any]:
    status = {"conditions": [{"type": "Passed", "status": "Unknown", "reason": reason}]}
    return {"metadata": {"name": "crm-1", "namespace": "team"}, "status": status if reason else {}}


@pytest.mark.parametrize(
    ("written", "stored", "left"),
    [
        ("Running", None, True),
        (None, "Running", True),
        ("Pending", "Running", False),
        (None, "Pending", False),
        (None, None, False),
    ],
)
def test_what_was_written_last_decides(written: str | None, stored: str | None, left: bool) -> None:
    runtime = cast(Runtime, FakeRuntime(written))
    if left:
        with pytest.raises(Finished) as raised:
            _not_left_running(runtime, StoredConnectionTest.of(_body(stored)), KEY)
        assert raised.value.verdict.reason == "OutcomeUnknown"
    else:
        _not_left_running(runtime, StoredConnectionTest.of(_body(stored)), KEY)
