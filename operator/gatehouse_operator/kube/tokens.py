"""Apps' proxy credentials: the Secret the operator makes for each DataApp or ChartType, and
whose it is."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any, Literal

from kubernetes.aio import client

from gatehouse_operator.api.meta import GROUP
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.kube.calls import KubeCalls, owner_reference
from gatehouse_operator.kube.errors import Conflict, NotFound
from gatehouse_operator.kube.secrets import WATCHED_LABEL, Secrets, decoded, watched

CREDENTIAL_LABEL = "gatehouse.dev/credential-for"
TOKEN_KEY = "token"  # noqa: S105 (the key name within the Secret)


# How often an app whose credential Secret's name is taken tries again.
SECRET_TAKEN_RETRY_SECONDS = 30


class SecretTaken(GatehouseError):
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


class AppTokens:
    """The credential Secrets the operator makes for apps: issued, and deleted with the app."""

    def __init__(self, calls: KubeCalls, secrets: Secrets) -> None:
        self.core, self.secrets = calls.core, secrets

    async def app_token(self, namespace: str, secret_name: str, owner: dict[str, Any]) -> str:
        """The app's proxy credential from the Secret the operator made for it, created if
        missing. A Secret of that name that is not the app's is left as it is: raises
        SecretTaken (whoever may create apps must not take over, or overwrite, a Secret)."""
        found = await self.secrets.secret(namespace, secret_name)
        labels = {CREDENTIAL_LABEL: f"{owner['kind']}.{owner['name']}", WATCHED_LABEL: "true"}
        token = secrets.token_urlsafe(32)
        metadata = client.V1ObjectMeta(
            name=secret_name, labels=labels, owner_references=[owner_reference(owner)]
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
        existing = decoded(found.data)
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
        found = await self.secrets.secret(namespace, secret_name)
        if found is None or found.metadata is None or credential_owner(found, owner) != "this app":
            return
        # Only that very Secret: one made again meanwhile under the name is left alone.
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=found.metadata.uid)
        )
        with contextlib.suppress(NotFound, Conflict):
            await self.core.delete_namespaced_secret(secret_name, namespace, body=options)
