"""Headers in which object stores name another object to read, held to the allowed paths.

A PUT inside ``allowedPaths`` with ``X-Amz-Copy-Source: /bucket/elsewhere`` has S3 copy in an
object from outside them, and so do their kin: Google Cloud Storage's ``x-goog-copy-source``,
Azure's ``x-ms-copy-source`` (a URL) and Data Lake's ``x-ms-rename-source``, Alibaba's
``x-oss-copy-source``, Tencent's ``x-cos-copy-source``, Huawei's ``x-obs-copy-source``, Baidu's
``x-bce-copy-source``, OpenStack Swift's ``X-Copy-From``. So on a connection with
``allowedPaths``, a header whose canonical name ends in ``copy-source``, ``rename-source`` or
``copy-from`` (``x-amz-copy-source-range`` and the ``-if-*`` conditions name no object) must
name a path the connection allows, normalised by the same rules as the request's own path
(``matcher``); otherwise the request is refused. Swift's ``X-Copy-From-Account`` (another account
altogether) is refused there too. A connection without ``allowedPaths`` allows every path, and
these headers pass as they are.

How a value is read:

- A URL (Azure's) must be on the connection's own origin; its path is checked, its query (a SAS
  token) is not a path.
- Anything else is a path on the origin, with or without its leading slash; a query
  (``?versionId=``) is cut off. Object stores read it as ``bucket/key``: on a path-style origin
  (``https://s3.amazonaws.com``, MinIO) the object is at ``/bucket/key``, which is the path read.
- On a virtual-hosted origin (``https://bucket.s3.amazonaws.com``) the bucket is in the host and
  the object at ``/key``; Tencent writes the whole host
  (``bucket-appid.cos.region.myqcloud.com/key``). So a value whose first segment is the origin's
  host or its first label is also read without that segment, and it passes if either reading is
  allowed. That is what makes copies within a virtual-hosted bucket usable with ``allowedPaths``
  at all (they name paths within the bucket). What it gives up is a limit
  docs/security/guarantees.md states: a path-style server with a bucket named as its own host's
  first label (a MinIO at ``minio.example`` with a bucket ``minio``), and, on a virtual-hosted
  origin, a bucket named as the first segment of an allowed path, are each read the other way
  round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from gatehouse_contract.header_names import canonical_name
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.matcher import allowed_by_prefixes, normalise

_SOURCES = ("copy-source", "rename-source", "copy-from")
_OTHER_ACCOUNT = "x-copy-from-account"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def check_copy_sources(
    headers: Iterable[tuple[str, str]], origin: str, allowed_paths: tuple[str, ...]
) -> None:
    """Refuses a header naming an object outside ``allowed_paths`` (or on another origin)."""
    if not allowed_paths:
        return
    for name, value in headers:
        lowered = name.lower()
        if "source" not in lowered and "from" not in lowered:
            continue  # the usual header, at the cost of two searches
        canonical = canonical_name(name)
        if canonical == _OTHER_ACCOUNT:
            raise ProxyError(
                "path_not_allowed",
                f"the {name} header names another account, outside the connection's allowed paths",
            )
        if canonical.endswith(_SOURCES):
            _check(name, value.strip(), origin, allowed_paths)


def _check(name: str, value: str, origin: str, allowed_paths: tuple[str, ...]) -> None:
    readings = _readings(name, value, origin)
    try:
        paths = [normalise(reading.encode("latin-1")) for reading in readings]
    except ProxyError as refused:
        raise ProxyError(refused.code, f"the {name} header: {refused.message}") from None
    if not any(allowed_by_prefixes(path, allowed_paths) for path in paths):
        raise ProxyError(
            "path_not_allowed",
            f"the {name} header names an object outside the connection's allowed paths",
        )


def _readings(name: str, value: str, origin: str) -> list[str]:
    """The paths on the origin that ``value`` may name."""
    if _URL.match(value):
        if _origin_of(value) != _origin_of(origin):
            raise ProxyError(
                "path_not_allowed",
                f"the {name} header names an object on another origin than the connection's",
            )
        return [urlsplit(value).path or "/"]
    path = "/" + value.partition("?")[0].removeprefix("/")
    host = (urlsplit(origin).hostname or "").lower()
    first, _, rest = path[1:].partition("/")
    if first.lower() in (host, host.split(".")[0]):
        return [path, "/" + rest]
    return [path]


def _origin_of(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # no origin at all: matches none
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)
