"""kopf handlers, one module per resource; importing this package registers them all."""

from gatehouse_operator.controllers import (
    admission,
    admission_server,
    connection_tests,
    external_connections,
    lifecycle,
    linked_apps,
    project_configs,
    secrets,
)

__all__ = [
    "admission",
    "admission_server",
    "connection_tests",
    "external_connections",
    "lifecycle",
    "linked_apps",
    "project_configs",
    "secrets",
]
