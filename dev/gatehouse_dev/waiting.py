"""Bounded waits: tests and tools poll with a deadline, never with bare sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T | None], timeout: float, *, interval: float = 0.1, what: str = ""
) -> T:
    """Returns the first truthy value of ``predicate()``; raises TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what or 'condition'} not met within {timeout:.1f}s")
        time.sleep(interval)
