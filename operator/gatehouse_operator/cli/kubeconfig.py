"""What the command-line tools share: loading the kubeconfig, its namespace, a bounded wait for
the API server, and readable errors, so a CLI says in one line why it could not run.

The CLI's one door to the Kubernetes client (its sync one, configured from the kubeconfig, which
the operator's ``kube`` does not load): the tools get their API handles here, and each handle's
calls raise ``kube.errors``' typed errors."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import urllib3
from kubernetes import client, config

from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.kube.errors import ApiError, translate

# (connect, read) seconds for each API call: without them a server that never answers (a
# firewall dropping packets) holds the command for ever.
REQUEST_TIMEOUT = (10, 60)


class ClusterError(GatehouseError):
    """The cluster cannot be used: no kubeconfig, an unknown context, no answer."""


# The handles' types, for the tools' signatures.
CustomObjects = client.CustomObjectsApi
ApiClient = client.ApiClient


def custom_objects() -> client.CustomObjectsApi:
    """The custom resources' API, as the loaded kubeconfig reaches it."""
    return translate(client.CustomObjectsApi())


def core() -> client.CoreV1Api:
    """The core API (Secrets, ConfigMaps), as the loaded kubeconfig reaches it."""
    return translate(client.CoreV1Api())


def api_client() -> client.ApiClient:
    """The client itself, for a request its generated APIs do not make."""
    return translate(client.ApiClient())


def who_am_i() -> dict[str, object]:
    """The caller as the API server authenticates them (a SelfSubjectReview, as ``kubectl auth
    whoami``): its userInfo (username, uid, groups, extra), whatever the kubeconfig uses."""
    review = translate(client.AuthenticationV1Api()).create_self_subject_review(
        client.V1SelfSubjectReview(), _request_timeout=REQUEST_TIMEOUT
    )
    info = review.status.user_info if review.status else None
    found: dict[str, object] = info.to_dict() if info else {}
    return found


def bearer_token() -> str:
    """The loaded kubeconfig's bearer token (a token user's, an exec plugin's, the Pod's
    ServiceAccount's); empty when it authenticates otherwise (a client certificate)."""
    # The client keeps it under "BearerToken", with its "Bearer " prefix, whatever its source;
    # asking through get_api_key_with_prefix runs the refresh hook of a token that expires.
    configured = client.Configuration.get_default_copy()
    found: str = configured.get_api_key_with_prefix("BearerToken") or ""
    return found.partition(" ")[2] if found.lower().startswith("bearer ") else ""


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


def refusal(error: ApiError) -> str:
    """The API server's own message (it names the field and the rule), or its status."""
    try:
        return str(json.loads(error.body or "").get("message"))
    except (ValueError, TypeError, AttributeError):
        return f"the API server answered {error.status} {error.reason}"
