"""kopf handlers, one module per resource; importing this package registers them all."""

from gatehouse_operator.controllers import external_connections, lifecycle, linked_apps, secrets

__all__ = ["external_connections", "lifecycle", "linked_apps", "secrets"]
