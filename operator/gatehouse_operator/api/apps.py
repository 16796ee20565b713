"""DataApp and ChartType: the apps that link connections under an alias and fetch through the proxy.

Both kinds have the same shape; the operator issues each a proxy credential in a Secret it owns.
"""

from __future__ import annotations

from pydantic import Field

from gatehouse_operator.api.meta import (
    DNS_SUBDOMAIN,
    Kind,
    Model,
    PrinterColumn,
    Status,
    ready_columns,
)


class Link(Model):
    alias: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9_-]+$",
        description="The name app code uses for the connection; unique within the app.",
    )
    connection: str = Field(
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="An ExternalConnection in the same namespace.",
    )


class LinkedAppSpec(Model):
    """The app's name for people and the connections it links."""

    display_name: str = Field(
        default="", max_length=128, description="The human-readable name of the app."
    )
    connections: list[Link] = Field(
        default_factory=list,
        max_length=64,
        description="The connections this app may call, each under its alias.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["alias"],
        },
    )


class LinkStatus(Model):
    alias: str = Field(max_length=64, description="The alias, as in spec.connections.")
    connection: str = Field(max_length=253, description="The ExternalConnection it names.")
    ready: bool = Field(description="Whether the proxy routes this alias now.")
    reason: str = Field(
        default="", max_length=1024, description="Why the alias is not routed, when it is not."
    )


class LinkedAppStatus(Status):
    """What the operator observed of the app: its credential and each link's state."""

    credential_secret: str = Field(
        default="",
        max_length=253,
        description="The Secret (owned by this resource) holding the app's proxy credential.",
    )
    links: list[LinkStatus] = Field(
        default_factory=list,
        max_length=64,
        description="Each linked alias and whether the proxy routes it.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["alias"],
        },
    )


def _app_kind(kind: str, plural: str, what: str, short_names: tuple[str, ...]) -> Kind:
    return Kind(
        kind=kind,
        plural=plural,
        description=f"{what} that calls external connections through the Gatehouse proxy, "
        "each under an alias.",
        spec=LinkedAppSpec,
        status=LinkedAppStatus,
        short_names=short_names,
        columns=[
            PrinterColumn("Credential", ".status.credentialSecret", priority=1),
            *ready_columns(),
        ],
    )


DATA_APP = _app_kind("DataApp", "dataapps", "A data app", ("dapp",))
CHART_TYPE = _app_kind("ChartType", "charttypes", "A custom chart type", ("ctype",))
