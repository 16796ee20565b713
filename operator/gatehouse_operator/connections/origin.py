"""The canonical origin of a connection's baseURL: what the proxy pins requests to.

The CRD's rules already refuse paths, queries, fragments and credentials; this adds what CEL
cannot check well: host syntax, internationalised names (to punycode), trailing dots, numeric host
forms that resolvers read as IP addresses (``2130706433``, ``0x7f.1``, and the same written with
fullwidth digits or ideographic full stops, which IDNA maps to ASCII), port 0, and the
installation's scheme rule.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import BaseModel

from gatehouse_operator.api.auth_kinds import kind_of, token_endpoint_of
from gatehouse_operator.api.connection import Auth
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.sealed_values import Scope

_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*$")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


class OriginError(GatehouseError, ValueError):
    """baseURL is not a usable origin; the message says which rule it breaks."""


def normalise_origin(base_url: str, *, allow_http: bool, name: str = "baseURL") -> str:
    """``base_url``'s canonical origin; ``name`` is the field messages name (tokenURL's
    origin is read by the same rules)."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise OriginError(f"{name} must use https")
    if scheme == "http" and not allow_http:
        raise OriginError(f"{name} uses http, which this installation does not allow")
    if parts.username is not None or parts.password is not None:
        raise OriginError(f"{name} must not contain credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise OriginError(f"{name} must be an origin: no path, query or fragment")
    try:
        port = parts.port
    except ValueError:
        raise OriginError(f"{name} has an invalid port") from None
    if port == 0:
        raise OriginError(f"{name} has port 0, which no upstream listens on")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise OriginError(f"{name} must include a host")
    host = _canonical_host(host, name)
    shown = f"[{host}]" if ":" in host else host
    suffix = f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else ""
    return f"{scheme}://{shown}{suffix}"


def sealed_scope(namespace: str, name: str, origin: str, auth: Auth, token_url: str) -> Scope:
    """What the connection's sealed value must be sealed for (origin and token URL normalised):
    where its secret goes, and for a kind that sends it to an endpoint of its own, that endpoint
    and its client."""
    endpoint = token_endpoint_of(auth)
    if endpoint is None:
        return Scope(namespace, name, origin)
    return Scope(namespace, name, origin, token_url, endpoint.client_id)


def token_url_of(auth: Auth, *, allow_http: bool) -> str:
    """The normalised tokenURL of a kind that sends its secret to an endpoint of its own (OAuth
    2.0 client credentials, authorization code); empty for other auth types. The section's other
    endpoints (an authorization URL) are held to the same rules: raises OriginError naming the
    first that breaks one."""
    endpoint = token_endpoint_of(auth)
    if endpoint is None:
        return ""
    section = endpoint.model_dump(by_alias=True) if isinstance(endpoint, BaseModel) else {}
    for name in kind_of(auth).endpoints:
        if section.get(name):
            normalise_token_url(str(section[name]), allow_http=allow_http, name=name)
    return normalise_token_url(endpoint.token_url, allow_http=allow_http)


def normalise_token_url(token_url: str, *, allow_http: bool, name: str = "tokenURL") -> str:
    """An OAuth 2.0 token endpoint as the proxies will call it: the origin's rules (scheme,
    host, port), and a path, percent-encoded as written; no credentials, query or fragment.
    ``name``: the field messages name (an authorization URL is read by the same rules)."""
    parts = urlsplit(token_url.strip())
    if parts.query or parts.fragment:
        raise OriginError(f"{name} must not have a query or fragment")
    if any(char.isspace() or ord(char) < 0x20 for char in parts.path):
        raise OriginError(f"{name} has whitespace or control characters in its path")
    origin = normalise_origin(f"{parts.scheme}://{parts.netloc}", allow_http=allow_http, name=name)
    return origin + (parts.path or "/")


def _canonical_host(host: str, name: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    # Checked after IDNA's mapping, which turns fullwidth "127.0.0.1" into ASCII.
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise OriginError(f"{name} host {host!r} is not a valid host name") from None
    if _NUMERIC_HOST.match(ascii_host):
        raise OriginError(
            f"{name} host {host!r} looks like a numeric address in a non-standard form; "
            "write the IP address in ASCII dotted-decimal form or use a host name"
        )
    if not all(_LABEL.match(label) for label in ascii_host.split(".")):
        raise OriginError(f"{name} host {host!r} is not a valid host name")
    return ascii_host
