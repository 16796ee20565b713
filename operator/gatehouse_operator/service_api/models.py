"""The service API's request and response bodies; the OpenAPI document is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from gatehouse_operator.api.meta import Model
from gatehouse_operator.project_config.schema import StrictModel

# A request body: a ConnectionTest's spec must fit one Kubernetes object (etcd stores at most
# 1.5 MiB), so a test body over 1 MiB could never run; a draft adds a spec (instructions up to
# 10,000 characters) and a secret (up to 64 KiB) to it. Read only after the caller was found
# allowed, and refused from Content-Length before any of it is read.
MAX_BODY_BYTES = 1024 * 1024 + 128 * 1024
# A body trickled in holds a connection: at most this long.
BODY_SECONDS = 30.0


class ErrorDetail(Model):
    code: str = Field(description="Stable and machine-readable, e.g. forbidden.")
    message: str = Field(description="For people: names the field and the rule where there is one.")


class ErrorBody(Model):
    error: ErrorDetail


class DefaultsUpdate(StrictModel):
    """The defaults the API may change, with the file's own key names. Keys not given stay."""

    column_totals: bool | None = None
    pre_aggregate_execution_fallback: bool | None = None


class DefaultsResult(StrictModel):
    status: Literal["ok"] = "ok"
    results: dict[str, JsonValue] = Field(
        description="The project's defaults as now stored, booleans with their effective value."
    )


class ConnectLink(Model):
    connect_url: str = Field(
        description="The page's connect link for the connection's shared account: open it, sign "
        "in at the provider as the account every viewer will use, and consent. Single-use."
    )
    expires_in_seconds: int = Field(description="How long the link waits for its click.")


class Revoked(Model):
    revoked: int = Field(
        description="How many connected accounts were dropped (and revoked "
        "at the provider, where the connection names a revocation URL)."
    )
