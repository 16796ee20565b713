"""One root for the proxy's own exceptions (issue 48): whatever the proxy raises of its own can be
told from what a library raised, where a room ends."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import gatehouse_proxy
from gatehouse_proxy.errors import ProxyException


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(gatehouse_proxy.__path__, "gatehouse_proxy."):
        if module.name.endswith("__main__"):
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
            ):
                found[f"{module.name}.{name}"] = value
    return found


def test_every_exception_the_proxy_defines_derives_from_its_root() -> None:
    classes = _exception_classes()

    assert "gatehouse_proxy.errors.ProxyError" in classes
    rootless = [name for name, cls in classes.items() if not issubclass(cls, ProxyException)]
    assert sorted(rootless) == []
