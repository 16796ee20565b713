"""Who is asking, as the proxy tells a vendor when a connection forwards the viewer's identity:
the reserved ``X-Gatehouse-*`` headers (``gatehouse_contract.header_names``), which no app may
send and no connection may set.

The app's id is its key, ``namespace/Kind/name``: what the admins see on its page and what the
assertion's app claim names (its uid would change when the app is made again). The project is
the namespace.
"""

from __future__ import annotations

from gatehouse_contract.header_names import (
    APP_ID_HEADER,
    PROJECT_ID_HEADER,
    VIEWER_EMAIL_HEADER,
    VIEWER_ID_HEADER,
)
from gatehouse_contract.routes import namespace_of
from gatehouse_proxy.viewers.assertions import Viewer


def identity_headers(app: str, viewer: Viewer) -> list[tuple[str, str]]:
    """The headers for ``viewer`` of the app whose key is ``app``; the e-mail only when the
    assertion gave one."""
    headers = [
        (APP_ID_HEADER, app),
        (VIEWER_ID_HEADER, viewer.id),
        (PROJECT_ID_HEADER, namespace_of(app)),
    ]
    if viewer.email:
        headers.append((VIEWER_EMAIL_HEADER, viewer.email))
    return headers
