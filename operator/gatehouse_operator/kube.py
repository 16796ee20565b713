"""The few Kubernetes API calls the operator makes itself (kopf does the watching)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, cast

import aiohttp
from kubernetes.aio import client, config

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.meta import GROUP, VERSION, Kind

T = TypeVar("T")
# A read the API server turns away for a moment is asked again: at most this many times, waiting
# as its Retry-After says, up to the cap.
READ_ATTEMPTS = 3
RETRY_AFTER_CAP_SECONDS = 2.0

CREDENTIAL_LABEL = "gatehouse.dev/credential-for"
# The operator watches only Secrets labelled so (a server-side selector): every other Secret in
# the cluster, Helm's release manifests included, never crosses its watch.
WATCHED_LABEL = "gatehouse.dev/credential"
WATCHED_SELECTOR = f"{WATCHED_LABEL}=true"
TOKEN_KEY = "token"  # noqa: S105 (the key name within the Secret)
# What a call to the API server raises when it fails: an HTTP error, a refused or broken
# connection, or a call bounded in time that ran out of it.
API_ERRORS = (client.ApiException, aiohttp.ClientError, TimeoutError)


# How often an app whose credential Secret's name is taken tries again.
SECRET_TAKEN_RETRY_SECONDS = 30


class SecretTaken(Exception):
    """An app's credential Secret name is held by a Secret the operator did not make for it."""


def credential_owner(
    secret: client.V1Secret, owner: dict[str, Any]
) -> Literal["this app", "an earlier app"] | None:
    """Whom the operator made the credential Secret ``secret`` for: "this app" (``owner``),
    "an earlier app" of the same kind and name (deleted since), or None: not the operator's.

    The operator's mark is its controller reference to the app. Making one takes create on
    Secrets, which whoever may only create apps does not have.
    """
    references = (secret.metadata.owner_references if secret.metadata else None) or []
    for reference in references:
        if not (
            reference.controller
            and reference.api_version.partition("/")[0] == GROUP
            and reference.kind == owner["kind"]
            and reference.name == owner["name"]
        ):
            continue
        return "this app" if reference.uid == owner["uid"] else "an earlier app"
    return None


class SampleRefused(Exception):
    """The sample cannot be saved: ``reason`` is the SampleSaved condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _owner(owner: dict[str, Any]) -> client.V1OwnerReference:
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
    Never an ApiException's own rendering, which carries the response's headers and body."""
    if isinstance(error, client.ApiException):
        return f"HTTP {error.status} {error.reason}"
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


def watched(secret: client.V1Secret) -> bool:
    """Whether the Secret is on the operator's watch."""
    labels = (secret.metadata.labels if secret.metadata else None) or {}
    return labels.get(WATCHED_LABEL) == "true"


def _decoded(data: dict[str, bytes | str] | None) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in (data or {}).items()}


async def _read(call: Callable[[], Awaitable[T]]) -> T:
    """``call`` (a read), asked again after a 429 or 503: the API server answers "storage is
    (re)initializing" for a second or two after a CRD is installed or changed."""
    for _ in range(READ_ATTEMPTS - 1):
        try:
            return await call()
        except client.ApiException as error:
            if error.status not in (429, 503):
                raise
            try:
                delay = float((error.headers or {}).get("Retry-After", 1))
            except ValueError:
                delay = 1.0
            await asyncio.sleep(min(max(delay, 0.1), RETRY_AFTER_CAP_SECONDS))
    return await call()


