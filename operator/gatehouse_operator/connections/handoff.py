"""The app-build hand-off: what the app generator is told about each linked connection.

Per alias: the connection's name, origin, allowed methods and paths, instructions and saved
samples (the "technical spec"), and the image policy: the origins of linked connections that allow
public images, as a Content-Security-Policy ``img-src`` value. Nothing here is secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatehouse_operator.connections.models import (
    BuildSpec,
    ImagePolicy,
    LinkedConnectionSpec,
    Sample,
)


def samples_from(specs: Mapping[str, Mapping[str, Any]]) -> list[Sample]:
    """Samples from the connection's ConnectionSamples (name to spec), oldest first."""
    found = [
        Sample(id=name, **{key: value for key, value in spec.items() if key != "connection"})
        for name, spec in specs.items()
    ]
    return sorted(found, key=lambda sample: (sample.saved_at, sample.id))


def img_src(origins: list[str]) -> str:
    return " ".join(["'self'", *sorted(set(origins))])


def build_spec(
    kind: str,
    app: Mapping[str, Any],
    connections: Mapping[str, Mapping[str, Any]],
    samples: Mapping[str, list[Sample]],
) -> BuildSpec:
    """``connections`` and ``samples`` are keyed by connection name; missing ones are skipped."""
    linked = []
    public_images = []
    for link in app.get("spec", {}).get("connections") or []:
        connection = connections.get(link["connection"])
        if connection is None:
            continue
        spec = connection.get("spec", {})
        origin = connection.get("status", {}).get("origin") or spec.get("baseURL", "")
        linked.append(
            LinkedConnectionSpec(
                alias=link["alias"],
                connection=link["connection"],
                display_name=spec.get("displayName", ""),
                origin=origin,
                allowed_methods=spec.get("allowedMethods") or ["GET"],
                allowed_paths=spec.get("allowedPaths") or [],
                instructions=spec.get("instructions", ""),
                samples=samples.get(link["connection"], []),
                fetch_path=f"/v1/fetch/{link['alias']}/",
            )
        )
        if spec.get("allowPublicImages"):
            public_images.append(origin)
    return BuildSpec(
        kind="ChartType" if kind == "ChartType" else "DataApp",
        name=app["metadata"]["name"],
        connections=linked,
        image_policy=ImagePolicy(
            origins=sorted(set(public_images)), img_src=img_src(public_images)
        ),
    )
