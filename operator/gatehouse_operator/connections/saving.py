"""Saving a connection from the page, as the visitor: checked with a dry run before anything is
written, a newly entered credential written to a Secret of the connection's own (and removed again
when the save fails), the connection applied, its sample asked for, and a Secret the page made for
it and no longer used deleted.

The page parses its form into a ``Save``; every write here is made as the visitor (``AsUser``), so
RBAC, the schema's rules and the admission webhook decide it. Reads with the operator's rights
(``Kube``) only look at what the visitor's own writes made, and never answer the visitor with what
they found: an answer would tell someone who may not get Secrets which exist.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from secrets import token_hex

from gatehouse_operator.access.as_user import AsUser, UserObject, refusal
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_document import ConnectionSpecDocument, SecretRefDocument
from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.stored import StoredConnection
from gatehouse_operator.connections import runs
from gatehouse_operator.connections.drafts import apply, manifest
from gatehouse_operator.connections.models import TrialRequest
from gatehouse_operator.kube import API_ERRORS, WATCHED_LABEL, Kube
from gatehouse_operator.kube.errors import ApiError, Conflict, NotFound

# The Secret the wizard writes the credential to, labelled so that deleting the connection from
# the page deletes it too (and owned by the connection, for the cluster's garbage collector).
SECRET_SUFFIX = "-credential"  # noqa: S105 (a name suffix, not a secret)
CREATED_BY_LABEL = "app.kubernetes.io/managed-by"
CREATED_BY = "gatehouse-page"
CONNECTION_LABEL = "gatehouse.dev/connection"


@dataclass(frozen=True)
class Save:
    """What the page's Save asks for, read from its form.

    ``spec`` is the connection's spec naming ``secret_ref``; when an edit enters a new
    credential, the save writes it to a new Secret and asks ``respec`` for the spec naming that
    one. ``replaced`` is the Secret the connection named before, once it no longer does."""

    namespace: str
    name: str
    spec: ConnectionSpecDocument
    resource_version: str
    editing: bool
    sealed: bool
    secret: str | None  # the entered credential; None when none was entered
    secret_ref: SecretRefDocument | None
    replaced: str | None
    missing_secret: str  # why the credential the connection needs is missing, else ""
    respec: Callable[[SecretRefDocument], ConnectionSpecDocument]
    sample: TrialRequest | str | None = None  # the sample's request, or why it was not asked
    sample_label: str = ""
    requested_by: str = ""


@dataclass
class Saved:
    """What a save did: a notice for the visitor, or the errors that stopped it: the API
    server's refusal of the connection (for the page to word by field), then the rest."""

    notice: str = ""
    errors: list[str] = field(default_factory=list)
    refused: ApiError | None = None


async def _write_secret(
    kube: AsUser, namespace: str, ref: SecretRefDocument, connection: str, value: str
) -> None:
    """The Secret a credential entered in the wizard is kept in, labelled as the wizard's and
    for the operator's watch."""
    labels = {CREATED_BY_LABEL: CREATED_BY, CONNECTION_LABEL: connection, WATCHED_LABEL: "true"}
    data: dict[str, bytes | str] = {ref["key"]: base64.b64encode(value.strip().encode()).decode()}
    await kube.create_secret(namespace, ref["name"], labels, data)


def _http(error: ApiError) -> str:
    """A refused Secret write by its status alone: the API server's words (or an admission
    policy's) could quote the Secret's data."""
    return f"HTTP {error.status} {error.reason}"