class Kube:
    def __init__(self, api: client.ApiClient, namespaces: tuple[str, ...] = ()) -> None:
        """``namespaces``: the ones the operator watches, if not all (operator.watchNamespaces:
        its rights are then Roles in those namespaces, and a cluster-wide list is refused)."""
        self.namespaces = namespaces
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self._sample_writers: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def post_event(
        self, kind: Kind, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        """An Event on a resource, as ``kubectl describe`` and ``get events`` show them.

        Posted directly rather than through kopf's queue, which only handlers can reach: the
        rollout writes statuses from a task of its own.
        """
        stamp = datetime.datetime.now(datetime.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{meta['name'][:200]}.", namespace=meta["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=f"{GROUP}/{VERSION}",
                kind=kind.kind,
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            source=client.V1EventSource(component="gatehouse-operator"),
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
            reporting_component="gatehouse.dev/operator",
            reporting_instance=os.environ.get("POD_NAME", "gatehouse-operator")[:128],
        )
        await self.core.create_namespaced_event(meta["namespace"], event)

    async def secret(self, namespace: str, name: str) -> client.V1Secret | None:
        try:
            found: client.V1Secret = await self.core.read_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    async def secret_data(self, namespace: str, name: str) -> dict[str, bytes] | None:
        secret = await self.secret(namespace, name)
        return None if secret is None else _decoded(secret.data)

    async def watched_secret(
        self, namespace: str, name: str
    ) -> tuple[dict[str, bytes] | None, bool]:
        """A Secret's data (None: there is no such Secret) and whether the operator's watch
        sees it."""
        secret = await self.secret(namespace, name)
        if secret is None:
            return None, False
        return _decoded(secret.data), watched(secret)

    async def create_secret(
        self,
        namespace: str,
        name: str,
        string_data: dict[str, str],
        *,
        type_: str = "Opaque",
        owner: client.V1OwnerReference | None = None,
    ) -> None:
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={"app.kubernetes.io/managed-by": "gatehouse-operator"},
                owner_references=[owner] if owner else None,
            ),
            type=type_,
            string_data=string_data,
        )
        await self.core.create_namespaced_secret(namespace, body)

    async def create_secret_if_absent(
        self,
        namespace: str,
        name: str,
        string_data: dict[str, str],
        *,
        type_: str = "Opaque",
        owner: client.V1OwnerReference | None = None,
    ) -> bool:
        """Creates the Secret unless it exists; False when it does. Replicas race to make the
        same Secret (a rollout overlaps): a 409 means another one made it, and theirs stands."""
        try:
            await self.create_secret(namespace, name, string_data, type_=type_, owner=owner)
        except client.ApiException as error:
            if error.status != 409:
                raise
            return False
        return True

    async def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            found = await self.core.read_namespaced_config_map(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(found.data or {})

    async def publish_config_map(self, namespace: str, name: str, data: dict[str, str]) -> bool:
        """Makes the ConfigMap (the chart's) hold ``data``; True when it had to be written."""
        current = await self.config_map_data(namespace, name)
        if current is None:
            raise LookupError(
                f"ConfigMap {namespace}/{name} does not exist: the chart makes it (helm upgrade "
                "puts it back)"
            )
        if current == data:
            return False
        await self.core.patch_namespaced_config_map(name, namespace, {"data": data})
        return True

    async def webhook_configuration_owner(self, name: str) -> client.V1OwnerReference:
        """An owner reference to the ValidatingWebhookConfiguration ``name``."""
        found = await self.admission.read_validating_webhook_configuration(name)
        return client.V1OwnerReference(
            api_version="admissionregistration.k8s.io/v1",
            kind="ValidatingWebhookConfiguration",
            name=name,
            uid=str(found.metadata.uid if found.metadata else ""),
        )

    async def app_token(self, namespace: str, secret_name: str, owner: dict[str, Any]) -> str:
        """The app's proxy credential from the Secret the operator made for it, created if
        missing. A Secret of that name that is not the app's is left as it is: raises
        SecretTaken (whoever may create apps must not take over, or overwrite, a Secret)."""
        found = await self.secret(namespace, secret_name)
        labels = {CREDENTIAL_LABEL: f"{owner['kind']}.{owner['name']}", WATCHED_LABEL: "true"}
        token = secrets.token_urlsafe(32)
        metadata = client.V1ObjectMeta(
            name=secret_name, labels=labels, owner_references=[_owner(owner)]
        )
        body = client.V1Secret(metadata=metadata, type="Opaque", string_data={TOKEN_KEY: token})
        if found is None:
            await self.core.create_namespaced_secret(namespace, body)
            return token
        made_for = credential_owner(found, owner)
        if made_for is None:
            raise SecretTaken(
                f"Secret {secret_name!r} exists and is not this {owner['kind']}'s: the operator "
                "uses it only if it made it for the app (owned by it). Rename or delete that "
                f"Secret, or give the {owner['kind']} another name; it is tried again every "
                f"{SECRET_TAKEN_RETRY_SECONDS} s"
            )
        existing = _decoded(found.data)
        if made_for == "this app" and existing.get(TOKEN_KEY):
            if not watched(found):
                # Made by a version that watched every Secret: labelled, or a rotation by hand
                # would go unseen.
                patch = {"metadata": {"labels": labels}}
                await self.core.patch_namespaced_secret(secret_name, namespace, patch)
            return existing[TOKEN_KEY].decode()
        # Its token is missing, or it was made for an earlier app of this name that is gone (the
        # garbage collector deletes it soon): a new token, as if it had been deleted. Replaced
        # as read, so a Secret changed meanwhile is read again, never overwritten.
        metadata.resource_version = found.metadata.resource_version if found.metadata else None
        await self.core.replace_namespaced_secret(secret_name, namespace, body)
        return token

    async def delete_credential_secret(
        self, namespace: str, secret_name: str, owner: dict[str, Any]
    ) -> None:
        """Deletes the app's credential Secret if it is the one the operator made for it."""
        found = await self.secret(namespace, secret_name)
        if found is None or found.metadata is None or credential_owner(found, owner) != "this app":
            return
        # Only that very Secret: one made again meanwhile under the name is left alone.
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=found.metadata.uid)
        )
        try:
            await self.core.delete_namespaced_secret(secret_name, namespace, body=options)
        except client.ApiException as error:
            if error.status not in (404, 409):
                raise

    async def samples(self, namespace: str, connection: str) -> dict[str, dict[str, Any]]:
        """The connection's saved samples: each ConnectionSample's name to its spec.

        The namespace's samples, filtered here: a label would carry the connection's name, and
        names may be longer than a label value's 63 characters.
        """
        return {
            item["metadata"]["name"]: item["spec"]
            for item in await self.list_custom(CONNECTION_SAMPLE, namespace)
            if item.get("spec", {}).get("connection") == connection
        }

    async def save_sample(
        self, namespace: str, owner: dict[str, Any], name: str, spec: dict[str, Any], limit: int
    ) -> None:
        """Writes the ConnectionSample ``name`` (owned by the connection, deleted with it).

        Saves for one connection take turns in this process, so twenty tests finishing together
        cannot all pass the count before any is written; only the elected operator saves.
        Saving a sample that exists already is done.
        """
        connection = owner["name"]
        key = (namespace, connection)
        writer = self._sample_writers.get(key) or self._sample_writers.setdefault(
            key, asyncio.Lock()
        )
        async with writer:
            saved = await self.samples(namespace, connection)
            if name in saved:
                return
            if len(saved) >= limit:
                raise SampleRefused(
                    Reason.SAMPLE_LIMIT_REACHED,
                    f"the connection keeps at most {limit} samples; delete one "
                    f"(kubectl delete {CONNECTION_SAMPLE.singular} NAME) to save another",
                )
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": CONNECTION_SAMPLE.kind,
                "metadata": {
                    "name": name,
                    "ownerReferences": [
                        self.custom.api_client.sanitize_for_serialization(_owner(owner))
                    ],
                },
                "spec": spec,
            }
            try:
                await self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, CONNECTION_SAMPLE.plural, body
                )
            except client.ApiException as error:
                if error.status != 409:
                    raise
                raise SampleRefused(
                    Reason.SAMPLE_EXISTS,
                    f"another connection's sample is named {name!r}: delete it or run the test "
                    "again under another name",
                ) from None

    async def annotate(
        self, kind: Kind, namespace: str, name: str, key: str, value: str | None
    ) -> None:
        """Sets one annotation, or removes it (None); an object deleted meanwhile is left be."""
        try:
            await self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                kind.plural,
                name,
                {"metadata": {"annotations": {key: value}}},
                _content_type="application/merge-patch+json",
            )
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def delete_sample(self, namespace: str, connection: str, name: str) -> bool:
        """Deletes the connection's sample ``name``; False when it has no such sample."""
        found = await self.get_custom(CONNECTION_SAMPLE, namespace, name)
        if found is None or found.get("spec", {}).get("connection") != connection:
            return False
        # The uid precondition: never a same-named sample saved after this read.
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                CONNECTION_SAMPLE.plural,
                name,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(uid=found["metadata"]["uid"])
                ),
            )
        except client.ApiException as error:
            if error.status not in (404, 409):
                raise
            return False
        return True

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found = await _read(
                lambda: self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, kind.plural, name
                )
            )
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return cast(dict[str, Any], found)

    async def list_custom(self, kind: Kind, namespace: str) -> list[dict[str, Any]]:
        listing = cast(
            dict[str, Any],
            await _read(
                lambda: self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, kind.plural
                )
            ),
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def delete_custom(self, kind: Kind, namespace: str, name: str) -> None:
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, name
            )
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def set_webhook_ca(self, configuration: str, ca_bundle: str) -> None:
        """Writes ``ca_bundle`` into every webhook of the ValidatingWebhookConfiguration.

        A strategic merge keyed by webhook name touches caBundle alone, and a PATCH never
        creates: a configuration uninstalled meanwhile stays gone.
        """
        live = await self.admission.read_validating_webhook_configuration(configuration)
        patch = {
            "webhooks": [
                {"name": webhook.name, "clientConfig": {"caBundle": ca_bundle}}
                for webhook in live.webhooks or []
            ]
        }
        await self.admission.patch_validating_webhook_configuration(
            configuration, patch, _content_type="application/strategic-merge-patch+json"
        )

    async def patch_status(
        self, kind: Kind, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        try:
            await self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, kind.plural, name, {"status": status}
            )
        except client.ApiException as error:
            if error.status != 404:  # deleted meanwhile: nothing left to report on
                raise

    async def existing(self, kind: Kind, patience: float = 30.0) -> list[dict[str, Any]]:
        """Every object of ``kind`` in the watched namespaces, as plain dicts.

        Retries while the API server says it is busy: right after a CRD is installed, listing
        its objects answers 429 "storage is (re)initializing" for a moment.
        """
        deadline = time.monotonic() + patience
        while True:
            try:
                listings = (
                    [await self.custom.list_cluster_custom_object(GROUP, VERSION, kind.plural)]
                    if not self.namespaces
                    else [
                        await self.custom.list_namespaced_custom_object(
                            GROUP, VERSION, namespace, kind.plural
                        )
                        for namespace in self.namespaces
                    ]
                )
                return [
                    item
                    for listing in cast(list[dict[str, Any]], listings)
                    for item in listing.get("items", [])
                ]
            except client.ApiException as error:
                if error.status not in (429, 500, 503) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)
