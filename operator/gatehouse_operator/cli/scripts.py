"""The console scripts. The CLIs need the ``operator`` extra; the base install is the proxy's, so
without the extra they say how to get it instead of ending on an import traceback."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import cast

NOT_RUN = 2  # both CLIs' status for "nothing was tried"
HINT = "needs the operator extra: pip install 'gatehouse[operator]'"


def _entry(module: str, function: str) -> Callable[[], int]:
    def run() -> int:
        try:
            loaded = importlib.import_module(f"gatehouse_operator.{module}")
        except ModuleNotFoundError as missing:
            if missing.name is None or missing.name.startswith("gatehouse"):
                raise
            print(f"{_prog()}: {HINT} (missing module: {missing.name})", file=sys.stderr)
            return NOT_RUN
        return cast(Callable[[], int], getattr(loaded, function))()

    return run


def _prog() -> str:
    return sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else "gatehouse"


gatehouse = _entry("cli.gatehouse", "main")
gatehouse_service = _entry("cli.service_cli", "main")
kubectl_gatehouse = _entry("cli.gatehouse", "kubectl_plugin")
kubectl_complete_gatehouse = _entry("cli.gatehouse", "kubectl_completion")
