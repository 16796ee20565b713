"""kopf handlers, one module per resource; importing this package registers them all."""

from gatehouse_operator.controllers import (
    admission,
    connection_tests,
    external_connections,
    linked_apps,
    project_configs,
    secrets,
    sign_in_requests,
)

__all__ = [
    "admission",
    "connection_tests",
    "external_connections",
    "linked_apps",
    "project_configs",
    "secrets",
    "sign_in_requests",
]
