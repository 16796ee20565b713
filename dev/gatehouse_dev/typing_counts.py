"""How far each program's types reach (issues 41 and 48): ``dict[str, Any]`` and
``Mapping[str, Any]``, and ``.get("spec", ...)`` calls, outside the modules where data enters
untyped (each program's boundary).

Counted on the syntax tree, so a docstring or comment that names them does not count.
``python -m gatehouse_dev typing-counts`` prints the figures.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

OPERATOR = Path("operator/gatehouse_operator")
PROXY = Path("proxy/gatehouse_proxy")
# Where a resource arrives as a plain dict: kopf's handlers (wiring/), the Kubernetes client
# (kube/), the admission webhook's AdmissionReview (access/webhook_server.py,
# controllers/admission.py), and the user's own YAML file (cli/seal_cli.py): seal and reseal
# write a value into that file in place, keeping its comments, key order and unknown fields
# (ruamel's round trip), which a parsed model would drop. And one that leaves as kopf makes it:
# controllers/webhook_configuration.py, the ValidatingWebhookConfiguration's webhooks exactly as
# kopf's own builder (build_webhooks, typed list[dict[str, Any]] by kopf) renders them for the
# API server and the chart, so that they match what kopf's webhook server answers on.
OPERATOR_BOUNDARY = (
    "wiring/",
    "kube/",
    "access/webhook_server.py",
    "controllers/admission.py",
    "controllers/webhook_configuration.py",
    "cli/seal_cli.py",
)
# The proxy's: the store (what redis-py answers, and the options it takes), the table's entries as
# the channel's JSON parses them before they are validated, and uvicorn's options.
PROXY_BOUNDARY = ("store/", "table/routing_table.py", "__main__.py")
PROGRAMS = {"operator": (OPERATOR, OPERATOR_BOUNDARY), "proxy": (PROXY, PROXY_BOUNDARY)}


@dataclass
class Counts:
    """Per module (its path under the program's package): each figure's occurrences."""

    program: str = "operator"
    boundary: tuple[str, ...] = OPERATOR_BOUNDARY
    any_dicts: Counter[str] = field(default_factory=Counter)
    any_mappings: Counter[str] = field(default_factory=Counter)
    json_values: Counter[str] = field(default_factory=Counter)
    spec_gets: Counter[str] = field(default_factory=Counter)

    def spec_gets_outside(self) -> int:
        return self._outside(self.spec_gets)

    def any_dicts_outside(self) -> int:
        return self._outside(self.any_dicts)

    def any_mappings_outside(self) -> int:
        return self._outside(self.any_mappings)

    def _outside(self, counter: Counter[str]) -> int:
        return sum(n for module, n in counter.items() if not module.startswith(self.boundary))


def _any_keyed(node: ast.AST) -> str | None:
    """``dict``, ``Mapping`` or ``MutableMapping`` for a ``X[str, Any]``, else None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("dict", "Mapping", "MutableMapping")
        and isinstance(node.slice, ast.Tuple)
        and [ast.unparse(part) for part in node.slice.elts] == ["str", "Any"]
    ):
        return node.value.id
    return None


def _is_json_value(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "JsonValue"


def _is_spec_get(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "spec"
    )


def count(package: Path, program: str = "operator") -> Counts:
    counts = Counts(program, PROGRAMS[program][1])
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            keyed = _any_keyed(node)
            if keyed == "dict":
                counts.any_dicts[module] += 1
            elif keyed is not None:
                counts.any_mappings[module] += 1
            elif _is_json_value(node):
                counts.json_values[module] += 1
            elif _is_spec_get(node):
                counts.spec_gets[module] += 1
    return counts


def report(counts: Counts) -> str:
    def top(counter: Counter[str]) -> str:
        return ", ".join(f"{module} {n}" for module, n in counter.most_common(8))

    return "\n".join(
        [
            f"dict[str, Any] in the {counts.program}: {counts.any_dicts.total()}, "
            f"outside the boundary: {counts.any_dicts_outside()}",
            f"  most: {top(counts.any_dicts)}",
            # The same untyped shape under a read-only name: shown so it cannot stand in unseen.
            f"Mapping[str, Any] in the {counts.program}: {counts.any_mappings.total()}, "
            f"outside the boundary: {counts.any_mappings_outside()}",
            f"  most: {top(counts.any_mappings)}",
            # Shown beside it so a free-form document typed as pydantic's JsonValue (checked by
            # mypy, unlike Any) is not mistaken for a resource that escaped its model.
            f"JsonValue (free-form JSON documents) in the {counts.program}: "
            f"{counts.json_values.total()}",
            f"  most: {top(counts.json_values)}",
            f'.get("spec", ...) in the {counts.program}: {counts.spec_gets.total()}',
            f'.get("spec", ...) outside the boundary ({", ".join(counts.boundary)}): '
            f"{counts.spec_gets_outside()}",
            f"  most: {top(counts.spec_gets)}",
        ]
    )


def main(root: Path) -> int:
    print("\n".join(report(count(root / path, program)) for program, (path, _) in PROGRAMS.items()))
    return 0
