"""Issues 41 and 48's counts: what is counted, and where each program's boundary is."""

from __future__ import annotations

from pathlib import Path

from gatehouse_dev import typing_counts

SOURCE = '''"""Says dict[str, Any] and .get("spec") in a docstring: not counted."""
from typing import Any

def f(body: dict[str, Any]) -> dict[str, Any]:
    # a comment with dict[str, Any] is not counted either
    return body.get("spec", {}).get("spec", {})

def g(other: dict[str, int]) -> None: ...

def h(read_only: Mapping[str, Any]) -> None: ...
'''


def test_counts_code_not_words_and_keeps_the_boundary_apart(tmp_path: Path) -> None:
    (tmp_path / "wiring").mkdir()
    (tmp_path / "wiring" / "handlers.py").write_text(SOURCE)
    (tmp_path / "use_case.py").write_text(SOURCE)

    counts = typing_counts.count(tmp_path)

    assert counts.any_dicts == {"wiring/handlers.py": 2, "use_case.py": 2}
    assert counts.any_mappings == {"wiring/handlers.py": 1, "use_case.py": 1}
    assert counts.spec_gets.total() == 4
    assert counts.spec_gets_outside() == 2
    assert counts.any_dicts_outside() == 2
    assert counts.any_mappings_outside() == 1
    assert "outside the boundary" in typing_counts.report(counts)


def test_free_form_json_is_counted_beside_it(tmp_path: Path) -> None:
    (tmp_path / "openapi.py").write_text(
        "from pydantic import JsonValue\n\ndef doc() -> dict[str, JsonValue]:\n    return {}\n"
    )

    counts = typing_counts.count(tmp_path)

    assert counts.json_values == {"openapi.py": 1}
    assert "JsonValue (free-form JSON documents) in the operator: 1" in typing_counts.report(counts)


def test_the_operator_keeps_its_figures() -> None:
    """Issue 41's targets, held on the tree: few untyped dicts, all where kopf or the Kubernetes
    client hands a plain mapping over; a resource's spec read from its model everywhere else."""
    counts = typing_counts.count(Path(__file__).resolve().parents[2] / typing_counts.OPERATOR)

    assert counts.any_dicts.total() <= 30, typing_counts.report(counts)
    assert counts.any_dicts_outside() == 0, typing_counts.report(counts)
    assert counts.any_mappings_outside() == 0, typing_counts.report(counts)
    assert counts.spec_gets_outside() == 0, typing_counts.report(counts)


def test_the_proxy_keeps_its_figures() -> None:
    """Untyped mappings only where data enters the proxy untyped: what the store answers, the
    table's entries before they are validated, uvicorn's options."""
    root = Path(__file__).resolve().parents[2]
    counts = typing_counts.count(root / typing_counts.PROXY, "proxy")

    assert counts.any_dicts_outside() == 0, typing_counts.report(counts)
    assert counts.any_mappings_outside() == 0, typing_counts.report(counts)
    assert counts.spec_gets.total() == 0, typing_counts.report(counts)
