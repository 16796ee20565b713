"""What the command-line tools share: loading the kubeconfig, its namespace, a bounded wait for
the API server, and readable errors, so a CLI says in one line why it could not run."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import urllib3
from kubernetes import client, config

# (connect, read) seconds for each API call: without them a server that never answers (a
# firewall dropping packets) holds the command for ever.
REQUEST_TIMEOUT = (10, 60)


class ClusterError(Exception):
    """The cluster cannot be used: no kubeconfig, an unknown context, no answer."""


# Where a Pod finds its ServiceAccount's namespace (the token and CA are beside it).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def load(context: str | None, given: str | None, path: str | None = None) -> str:
    """Loads the kubeconfig (``path``, else $KUBECONFIG, else ~/.kube/config; ``context``, else
    its current one) and returns the namespace to work in. With none of those and inside a Pod
    (a CI job), the Pod's ServiceAccount is used, as kubectl does."""
    try:
        if path is None and context is None and _in_a_pod_without_kubeconfig():
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return given or SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        config.load_kube_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
        return _namespace(context, given, path)
    except config.ConfigException as error:
        raise ClusterError(f"kubeconfig: {error}") from None
    except OSError as error:
        raise ClusterError(f"in-cluster config: {error.strerror}: {error.filename}") from None


def _in_a_pod_without_kubeconfig() -> bool:
    return (
        "KUBERNETES_SERVICE_HOST" in os.environ
        and "KUBECONFIG" not in os.environ
        and not Path(config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser().exists()
    )


def _namespace(context: str | None, given: str | None, path: str | None) -> str:
    """``given``, else the namespace of the kubeconfig context in use, else ``default``."""
    if given:
        return given
    contexts, active = config.list_kube_config_contexts(path)  # type: ignore[no-untyped-call]
    chosen = next((c for c in contexts if c["name"] == context), active) if context else active
    return str((chosen or {}).get("context", {}).get("namespace") or "default")


@contextlib.contextmanager
def reaching_the_cluster() -> Iterator[None]:
    """Turns a failure to talk to the API server into a :class:`ClusterError`."""
    try:
        yield
    except urllib3.exceptions.HTTPError as error:
        cause = getattr(error, "reason", None) or error
        server = client.Configuration.get_default_copy().host
        # urllib3 prefixes the connection's repr; the end says what happened.
        raise ClusterError(
            f"cannot reach the cluster at {server}: {str(cause).rpartition(': ')[2]}"
        ) from None


def refusal(error: client.ApiException) -> str:
    """The API server's own message (it names the field and the rule), or its status."""
    try:
        return str(json.loads(error.body or "").get("message"))
    except (ValueError, TypeError, AttributeError):
        return f"the API server answered {error.status} {error.reason}"
