"""The routing table's entries: what the operator compiles and every proxy replica routes by.

The operator publishes them as a snapshot and then deltas (see :mod:`gatehouse_contract.frames`);
each replica keeps a :class:`gatehouse_proxy.table.routing_table.RoutingTable` of them. An entry
holds no secret in the clear: credentials are encrypted with the table keys (see
:mod:`gatehouse_contract.keyring`) and apps appear only as hashes of their tokens.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Literal

from pydantic import AliasChoices, ConfigDict, Field

from gatehouse_contract.keyring import Encrypted
from gatehouse_contract.wire import Frozen

AuthType = Literal[
    "none",
    "apiKey",
    "bearer",
    "basic",
    "googleServiceAccount",
    "oauth2ClientCredentials",
    "oauth2AuthorizationCode",
    "awsSigV4",
]
ClientAuthentication = Literal["basic", "body"]
# Whose account an authorization-code grant is: each viewer's own, or one an admin connects for
# everyone.
CredentialScope = Literal["viewer", "shared"]

EntryKind = Literal["connection", "app"]


PausingStatus = Literal[429, 503]


class CredentialLimit(Frozen):
    """Which of an upstream's answers that ask to wait (429 or 503 with Retry-After) mean the
    credential's own limit, and so pause the whole connection; any other pauses only the
    endpoint the request called. An answer means it when its status is one of ``statuses`` and,
    if ``path_prefixes`` or ``header`` are given, it came on one of those paths or carries that
    header (either is enough)."""

    statuses: tuple[PausingStatus, ...] = (429, 503)
    path_prefixes: tuple[str, ...] = ()
    header: str = ""  # a response header's name, lower case
    header_value: str = ""  # its value, lower case; empty: any value


class Limits(Frozen):
    timeout_seconds: float
    max_request_bytes: int
    max_response_bytes: int
    requests_per_minute: int  # per (connection, app), fleet-wide
    connection_requests_per_minute: int = 0  # all apps together; 0: none
    requests_per_day: int = 0  # the connection's, per UTC day; 0: none
    # None: every vendor pause is the endpoint's (see CredentialLimit).
    credential_limit: CredentialLimit | None = None


# Whose answers a cached entry serves: the app's alone (the default), or every app linked to the
# connection. An answer made with a viewer's own credential is that viewer's alone, either way.
CacheScope = Literal["app", "connection"]
# The bounds of a connection's cache, here as on the resource (every hop checks them).
MAX_CACHE_SECONDS = 7 * 86_400
MAX_CACHE_BODY_BYTES = 4 * 1024 * 1024


class CachePolicy(Frozen):
    """A connection's response cache (GET and HEAD only): how long an answer stays fresh where the
    vendor's Cache-Control names no max-age (``ttl_seconds``), the most it stays fresh whatever
    the vendor says (``max_ttl_seconds``), the largest body kept, whose answers an entry serves,
    and how long past fresh an entry may still answer while one request revalidates it, or when
    the vendor fails. ``epoch`` changes when an admin purges the connection's entries: the old
    ones are never read again."""

    ttl_seconds: int = Field(ge=1, le=MAX_CACHE_SECONDS)
    max_ttl_seconds: int = Field(ge=1, le=MAX_CACHE_SECONDS)
    max_body_bytes: int = Field(ge=1, le=MAX_CACHE_BODY_BYTES)
    scope: CacheScope = "app"
    stale_while_revalidate_seconds: int = Field(default=0, ge=0, le=MAX_CACHE_SECONDS)
    stale_if_error_seconds: int = Field(default=0, ge=0, le=MAX_CACHE_SECONDS)
    epoch: str = Field(default="", max_length=64)


class TokenRequest(Frozen):
    """How an OAuth 2.0 client-credentials token is asked for (RFC 6749 4.4); the client secret
    is the credential's encrypted value."""

    url: str
    client_id: str
    # RFC 6749 2.3.1: HTTP Basic (what every server must support) or the form body.
    client_authentication: ClientAuthentication = "basic"
    # Extra form parameters some providers need (audience, resource), in the order given.
    parameters: tuple[tuple[str, str], ...] = ()


# An authorization-code section's bounds, as the operator's schema holds them: a table entry that
# breaks them is refused where it is read.
MAX_URL_CHARS = 2048
MAX_AUTHORIZATION_PARAMETERS = 8
_ParameterName = Annotated[str, Field(min_length=1, max_length=64)]
_ParameterValue = Annotated[str, Field(max_length=1024)]