class Saving:
    """The page's writes to connections and their Secrets, as the visitor."""

    def __init__(self, stored: Kube) -> None:
        self.stored = stored  # the operator's own reads

    async def dry_run(
        self, kube: AsUser, namespace: str, name: str, spec: ConnectionSpecDocument, version: str
    ) -> None:
        wanted = manifest(name, spec, version)
        await apply(kube, namespace, wanted, replaces=bool(version), dry_run=True)

    async def save(self, kube: AsUser, save: Save) -> Saved:
        """Creates or replaces the connection, and writes a newly entered secret."""
        namespace, name, secret = save.namespace, save.name, save.secret
        spec, ref, replaced = save.spec, save.secret_ref, save.replaced
        try:
            # Checked before any Secret is read or written: a refusal changes nothing.
            await self.dry_run(kube, namespace, name, spec, save.resource_version)
        except ApiError as error:
            return Saved(refused=error)
        if save.missing_secret:
            return Saved(errors=[save.missing_secret])
        if ref is not None and secret is not None:
            if save.editing:
                # A new credential goes to a new Secret that the replace switches to, so the
                # live connection keeps its own until then, and keeps it if the edit fails.
                replaced = ref["name"]
                ref = {"name": f"{name}{SECRET_SUFFIX}-{token_hex(3)}", "key": ref["key"]}
                spec = save.respec(ref)
            try:
                await _write_secret(kube, namespace, ref, name, secret)
            except ApiError as error:
                # Only what the visitor's own create was told: a name taken is a 409 to
                # those who may create Secrets, and a 403 tells nothing of existence.
                return Saved(
                    errors=[
                        f"Secret: a Secret named {ref['name']} exists already in {namespace}; "
                        "choose another connection name"
                        if isinstance(error, Conflict)
                        else f"Secret: {ref['name']} was not written ({_http(error)})"
                    ]
                )
        wanted = manifest(name, spec, save.resource_version)
        try:
            saved = await apply(kube, namespace, wanted, replaces=save.editing)
        except API_ERRORS as error:
            errors = []
            if ref is not None and secret is not None:
                errors += await self._undo_secret(kube, namespace, name, ref)
            if not isinstance(error, ApiError):
                raise
            return Saved(errors=errors, refused=error)
        notice = f"{'Saved' if save.editing else 'Created'} connection {name}."
        if save.sample is not None:
            notice += await self._sample(kube, save)
        if ref is not None and secret is not None:
            notice += await self._own_secret(kube, namespace, ref["name"], saved)
        if replaced is not None:
            deleted = await self.delete_made_secret(kube, namespace, name, replaced)
            if not deleted and save.sealed:
                deleted = (
                    f" The connection no longer uses Secret {replaced}, which this page did "
                    "not make: delete it, or its value, if nothing else needs it."
                )
            notice += deleted
        return Saved(notice=notice)

    async def _sample(self, kube: AsUser, save: Save) -> str:
        """The draft's test, run again as the visitor on the saved connection to keep its answer
        as a sample: samples come from passing tests of saved connections only, which the
        operator alone writes."""
        if not isinstance(save.sample, TrialRequest):
            return f" Its sample was not asked for: {save.sample}"
        spec = {
            **save.sample.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "saveAsSample": {"label": save.sample_label},
        }
        test = runs.new_test(save.name, spec, requested_by=save.requested_by)
        try:
            await kube.create_custom(CONNECTION_TEST, save.namespace, test.body())
        except ApiError as error:
            return f" Its sample was not asked for: {refusal(error)}"
        name = test.metadata.name
        called = f" {save.sample_label!r}" if save.sample_label else ""
        return f" Its sample{called} is kept once test {name} passes."

    async def _undo_secret(
        self, kube: AsUser, namespace: str, connection: str, ref: SecretRefDocument
    ) -> list[str]:
        """After a save that failed: deletes the Secret it wrote, unless the connection uses it
        after all (a save whose answer was lost is not undone)."""
        stored = self.stored
        try:
            current = await stored.resources.get_custom(EXTERNAL_CONNECTION, namespace, connection)
            in_use = (
                current is not None
                and StoredConnection.of(current).spec.auth.get("secretRef") == ref
            )
            found = await stored.secrets.secret(namespace, ref["name"])
            if found is None or in_use:
                return []
            await kube.delete_secret(namespace, found)
        except API_ERRORS as error:
            why = _http(error) if isinstance(error, ApiError) else "no answer"
            return [f"Secret {ref['name']} was written and could not be removed ({why}): delete it"]
        return []

    async def _own_secret(
        self, kube: AsUser, namespace: str, secret_name: str, connection: UserObject
    ) -> str:
        """Makes the new Secret the connection's, so the cluster deletes it with the connection."""
        try:
            await kube.own_secret(namespace, secret_name, connection)
        except ApiError as error:
            return f" Its Secret {secret_name} is not owned by it ({_http(error)})."
        return ""

    async def delete_made_secret(
        self, kube: AsUser, namespace: str, connection: str, secret_name: str
    ) -> str:
        """Deletes the Secret the wizard made for this connection; any other stays."""
        found = await self.stored.secrets.secret(namespace, secret_name)
        if found is None or found.metadata is None:
            return ""
        labels = found.metadata.labels or {}
        if labels.get(CONNECTION_LABEL) != connection or labels.get(CREATED_BY_LABEL) != CREATED_BY:
            return ""
        try:
            await kube.delete_secret(namespace, found)
        except ApiError as error:
            if not isinstance(error, NotFound):  # already collected with its owner
                return f" Its Secret {secret_name} was left ({_http(error)})."
        return f" Its Secret {secret_name} was deleted too."
