"""No function in the proxy takes more than six parameters (self aside): a longer list is a value
waiting to be named, as the fetch (observation.fetch), the upstream request
(upstream.forwarder.UpstreamRequest) and the token request (credentials.token_grants.GrantRequest)
were (issue 48)."""

from __future__ import annotations

import ast
from pathlib import Path

import gatehouse_proxy

MOST = 6
ROOT = Path(gatehouse_proxy.__file__).parent


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = function.args
    named = [*arguments.posonlyargs, *arguments.args]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    rest = [arguments.vararg, arguments.kwarg]
    return len(named) + len(arguments.kwonlyargs) + sum(1 for each in rest if each is not None)


def too_long(root: Path) -> dict[str, int]:
    """Each function of the package under ``root`` with more than MOST parameters."""
    found = {}
    for module in sorted(root.rglob("*.py")):
        tree = ast.parse(module.read_text(), str(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = parameters(node)
                if count > MOST:
                    found[f"{module.relative_to(root).as_posix()}: {node.name}"] = count
    return found


def test_no_function_in_the_proxy_takes_more_than_six_parameters() -> None:
    assert too_long(ROOT) == {}


def test_the_count_leaves_self_aside_and_counts_the_rest() -> None:
    (method,) = ast.parse("def f(self, a, /, b, *c, d, **e): ...").body
    assert isinstance(method, ast.FunctionDef)
    assert parameters(method) == 5
