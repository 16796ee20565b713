"""The two shapes every message between the programs takes.

Routes are compared and hashed, so they are frozen; messages on the channel also travel in
camelCase, as the Kubernetes objects they come from are written.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Frozen(BaseModel):
    """An immutable value that refuses fields it does not know."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Wire(BaseModel):
    """A channel message: immutable, strict about fields, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )
