"""What the command-line tools share: the kubeconfig's namespace, and readable API refusals."""

from __future__ import annotations

import json

from kubernetes import client, config


def namespace(context: str | None, given: str | None) -> str:
    """``given``, else the namespace of the kubeconfig context in use, else ``default``."""
    if given:
        return given
    contexts, active = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
    chosen = next((c for c in contexts if c["name"] == context), active) if context else active
    return str((chosen or {}).get("context", {}).get("namespace") or "default")


def refusal(error: client.ApiException) -> str:
    """The API server's own message (it names the field and the rule), or its status."""
    try:
        return str(json.loads(error.body or "").get("message"))
    except (ValueError, TypeError, AttributeError):
        return f"the API server answered {error.status} {error.reason}"
