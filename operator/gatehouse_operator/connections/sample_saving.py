"""Saving a passing test's answer as a sample of its connection: at most
``samples.MAX_SAMPLES_PER_CONNECTION`` a connection, and one save a connection at a time in this
process, so twenty tests finishing together cannot all pass the count before any is written
(only the elected operator saves)."""

from __future__ import annotations

import asyncio
import weakref

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.connections.samples import MAX_SAMPLES_PER_CONNECTION
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.kube import Samples


class SampleRefused(GatehouseError):
    """The sample cannot be saved: ``reason`` is the SampleSaved condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# Per (namespace, connection): the save under way holds its lock, and it goes with the last save.
_writers: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


async def save(
    stored: Samples, namespace: str, owner: dict[str, str], name: str, spec: dict[str, object]
) -> None:
    """Saves the ConnectionSample ``name`` of the connection ``owner`` (deleted with it), or
    raises SampleRefused. Saving a sample that exists already is done."""
    connection = owner["name"]
    key = (namespace, connection)
    writer = _writers.get(key) or _writers.setdefault(key, asyncio.Lock())
    async with writer:
        saved = await stored.saved(namespace, connection)
        if name in saved:
            return
        if len(saved) >= MAX_SAMPLES_PER_CONNECTION:
            raise SampleRefused(
                Reason.SAMPLE_LIMIT_REACHED,
                f"the connection keeps at most {MAX_SAMPLES_PER_CONNECTION} samples; delete one "
                f"(kubectl delete {CONNECTION_SAMPLE.singular} NAME) to save another",
            )
        if not await stored.create(namespace, owner, name, spec):
            raise SampleRefused(
                Reason.SAMPLE_EXISTS,
                f"another connection's sample is named {name!r}: delete it or run the test "
                "again under another name",
            )
