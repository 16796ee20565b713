"""Which answers a connection lets through by their media type (``spec.allowedContentTypes``).

An API that suddenly answers HTML (a login page, a captive portal, an error page from a CDN) or a
binary gives app code something it did not ask for; with an allow-list the proxy refuses it (502
``content_type_not_allowed``) and a connection test shows the type it got. Compared on the media
type's essence (``type/subtype``, parameters and case aside); ``type/*`` allows every subtype.
Answers without a body (HEAD, 204, 304) and redirects (refused, or shown by a test) carry none to
check.
"""

from __future__ import annotations

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.forwarder import Upstream, is_redirect

_BODILESS = frozenset({204, 304})


def essence(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


def allowed(content_type: str, allowed_types: tuple[str, ...]) -> bool:
    media = essence(content_type)
    if "/" not in media:
        return False
    kind = media.partition("/")[0]
    return any(entry == media or entry == f"{kind}/*" for entry in allowed_types)


def check_content_type(upstream: Upstream, method: str, allowed_types: tuple[str, ...]) -> None:
    if not allowed_types or method == "HEAD":
        return
    if upstream.status in _BODILESS or is_redirect(upstream.status):
        return
    got = upstream.response.headers.get("content-type", "")
    if allowed(got, allowed_types):
        return
    upstream.release()
    shown = essence(got)[:100] or "none"
    raise ProxyError(
        "content_type_not_allowed",
        f"the upstream answered with Content-Type {shown!r}, which the connection does not "
        f"allow ({', '.join(allowed_types)})",
    )
