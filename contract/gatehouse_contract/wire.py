"""The two shapes every message between the programs takes, and the bounds of the numbers in them.

Routes are compared and hashed, so they are frozen; messages on the channel also travel in
camelCase, as the Kubernetes objects they come from are written.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
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


# Bounds of the numbers a replica reports, which carry what vendors and tenants did (statuses,
# sizes, counts, times): a frame with one out of range is refused where it is read, so that no
# handler meets a number it cannot do arithmetic, dates or JSON with.
MAX_COUNT = 2**53 - 1  # the largest integer every JSON reader holds exactly
# The last second a datetime can hold (9999-12-31T23:59:59Z), as seconds since the epoch.
MAX_INSTANT = 253_402_300_799.0
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Instant = Annotated[float, Field(ge=0, le=MAX_INSTANT, allow_inf_nan=False)]
HttpStatus = Annotated[int, Field(ge=0, le=999)]  # three digits, as HTTP/1.1 writes it
