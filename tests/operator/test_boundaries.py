"""The operator's boundaries, held for every module (those added later too): the Kubernetes
client only in its rooms, its ApiException named only in ``kube`` (which turns it into
``kube.errors``' typed errors), and one root for the operator's own exceptions.

pyproject.toml's import contract "The Kubernetes client only at the boundary" says the first for
the packages it lists; these tests say it of every module, and what import-linter cannot: that no
ApiException is caught (or named) outside kube."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import tokenize
from pathlib import Path

import gatehouse_operator
from gatehouse_operator.errors import GatehouseError

PACKAGE = Path(gatehouse_operator.__file__).parent

# The rooms that talk to the API server with the client itself: the operator's own calls, the
# Lease, who may (TokenReview, SubjectAccessReview, the changes made as a user), and the CLI's
# kubeconfig (the sync client, configured from the user's kubeconfig).
KUBERNETES_ROOMS = ("kube/", "leadership/", "access/", "cli/kubeconfig.py")

# Exception classes that may not derive from GatehouseError, each with why. None so far: the
# ones that are also a ValueError, LookupError or ConnectionError keep that base beside it.
NOT_ROOTED: dict[str, str] = {}


def _modules() -> list[tuple[str, str]]:
    """Each module's path inside the package, and its source."""
    return [
        (path.relative_to(PACKAGE).as_posix(), path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_the_kubernetes_client_is_imported_only_in_its_rooms() -> None:
    outside = []
    for name, source in _modules():
        if name.startswith(KUBERNETES_ROOMS):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                imported = [node.module or ""]
            else:
                continue
            outside += [
                f"{name}:{node.lineno} imports {module}"
                for module in imported
                if module.partition(".")[0] == "kubernetes"
            ]
    assert outside == [], "use kube's calls and kube.errors instead"


def test_no_apiexception_outside_kube() -> None:
    """Not caught, not named: kube turns it into kube.errors' typed set where the call is made
    (comments and docstrings may speak of it)."""
    named = [
        f"{name}:{token.start[0]}"
        for name, source in _modules()
        if not name.startswith("kube/")
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.NAME and token.string == "ApiException"
    ]
    assert named == [], "catch kube.errors' ApiError (or NotFound, Conflict...) instead"


def test_every_exception_the_operator_defines_derives_from_its_root() -> None:
    unrooted = []
    for module in pkgutil.walk_packages([str(PACKAGE)], "gatehouse_operator."):
        if module.name.endswith("__main__"):
            continue  # running it starts the operator
        found = importlib.import_module(module.name)
        for name, value in inspect.getmembers(found, inspect.isclass):
            if value.__module__ != module.name or not issubclass(value, BaseException):
                continue
            if not issubclass(value, GatehouseError) and name not in NOT_ROOTED:
                unrooted.append(f"{module.name}.{name}")
    assert unrooted == [], "derive from gatehouse_operator.errors.GatehouseError"
