"""Which answers a connection lets through by their media type (``spec.allowedContentTypes``).

An API that suddenly answers HTML (a login page, a captive portal, an error page from a CDN) or a
binary gives app code something it did not ask for; with an allow-list the proxy refuses it (502
``content_type_not_allowed``) and a connection test shows the type it got. The type checked is the
one a browser reads (:mod:`gatehouse_proxy.http.media_types`: the last of several, a comma's too,
and none where none parses), the one the app is given, compared on its essence (``type/subtype``,
parameters and case aside); ``type/*`` allows every subtype. An answer with no type a browser can
read is refused. Answers without a body (HEAD, 204, 304) and redirects (refused, or shown by a
test) carry none to check.
"""

from __future__ import annotations

from gatehouse_contract.redaction import Redactor
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.http.media_types import MediaType
from gatehouse_proxy.upstream.forwarder import Upstream, is_redirect

_BODILESS = frozenset({204, 304})


def allowed(media_type: MediaType | None, allowed_types: tuple[str, ...]) -> bool:
    if media_type is None:
        return False
    essence = media_type.essence
    return any(entry in (essence, f"{media_type.type}/*") for entry in allowed_types)


def check_content_type(
    upstream: Upstream, method: str, allowed_types: tuple[str, ...], secrets: tuple[str, ...]
) -> None:
    """Refuses an answer whose type is not allowed; the message names its type with ``secrets``
    (the injected values) redacted: the type is the upstream's text."""
    if not allowed_types or method == "HEAD":
        return
    if upstream.status in _BODILESS or is_redirect(upstream.status):
        return
    media_type = upstream.media_type
    if allowed(media_type, allowed_types):
        return
    upstream.release()
    allowing = ", ".join(allowed_types)
    if media_type is None:
        said = (
            "a Content-Type no browser can read"
            if "content-type" in upstream.response.headers
            else "no Content-Type"
        )
        raise ProxyError(
            "content_type_not_allowed",
            f"the upstream answered with {said}, which the connection does not allow ({allowing})",
        )
    shown = media_type.essence[:100]
    if secrets:
        shown = Redactor(secrets).headers([shown])[0]
    raise ProxyError(
        "content_type_not_allowed",
        f"the upstream answered with Content-Type {shown!r}, which the connection does not "
        f"allow ({allowing})",
    )
