"""The gatehouse.dev objects the page and the service API write as the caller, as the API server
takes them: built here from their models (field names as Kubernetes spells them). What the API
server answers is read as access.as_user.UserObject."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gatehouse_operator.api.meta import API_VERSION, Kind, Model


class Metadata(Model):
    """What a write sets of an object's metadata; the rest is the API server's."""

    name: str
    namespace: str | None = None
    # An edit's: the version read, so that a change made meanwhile is a conflict, not lost.
    resource_version: str | None = None
    annotations: dict[str, str] | None = None


@dataclass(frozen=True)
class Manifest:
    """An object to create or replace. ``spec`` is a model, sent as set (fields left at their
    default stay out, for the API server to fill in), or a document as the visitor wrote it, for
    the API server to judge as it would a ``kubectl apply`` of it."""

    kind: Kind
    metadata: Metadata
    spec: BaseModel | Mapping[str, object]

    def body(self) -> dict[str, Any]:
        """The object as the Kubernetes client sends it."""
        spec = (
            self.spec.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")
            if isinstance(self.spec, BaseModel)
            else dict(self.spec)
        )
        return {
            "apiVersion": API_VERSION,
            "kind": self.kind.kind,
            "metadata": self.metadata.model_dump(by_alias=True, exclude_none=True),
            "spec": spec,
        }
