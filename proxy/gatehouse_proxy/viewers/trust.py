"""Whom the installation trusts to name viewers: the issuers of viewer assertions (Helm values
``viewers.issuers``), and how long an assertion may live.

The chart hands the list to the proxy as JSON (``GATEHOUSE_VIEWER_ISSUERS``): each issuer with
its ``iss``, the audience its assertions must name, and its keys, from a JWKS URL (``jwksURL``)
or a mounted Secret's file (``keysFile``, a JWKS document). A list that breaks a rule stops the
proxy at start with a message naming the entry and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

MAX_ISSUERS = 16
# The longest an assertion may live (exp - iat), and be valid for from now, by default.
MAX_ASSERTION_SECONDS = 300.0
# What the clocks of the issuer and the proxy may differ by.
LEEWAY_SECONDS = 30.0


class TrustedIssuer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    issuer: str = Field(min_length=1, max_length=2048)
    audience: str = Field(min_length=1, max_length=2048)
    jwks_url: str = Field(
        default="", alias="jwksURL", max_length=2048, pattern=r"^(https?://[^\s#]+)?$"
    )
    keys_file: Path | None = Field(default=None, alias="keysFile")

    @model_validator(mode="after")
    def _one_source(self) -> TrustedIssuer:
        if bool(self.jwks_url) == (self.keys_file is not None):
            raise ValueError("exactly one of jwksURL and keysFile (keysSecret) is required")
        return self


_ISSUERS = TypeAdapter(list[TrustedIssuer])


@dataclass(frozen=True)
class ViewerSettings:
    issuers: tuple[TrustedIssuer, ...] = ()
    max_assertion_seconds: float = MAX_ASSERTION_SECONDS
    # Whether the inspector and the audit line show the viewer's id (never a metric).
    record_ids: bool = True


def issuers_from_json(raw: str, *, allow_http: bool) -> tuple[TrustedIssuer, ...]:
    """The issuers a ``GATEHOUSE_VIEWER_ISSUERS`` value lists ("" lists none)."""
    if not raw.strip():
        return ()
    try:
        issuers = _ISSUERS.validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"GATEHOUSE_VIEWER_ISSUERS[{where}]: {first['msg']}") from None
    if len(issuers) > MAX_ISSUERS:
        raise ValueError(f"GATEHOUSE_VIEWER_ISSUERS lists more than {MAX_ISSUERS} issuers")
    if len({issuer.issuer for issuer in issuers}) != len(issuers):
        raise ValueError("GATEHOUSE_VIEWER_ISSUERS lists an issuer twice")
    for index, issuer in enumerate(issuers):
        if issuer.jwks_url.startswith("http://") and not allow_http:
            raise ValueError(
                f"GATEHOUSE_VIEWER_ISSUERS[{index}].jwksURL must be an https URL (http only "
                "where the installation allows http upstreams)"
            )
    return tuple(issuers)