class Authorization(Frozen):
    """Where a person is sent to grant access for an authorization-code credential (RFC 6749
    4.1, always with PKCE S256, RFC 7636); the token URL, the client and its authentication are
    the credential's ``token_request``, its scopes the credential's."""

    url: str = Field(min_length=1, max_length=MAX_URL_CHARS)
    # Extra query parameters of the authorization request (access_type, prompt...), in the
    # order given; never one that PKCE or OAuth itself sets.
    parameters: tuple[tuple[_ParameterName, _ParameterValue], ...] = Field(
        default=(), max_length=MAX_AUTHORIZATION_PARAMETERS
    )
    credential_scope: CredentialScope = "viewer"
    # RFC 7009's endpoint, called when a grant is dropped; empty: the provider has none.
    revocation_url: str = Field(default="", max_length=MAX_URL_CHARS)


# An AWS region's or service's signing name (us-east-1, execute-api, s3): lower case letters,
# digits and hyphens.
AWS_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
# What AWS's regions are called (us-east-1, us-gov-west-1, eusc-de-east-1): STS's URL names a
# role's region (sts.{region}.amazonaws.com), so no other name may stand there, such as an S3
# endpoint's (s3-us-west-2: sts.s3-us-west-2.amazonaws.com is a bucket's).
AWS_REGION = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-[0-9]{1,2}")
# Whether a request's body is hashed into its signature, or ``UNSIGNED-PAYLOAD`` is signed in its
# place (services that accept it: S3, for one).
PayloadSigning = Literal["signed", "unsigned"]


class WebIdentity(Frozen):
    """Temporary AWS keys for a role, asked of STS (AssumeRoleWithWebIdentity) with the proxy's
    own web identity token (IRSA: the Pod's projected service account token), once for the fleet
    and again before they expire. No secret is stored: the role trusts the proxy's service
    account, and the session is named by the connection (:func:`role_session_name`), never by
    its spec, so that a role's trust policy can tell the projects apart. Where STS is asked is
    the installation's setting, never a connection's: the token is the proxy's own."""

    role_arn: str = Field(min_length=20, max_length=2048, pattern=r"^arn:[\x21-\x7e]+$")
    duration_seconds: int = Field(default=3600, ge=900, le=43_200)


# STS's bound on a RoleSessionName, and what its grammar lacks ([\w+=,.@-], \w in ASCII).
MAX_ROLE_SESSION_CHARS = 64
_OUTSIDE_SESSION_GRAMMAR = re.compile(r"[^A-Za-z0-9_+=,.@-]")


def role_session_name(connection_key: str) -> str:
    """``<namespace>.<name>``: what a role's session is called in AWS's records (CloudTrail) and
    what its trust policy may require (``sts:RoleSessionName``, ``shop.*``). Namespaces and names
    are DNS labels and subdomains, which STS's grammar takes; a longer pair keeps its namespace
    and ends with a digest of the whole."""
    namespace, _, name = connection_key.partition("/")
    # A draft's name ("~draft") is no Kubernetes name: "-" in place of what STS's grammar lacks
    # (a saved connection's name never starts with one).
    whole = _OUTSIDE_SESSION_GRAMMAR.sub("-", f"{namespace}.{name}")
    if len(whole) <= MAX_ROLE_SESSION_CHARS:
        return whole
    digest = hashlib.sha256(connection_key.encode()).hexdigest()[:12]
    return f"{whole[: MAX_ROLE_SESSION_CHARS - len(digest) - 1]}-{digest}"


# The headers a request's AWS signature is sent in: the signer's alone (an app's are dropped,
# and a connection may not name them among its own).
AWS_SIGNING_HEADERS = frozenset(
    {"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token"}
)


class AwsSigning(Frozen):
    """AWS Signature Version 4: each request signed for ``region`` and ``service`` with the
    credential's keys (the stored ones, or a role's by ``web_identity``)."""

    region: str = Field(pattern=AWS_NAME_PATTERN)
    service: str = Field(pattern=AWS_NAME_PATTERN)
    payload: PayloadSigning = "signed"
    web_identity: WebIdentity | None = None


