"""Installation settings of the proxy, from the environment (the Helm chart sets them).

Only the installation may loosen the network rules (http upstreams, private networks, another
token endpoint); nothing in a connection's spec can.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from gatehouse_contract.env import env_count, env_flag, env_seconds, env_share
from gatehouse_proxy.credentials.aws_roles import AwsSettings
from gatehouse_proxy.credentials.google_tokens import GOOGLE_TOKEN_URL
from gatehouse_proxy.credentials.token_grants import MAX_TOKEN_CHARS, MOST_TOKEN_CHARS
from gatehouse_proxy.limits.tenancy import TenantLimits
from gatehouse_proxy.observation.audit import AuditSettings
from gatehouse_proxy.observation.tracing import TraceSettings
from gatehouse_proxy.store.shared_store import StoreSettings
from gatehouse_proxy.store.shares import ShareSettings
from gatehouse_proxy.viewers.trust import MAX_ASSERTION_SECONDS, ViewerSettings, issuers_from_json


def _tenant_limits() -> TenantLimits:
    default = TenantLimits()
    return TenantLimits(
        concurrent_per_namespace=env_count(
            "GATEHOUSE_CONCURRENT_PER_NAMESPACE", default.concurrent_per_namespace
        ),
        concurrent_per_app=env_count("GATEHOUSE_CONCURRENT_PER_APP", default.concurrent_per_app),
        concurrent_per_connection=env_count(
            "GATEHOUSE_CONCURRENT_PER_CONNECTION", default.concurrent_per_connection
        ),
        wait_seconds=env_seconds("GATEHOUSE_CONCURRENCY_WAIT_SECONDS", default.wait_seconds),
        request_bytes_per_namespace=env_count(
            "GATEHOUSE_REQUEST_BYTES_PER_NAMESPACE", default.request_bytes_per_namespace
        ),
        request_bytes_total=env_count("GATEHOUSE_REQUEST_BYTES_TOTAL", default.request_bytes_total),
    )


def _list(name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in os.environ.get(name, "").split(",") if item.strip())


def _replica_name() -> str:
    """The name the operator knows this replica by: its Pod's, else host and process."""
    return os.environ.get("POD_NAME", "").strip() or f"{socket.gethostname()}-{os.getpid()}"


def _store() -> StoreSettings | None:
    """The shared store, when the installation has one (the chart's, or its own)."""
    url = os.environ.get("GATEHOUSE_STORE_URL", "").strip()
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://")):
        raise ValueError(
            f"GATEHOUSE_STORE_URL must be a redis:// or rediss:// URL, not {url.split(':')[0]!r}"
        )
    password = os.environ.get("GATEHOUSE_STORE_PASSWORD", "")
    password_file = os.environ.get("GATEHOUSE_STORE_PASSWORD_FILE", "")
    if password_file:
        # A mounted Secret's file: read at start, as the keyring is.
        password = Path(password_file).read_text().strip()
    ca_file = os.environ.get("GATEHOUSE_STORE_CA_FILE")
    return StoreSettings(
        url=url,
        password=password,
        ca_file=Path(ca_file) if ca_file else None,
        deadline_seconds=env_seconds(
            "GATEHOUSE_STORE_DEADLINE_SECONDS", StoreSettings.deadline_seconds
        ),
    )


def _shares() -> ShareSettings:
    default = ShareSettings()
    return ShareSettings(
        # A namespace's share must hold at least one token of the longest size, and its keys.
        namespace_bytes=env_count(
            "GATEHOUSE_STORE_NAMESPACE_BYTES", default.namespace_bytes, least=64 * 1024
        ),
        namespace_keys=env_count(
            "GATEHOUSE_STORE_NAMESPACE_KEYS", default.namespace_keys, least=16, most=1_000_000
        ),
        reserve=env_share("GATEHOUSE_STORE_RESERVE", default.reserve, MAX_STORE_RESERVE),
        cache_bytes=env_count("GATEHOUSE_STORE_CACHE_BYTES", default.cache_bytes, least=64 * 1024),
        cache_keys=env_count(
            "GATEHOUSE_STORE_CACHE_KEYS", default.cache_keys, least=16, most=1_000_000
        ),
    )


def _viewers(allow_http: bool) -> ViewerSettings:
    return ViewerSettings(
        issuers=issuers_from_json(
            os.environ.get("GATEHOUSE_VIEWER_ISSUERS", ""), allow_http=allow_http
        ),
        max_assertion_seconds=env_seconds(
            "GATEHOUSE_VIEWER_MAX_ASSERTION_SECONDS", MAX_ASSERTION_SECONDS
        ),
        # On unless set off.
        record_ids=not os.environ.get("GATEHOUSE_VIEWER_RECORD_IDS", "").strip()
        or env_flag("GATEHOUSE_VIEWER_RECORD_IDS"),
    )


