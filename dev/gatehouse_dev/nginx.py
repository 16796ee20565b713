"""nginx for ``make bench``: the upstream every target calls, and the reference proxy.

Both run one worker, as the proxy runs one process: the upstream answers a small JSON body from
memory (so it is never what limits a target), and the reference proxy is the least a proxy in C
does for the same fetch: ``proxy_pass`` over kept-alive connections with a header added.
"""

from __future__ import annotations

import shutil
from pathlib import Path

# The answer every target relays: a small JSON body, as a typical API's.
BODY = '{"id":42,"name":"bench","tags":["a","b","c"],"next":null}'
HEADER = ("X-Api-Key", "bench-key")


def binary() -> str | None:
    """nginx, also where Debian puts it outside a non-root PATH."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def _config(folder: Path, server: str, http: str = "") -> str:
    temp = "\n".join(
        f"  {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""worker_processes 1;
daemon off;
pid {folder / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
{temp}
{http}
  server {{
{server}
  }}
}}
"""


def upstream_config(folder: Path, port: int, body: str = BODY) -> str:
    """The upstream, answering ``body`` (JSON without a quote or a ``$``) to every request."""
    return _config(
        folder,
        f"""    listen 127.0.0.1:{port};
    default_type application/json;
    location / {{ return 200 '{body}'; }}""",
    )


def tls_upstream_config(
    folder: Path,
    port: int,
    *,
    tls_port: int,
    certificate: Path,
    key: Path,
    client_ca: Path | None = None,
) -> str:
    """The upstream over TLS on ``tls_port`` (its certificate and key), requiring a client
    certificate ``client_ca`` signed where given; plain HTTP on ``port`` too, for its readiness."""
    verify = f"ssl_verify_client on;\n    ssl_client_certificate {client_ca};" if client_ca else ""
    return _config(
        folder,
        f"""    listen 127.0.0.1:{port};
    listen 127.0.0.1:{tls_port} ssl;
    ssl_certificate {certificate};
    ssl_certificate_key {key};
    {verify}
    default_type application/json;
    location / {{ return 200 '{BODY}'; }}""",
    )


def proxy_config(folder: Path, port: int, upstream_port: int) -> str:
    name, value = HEADER
    return _config(
        folder,
        f"""    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header {name} {value};
    }}""",
        http=f"  upstream upstream {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}",
    )


def argv(nginx: str, folder: Path, config: str) -> list[str]:
    """The command line that runs ``config`` in the foreground, its files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nginx.conf"
    path.write_text(config)
    return [nginx, "-p", str(folder), "-c", str(path)]