class Credential(Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)

    type: AuthType
    parameter: str = ""  # the API key's header or query parameter name
    location: Literal["header", "query", ""] = ""
    scopes: tuple[str, ...] = ()
    token_request: TokenRequest | None = None
    authorization: Authorization | None = None
    aws: AwsSigning | None = None
    # "sealed" on the wire, as proxies of earlier versions read it (they refuse unknown fields).
    encrypted: Encrypted | None = Field(
        default=None,
        validation_alias=AliasChoices("encrypted", "sealed"),
        serialization_alias="sealed",
    )

    @property
    def fingerprint(self) -> str:
        """Identifies the encrypted value without revealing anything about the secret."""
        if self.encrypted is None:
            return ""
        return hashlib.sha256(self.encrypted.ciphertext.encode()).hexdigest()[:16]

    @property
    def grant_identity(self) -> str:
        """What a person's grant was given for: the token URL, the client id and the scopes
        (in any order). A grant kept under another identity is not this credential's and is
        dropped; a new client secret, authorization URL or extra parameter keeps the grants.
        Empty for a credential that takes no grant."""
        if self.authorization is None or self.token_request is None:
            return ""
        request = self.token_request
        given = "\n".join([request.url, request.client_id, *sorted(set(self.scopes))])
        return hashlib.sha256(given.encode()).hexdigest()[:16]

    def context(self, connection_uid: str, origin: str) -> str:
        """What an encrypted value is bound to: decrypting it for another host or placement fails. A
        client secret is bound to where it is sent, the token URL, and whose it is, too."""
        context = f"{connection_uid}|{origin}|{self.type}|{self.location}|{self.parameter}"
        if self.token_request is not None:
            context += f"|{self.token_request.url}|{self.token_request.client_id}"
        return context


# The largest CA bundle a connection may carry (PEM): a few dozen certificates.
MAX_CA_BUNDLE_CHARS = 64 * 1024


class UpstreamTls(Frozen):
    """The TLS of calls to the vendor beyond the defaults: a client certificate (mTLS: its chain
    and private key in PEM, encrypted as a credential is), and CAs the vendor's certificate may
    chain to (PEM, not secret), beside the system's roots unless ``system_roots`` is False. Host
    names are verified whatever is set here."""

    client_certificate: Encrypted | None = None
    ca_bundle: str = Field(default="", max_length=MAX_CA_BUNDLE_CHARS)
    system_roots: bool = True

    @property
    def fingerprint(self) -> str:
        """Identifies these settings (a rotated certificate is re-encrypted, so another
        fingerprint) without revealing anything about the key."""
        given = "\n".join(
            [
                "" if self.client_certificate is None else self.client_certificate.ciphertext,
                self.ca_bundle,
                str(self.system_roots),
            ]
        )
        return hashlib.sha256(given.encode()).hexdigest()[:16]

    @staticmethod
    def context(connection_uid: str, origin: str) -> str:
        """What the client certificate's encrypted value is bound to: this connection, and the
        host it is presented to."""
        return f"{connection_uid}|{origin}|tls-client-certificate"


class ConnectionRoute(Frozen):
    key: str  # "namespace/name"
    uid: str
    origin: str  # scheme://host[:port], normalised
    allowed_methods: frozenset[str]
    allowed_paths: tuple[str, ...]
    credential: Credential
    limits: Limits
    # Headers sent on every request, replacing the app's of the same name (vendors' required
    # versions: Notion-Version, X-GitHub-Api-Version...). Never secret.
    headers: tuple[tuple[str, str], ...] = ()
    # Media types (type/subtype, or type/*) an answer may have; empty allows any.
    content_types: tuple[str, ...] = ()
    # Set when the operator cannot provide a working credential (missing Secret, bad key file):
    # the proxy answers 503 instead of calling upstream with stale or no credentials.
    unavailable: str = ""
    # The proxy sends the app's, the verified viewer's and the project's ids upstream in the
    # X-Gatehouse-* headers (gatehouse_contract.viewer_headers).
    forward_viewer_identity: bool = False
    # None: nothing is cached (the default).
    cache: CachePolicy | None = None
    # None: the system's roots, no client certificate (the default).
    tls: UpstreamTls | None = None

    @property
    def needs_viewer(self) -> bool:
        """Whether a request must carry a verified viewer assertion: a connection that sends
        the viewer's identity, or one whose credential is each viewer's own."""
        authorization = self.credential.authorization
        return self.forward_viewer_identity or (
            authorization is not None and authorization.credential_scope == "viewer"
        )


class AppRoute(Frozen):
    key: str  # "namespace/Kind/name"
    token_sha256: str
    # The app's uid: what its counts in the shared store are kept under (a new app of the same
    # name starts afresh).
    uid: str = ""
    links: dict[str, str] = Field(default_factory=dict)  # alias -> ConnectionRoute.key


def namespace_of(key: str) -> str:
    """The namespace of a ConnectionRoute's or AppRoute's key: both start with it."""
    return key.partition("/")[0]


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def entry_digest(kind: EntryKind, key: str, revision: int) -> int:
    """One entry's share of a table's digest: the XOR of all entries' shares.

    The digest moves with every upsert and deletion at the cost of that change alone, and it
    tells a replica whose table went wrong (a lost or doubled delta) that it must resync.
    """
    return int.from_bytes(hashlib.sha256(f"{kind}|{key}|{revision}".encode()).digest()[:16])