def _page_url() -> str:
    url = os.environ.get("GATEHOUSE_PAGE_URL", "").strip().rstrip("/")
    if url and not url.startswith(("https://", "http://")):
        raise ValueError(f"GATEHOUSE_PAGE_URL must be an http(s):// URL, not {url!r}")
    return url


# Past this, leases would let the fleet admit noticeably less than a limit.
MAX_QUOTA_LEASE_SHARE = 0.02
# Past this, tokens would have hardly any of the store.
MAX_STORE_RESERVE = 0.9


@dataclass(frozen=True)
class ProxySettings:
    keyring_file: Path
    # The operator's table channel: always https:// (TLS with the keyring's certificates; see
    # channel_tls), so that no routing table crosses the network in the clear.
    operator_url: str
    replica: str = field(default_factory=_replica_name)
    allow_http: bool = False
    allowed_private_networks: tuple[str, ...] = ()
    google_token_url: str = GOOGLE_TOKEN_URL
    # Where AWS STS is asked for a role's keys, and the proxy's web identity (see aws_roles).
    aws: AwsSettings = field(default_factory=AwsSettings)
    upstream_ca_file: Path | None = None
    # The time a client has to send a request head, and again its body.
    request_read_timeout_seconds: float = 15.0
    tenant_limits: TenantLimits = field(default_factory=TenantLimits)
    store: StoreSettings | None = None
    # What each namespace may hold in the store (see store_shares).
    shares: ShareSettings = field(default_factory=ShareSettings)
    # The longest access token a token endpoint may grant (see token_grants).
    max_token_chars: int = MAX_TOKEN_CHARS
    # The share of a connection's tightest limit its leases may hold, fleet-wide (see quotas):
    # 0 asks the store for every request.
    quota_lease_share: float = 0.01
    # One log line per proxied request (see audit), for this share of them.
    audit: AuditSettings = field(default_factory=AuditSettings)
    # What an app's trace context may decide (when tracing is on; see tracing).
    traces: TraceSettings = field(default_factory=TraceSettings)
    # The issuers of viewer assertions the installation trusts (see viewers).
    viewers: ViewerSettings = field(default_factory=ViewerSettings)
    # The operator's page as browsers reach it (operator.page.url): where a viewer's connect
    # link points. "": no link is made.
    page_url: str = ""

    @classmethod
    def from_env(cls) -> ProxySettings:
        missing = [
            name
            for name in ("GATEHOUSE_KEYRING_FILE", "GATEHOUSE_OPERATOR_URL")
            if not os.environ.get(name)
        ]
        if missing:
            raise ValueError(f"required setting(s) not set: {', '.join(missing)}")
        operator_url = os.environ["GATEHOUSE_OPERATOR_URL"].rstrip("/")
        if not operator_url.startswith("https://"):
            raise ValueError(
                f"GATEHOUSE_OPERATOR_URL must be an https:// URL (the table channel is TLS), "
                f"not {operator_url!r}"
            )
        ca_file = os.environ.get("GATEHOUSE_UPSTREAM_CA_FILE")
        allow_http = env_flag("GATEHOUSE_ALLOW_HTTP_UPSTREAMS")
        return cls(
            keyring_file=Path(os.environ["GATEHOUSE_KEYRING_FILE"]),
            operator_url=operator_url,
            allow_http=allow_http,
            allowed_private_networks=_list("GATEHOUSE_ALLOWED_PRIVATE_NETWORKS"),
            google_token_url=os.environ.get("GATEHOUSE_GOOGLE_TOKEN_URL", GOOGLE_TOKEN_URL),
            aws=AwsSettings.from_env(),
            upstream_ca_file=Path(ca_file) if ca_file else None,
            request_read_timeout_seconds=env_seconds(
                "GATEHOUSE_REQUEST_READ_TIMEOUT_SECONDS", cls.request_read_timeout_seconds
            ),
            tenant_limits=_tenant_limits(),
            store=_store(),
            shares=_shares(),
            max_token_chars=env_count(
                "GATEHOUSE_MAX_TOKEN_CHARS", MAX_TOKEN_CHARS, least=1024, most=MOST_TOKEN_CHARS
            ),
            quota_lease_share=env_share(
                "GATEHOUSE_QUOTA_LEASE_SHARE", cls.quota_lease_share, MAX_QUOTA_LEASE_SHARE
            ),
            audit=AuditSettings(
                enabled=env_flag("GATEHOUSE_AUDIT_LOG"),
                sample_rate=env_share("GATEHOUSE_AUDIT_SAMPLE", AuditSettings.sample_rate, 1.0),
            ),
            traces=TraceSettings(
                follow_app_sampling=env_flag("GATEHOUSE_TRACES_FOLLOW_APP_SAMPLING"),
                keep_app_tracestate=env_flag("GATEHOUSE_TRACES_KEEP_APP_TRACESTATE"),
            ),
            viewers=_viewers(allow_http),
            page_url=_page_url(),
        )
