"""Saving a sample: the limit a connection keeps, a name another connection's sample holds, and
saves that finish together taking turns.

The API server is a stand-in here; the limit on a real one, twenty-one tests at once, is tested
end to end (tests/e2e/test_connection_tests.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.connections import sample_saving
from gatehouse_operator.connections.samples import MAX_SAMPLES_PER_CONNECTION
from gatehouse_operator.kube import Samples

OWNER = {"kind": "ExternalConnection", "name": "crm", "uid": "u1"}


class Stored:
    """One connection's ConnectionSamples; ``taken``: names another connection's sample holds."""

    def __init__(self, taken: frozenset[str] = frozenset()) -> None:
        self.kept: dict[str, dict[str, Any]] = {}
        self.taken = taken

    async def saved(self, namespace: str, connection: str) -> dict[str, dict[str, Any]]:
        await asyncio.sleep(0)  # a real list yields: another save may run meanwhile
        return dict(self.kept)

    async def create(
        self, namespace: str, owner: dict[str, Any], name: str, spec: dict[str, Any]
    ) -> bool:
        await asyncio.sleep(0)
        if name in self.taken:
            return False
        self.kept[name] = spec
        return True


def save(stored: Stored, *names: str) -> list[str]:
    """Saves ``names`` at once; each one's outcome: "Saved", or the refusal's reason."""

    async def one(name: str) -> str:
        try:
            await sample_saving.save(cast(Samples, stored), "team", OWNER, name, {"label": name})
        except sample_saving.SampleRefused as refused:
            return refused.reason
        return "Saved"

    async def all_of() -> list[str]:
        return list(await asyncio.gather(*map(one, names)))

    return asyncio.run(all_of())


def test_saves_finishing_together_stop_at_the_limit() -> None:
    stored = Stored()
    names = [f"t{i}" for i in range(MAX_SAMPLES_PER_CONNECTION + 1)]
    outcomes = save(stored, *names)
    assert sorted(outcomes) == [Reason.SAMPLE_LIMIT_REACHED] + ["Saved"] * 20
    assert len(stored.kept) == MAX_SAMPLES_PER_CONNECTION
    with pytest.raises(sample_saving.SampleRefused) as refused:
        asyncio.run(sample_saving.save(cast(Samples, stored), "team", OWNER, "more", {}))
    assert str(refused.value) == (
        "the connection keeps at most 20 samples; delete one "
        "(kubectl delete connectionsample NAME) to save another"
    )
    assert save(stored, "t0") == ["Saved"], "a sample saved already is done"


def test_a_name_another_connections_sample_holds_is_refused_naming_it() -> None:
    stored = Stored(taken=frozenset({"shared"}))
    with pytest.raises(sample_saving.SampleRefused) as refused:
        asyncio.run(sample_saving.save(cast(Samples, stored), "team", OWNER, "shared", {}))
    assert refused.value.reason == Reason.SAMPLE_EXISTS
    assert str(refused.value) == (
        "another connection's sample is named 'shared': delete it or run the test again under "
        "another name"
    )
