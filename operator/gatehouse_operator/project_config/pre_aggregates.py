"""Where a query runs, and what a failed pre-aggregate execution does.

A query that matches a pre-aggregate runs on it. If that fails (an unreadable materialization, an
engine error, a missing external table) the query is retried on the warehouse when
``defaults.pre_aggregate_execution_fallback`` is true (the default), and fails with an error that
names the setting when it is false. A query that matches no pre-aggregate runs on the warehouse
regardless of the setting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

Result = TypeVar("Result")


class PreAggregateExecutionError(RuntimeError):
    pass


async def execute(
    *,
    matched: bool,
    on_pre_aggregate: Callable[[], Awaitable[Result]],
    on_warehouse: Callable[[], Awaitable[Result]],
    fallback: bool = True,
) -> Result:
    if not matched:
        return await on_warehouse()
    try:
        return await on_pre_aggregate()
    except Exception as cause:
        if fallback:
            return await on_warehouse()
        raise PreAggregateExecutionError(
            "Pre-aggregate execution failed and execution fallback is disabled for this project "
            f"(defaults.pre_aggregate_execution_fallback): {cause}"
        ) from cause
