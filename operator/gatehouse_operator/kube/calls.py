"""What every Kubernetes API call of the operator shares: the client, the API groups' handles,
a read asked again while the API server is briefly busy, and a failed call in words. Every
call goes through a handle that raises the typed errors of ``kube.errors``, never the client's
ApiException."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from kubernetes.aio import client, config

from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.kube.errors import ApiError, translate

T = TypeVar("T")
# A read the API server turns away for a moment is asked again: at most this many times, waiting
# as its Retry-After says, up to the cap.
READ_ATTEMPTS = 3
RETRY_AFTER_CAP_SECONDS = 2.0

# What a call to the API server raises when it fails: an HTTP error, a refused or broken
# connection, or a call bounded in time that ran out of it.
API_ERRORS = (ApiError, aiohttp.ClientError, TimeoutError)


def owner_reference(owner: dict[str, Any]) -> client.V1OwnerReference:
    """The controller reference that makes ``owner`` (a gatehouse.dev resource) own an object."""
    return client.V1OwnerReference(
        api_version=f"{GROUP}/{VERSION}",
        kind=owner["kind"],
        name=owner["name"],
        uid=owner["uid"],
        controller=True,
        block_owner_deletion=True,
    )


def failure(error: Exception) -> str:
    """A failed API call in words for a log or a message: the status, or the kind of error.
    Never the response's headers and body."""
    if isinstance(error, ApiError):
        return str(error)
    return type(error).__name__


async def api_client() -> client.ApiClient:
    """The in-cluster client in a Pod, else the kubeconfig's (KUBECONFIG or the default)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration)
    api: client.ApiClient = await config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=os.environ.get("KUBECONFIG")
    )
    return api


async def read(call: Callable[[], Awaitable[T]]) -> T:
    """``call`` (a read), asked again after a 429 or 503: the API server answers "storage is
    (re)initializing" for a second or two after a CRD is installed or changed."""
    for _ in range(READ_ATTEMPTS - 1):
        try:
            return await call()
        except ApiError as error:
            if error.status not in (429, 503):
                raise
            try:
                delay = float(error.retry_after or 1)
            except ValueError:
                delay = 1.0
            await asyncio.sleep(min(max(delay, 0.1), RETRY_AFTER_CAP_SECONDS))
    return await call()


class KubeCalls:
    """The client every part of ``Kube`` shares: the API groups' handles its calls go
    through."""

    def __init__(self, api: client.ApiClient, namespaces: tuple[str, ...] = ()) -> None:
        """``namespaces``: the ones the operator watches, if not all (operator.watchNamespaces:
        its rights are then Roles in those namespaces, and a cluster-wide list is refused)."""
        self.namespaces = namespaces
        self.core = translate(client.CoreV1Api(api))
        self.custom = translate(client.CustomObjectsApi(api))
        self.admission = translate(client.AdmissionregistrationV1Api(api))
