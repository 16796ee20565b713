"""The Kubernetes API as the signed-in user: the page's changes are theirs, not the operator's.

A client with the operator's API server address and CA, and only the user's bearer token (never
the operator's certificate or token), so RBAC and the admission webhooks see the user. A user
signed in with a one-time code (``gatehouse open``) has no token the page holds: the operator's
own client then impersonates them (``Impersonate-User``, ``-Group``, ``-Uid``, ``-Extra-*``), and
the API server decides each call as that user. Its calls raise ``kube.errors``' typed errors, as
the operator's own do.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

from kubernetes.aio import client
from multidict import CIMultiDict
from pydantic import Field, JsonValue

from gatehouse_operator.access.reviews import User
from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.api.stored import Stored
from gatehouse_operator.kube.errors import ApiError, translate

# The operator's own client: a user's borrows its API server's address and CA.
OperatorClient = client.ApiClient

# A dry run goes through authentication, RBAC, the schema's rules and the admission webhooks,
# and stores nothing.
DRY_RUN = "All"


def _dry_run(wanted: bool) -> str | None:
    return DRY_RUN if wanted else None


class ObjectMeta(Stored):
    """What the changes made as the user read of an object's metadata. The fields not named
    here are kept as read (``extra``), so that a replace sends back all it read."""

    model_config = Stored.model_config | {"extra": "allow"}

    name: str
    uid: str = ""
    resource_version: str = ""


class UserObject(Stored):
    """One of Gatehouse's resources, as the API server answered the user: of any kind, so its
    spec stays the JSON it is (the use cases parse it into their kind's model). Whole: the
    fields not named here are kept (``extra``), so that ``manifest`` is what was read."""

    model_config = Stored.model_config | {"extra": "allow"}

    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, JsonValue] = Field(default_factory=dict)

    def manifest(self) -> dict[str, JsonValue]:
        """The object as read (with any change made to the copy), to send back."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class AsUser:
    def __init__(self, api: client.ApiClient) -> None:
        self.custom = translate(client.CustomObjectsApi(api))
        self.core = translate(client.CoreV1Api(api))

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> UserObject:
        found = await self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, kind.plural, name
        )
        return UserObject.model_validate(found)

    async def create_custom(
        self, kind: Kind, namespace: str, body: dict[str, JsonValue], *, dry_run: bool = False
    ) -> UserObject:
        """The object as stored (or, in a dry run, as it would be), defaults filled in."""
        created = await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, kind.plural, body, dry_run=_dry_run(dry_run)
        )
        return UserObject.model_validate(created)

    async def replace_custom(
        self, kind: Kind, namespace: str, body: dict[str, JsonValue], *, dry_run: bool = False
    ) -> UserObject:
        """Replaces with the read resourceVersion: a change made meanwhile is a 409, not lost."""
        replaced = await self.custom.replace_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            kind.plural,
            ObjectMeta.model_validate(body["metadata"]).name,
            body,
            dry_run=_dry_run(dry_run),
        )
        return UserObject.model_validate(replaced)

    async def delete_custom(self, kind: Kind, namespace: str, name: str, uid: str) -> None:
        """Deletes the object that was read (its uid), not one made since under its name."""
        await self.custom.delete_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            kind.plural,
            name,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
        )

    async def create_secret(
        self, namespace: str, name: str, labels: dict[str, str], data: dict[str, bytes | str]
    ) -> None:
        """An Opaque Secret of ``data`` (values base64-encoded)."""
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, labels=labels), type="Opaque", data=data
        )
        await self.core.create_namespaced_secret(namespace, body)

    async def own_secret(self, namespace: str, name: str, owner: UserObject) -> None:
        """Makes ``owner`` the Secret's owner, so the cluster deletes the Secret with it."""
        reference = client.V1OwnerReference(
            api_version=owner.api_version,
            kind=owner.kind,
            name=owner.metadata.name,
            uid=owner.metadata.uid,
        )
        patch = client.V1Secret(metadata=client.V1ObjectMeta(owner_references=[reference]))
        await self.core.patch_namespaced_secret(name, namespace, patch)

    async def delete_secret(self, namespace: str, secret: client.V1Secret) -> None:
        """Deletes the Secret that was read (its uid), not one made since under its name."""
        meta = secret.metadata or client.V1ObjectMeta()
        await self.core.delete_namespaced_secret(
            str(meta.name),
            namespace,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=meta.uid)),
        )


# The most of the API server's words shown for one refusal, or for one field's cause of it.
MAX_REFUSAL_CHARS = 1024
SHORTENED = " … (shortened)"


def bounded(text: str, most: int = MAX_REFUSAL_CHARS) -> str:
    """``text``, or as much of it as fits in ``most`` characters ending at a word, saying that it
    was shortened (cut inside a word only when it has no space to end at)."""
    if len(text) <= most:
        return text
    room = most - len(SHORTENED)
    kept = text[:room]
    if not text[room].isspace() and any(char.isspace() for char in kept):
        kept = kept.rsplit(None, 1)[0]
    return kept.rstrip() + SHORTENED


def refusal(error: ApiError) -> str:
    """The API server's words for a refused change: each field cause as its field's path and
    message (a schema's rules), else its whole message (a webhook's reason, which names no
    field); bounded at a word. Only for the caller's own requests, whose content it may quote."""
    causes = error.causes
    if causes:
        return bounded("; ".join(f"{c.field}: {c.rule}" if c.field else c.rule for c in causes))
    try:
        return bounded(str(json.loads(error.body or "").get("message", "")))
    except (ValueError, TypeError, AttributeError):
        return f"the API server refused the request ({error.status})"


def impersonation(user: User) -> CIMultiDict[str]:
    """The headers that make the operator's request the user's (one per group and value)."""
    headers: CIMultiDict[str] = CIMultiDict([("Impersonate-User", user.name)])
    for group in user.groups:
        headers.add("Impersonate-Group", group)
    if user.uid:
        headers.add("Impersonate-Uid", user.uid)
    for key, values in user.extra.items():
        for value in values:
            # Header names are case-insensitive: the API server wants the key percent-encoded.
            headers.add(f"Impersonate-Extra-{quote(key, safe='')}", value)
    return headers


def _configuration(
    own: client.Configuration, token: str, user: User | None
) -> client.Configuration:
    if user is not None:
        # The operator's own credentials, every request sent as the user. The session's
        # default headers carry them: the client's own keep one value per name.
        impersonating = copy.deepcopy(own)
        impersonating.client_session_kwargs = {"headers": impersonation(user)}
        return impersonating
    configuration = client.Configuration(host=own.host)
    configuration.ssl_ca_cert = own.ssl_ca_cert
    configuration.verify_ssl = own.verify_ssl
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return configuration


@asynccontextmanager
async def as_user(
    operator: OperatorClient, token: str, impersonated: User | None = None
) -> AsyncIterator[AsUser]:
    """The API as the user of ``token``, or, given ``impersonated``, as that user."""
    api = client.ApiClient(_configuration(operator.configuration, token, impersonated))
    try:
        yield AsUser(api)
    finally:
        await api.close()  # type: ignore[no-untyped-call]
