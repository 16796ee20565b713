"""The app-build hand-off: what the app generator is told about each linked connection.

Per alias: the connection's name, origin, allowed methods and paths, the headers it sends and the
content types it allows (not secret: the app need not send those headers, and must expect those
types), instructions and saved samples (the "technical spec"), and the image policy: the origins
of linked connections that allow public images, as a Content-Security-Policy ``img-src`` value.
Nothing here is secret, but a connection's details are its admins' to show: of a connection the
caller may not see, only what the app itself says (its alias and the connection's name) and the
fetch path, and it adds nothing to the image policy.
"""

from __future__ import annotations

from collections.abc import Mapping

from gatehouse_operator.api.stored import StoredApp, StoredConnection, StoredConnectionSpec
from gatehouse_operator.connections.models import (
    BuildSpec,
    ConnectionHeader,
    HiddenLink,
    ImagePolicy,
    LinkedConnectionSpec,
    Sample,
)

# The same words for every hidden link, whether its connection exists or not.
HIDDEN = (
    "you may not see this connection, so its origin, methods, paths, headers, content types, "
    "instructions and samples are left out (and it adds nothing to imagePolicy): they are shown "
    "to those who may update it, or link it when its linkPolicy is Builders; build with such an "
    "account to hand them on"
)


def samples_from(specs: Mapping[str, Mapping[str, object]]) -> list[Sample]:
    """Samples from the connection's ConnectionSamples (name to spec), oldest first."""
    found = [
        Sample.model_validate(
            {**{key: value for key, value in spec.items() if key != "connection"}, "id": name}
        )
        for name, spec in specs.items()
    ]
    return sorted(found, key=lambda sample: (sample.saved_at, sample.id))


def headers_of(spec: StoredConnectionSpec) -> list[ConnectionHeader]:
    """The headers the connection sends on every request (names and values are not secret)."""
    return [ConnectionHeader(name=header.name, value=header.value) for header in spec.headers]


def img_src(origins: list[str]) -> str:
    return " ".join(["'self'", *sorted(set(origins))])


def build_spec(
    kind: str,
    app: StoredApp,
    connections: Mapping[str, StoredConnection | None],
    samples: Mapping[str, list[Sample]],
) -> BuildSpec:
    """``connections`` holds, by name, the linked connections the caller may see (None for one
    that does not exist, which is skipped); a link to any other is a HiddenLink. ``samples`` are
    keyed by connection name."""
    linked: list[LinkedConnectionSpec | HiddenLink] = []
    public_images = []
    for link in app.spec.connections:
        alias, name = link.alias, link.connection
        fetch_path = f"/v1/fetch/{alias}/"
        if name not in connections:
            linked.append(
                HiddenLink(alias=alias, connection=name, fetch_path=fetch_path, reason=HIDDEN)
            )
            continue
        connection = connections[name]
        if connection is None:
            continue
        spec = connection.spec
        origin = connection.origin
        linked.append(
            LinkedConnectionSpec.model_validate(
                {
                    "alias": alias,
                    "connection": name,
                    "display_name": spec.display_name,
                    "origin": origin,
                    "allowed_methods": spec.allowed_methods,
                    "allowed_paths": spec.allowed_paths,
                    "instructions": spec.instructions,
                    "samples": samples.get(name, []),
                    "headers": headers_of(spec),
                    "allowed_content_types": spec.allowed_content_types,
                    "fetch_path": fetch_path,
                }
            )
        )
        if spec.allow_public_images:
            public_images.append(origin)
    return BuildSpec(
        kind="ChartType" if kind == "ChartType" else "DataApp",
        name=app.name,
        connections=linked,
        image_policy=ImagePolicy(
            origins=sorted(set(public_images)), img_src=img_src(public_images)
        ),
    )
