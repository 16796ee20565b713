"""What each condition reason means, and what to check: one text per ``Reason``, and one per
``RefusalReason`` (a ConnectionTest the proxy refused).

The reference page of reasons is generated from this mapping (``python -m gatehouse_dev docs``),
and a test fails when a reason has no text here, so a new reason is explained where it is added.
"""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_contract.errors import RefusalReason
from gatehouse_operator.api.conditions import Reason

_APPS = "DataApp, ChartType"
_TEST_SAMPLE = "ConnectionTest (SampleSaved)"
_SEE_PENDING = "Run the test again; if it lasts, see `PendingProxies`."
_SEALED = "ExternalConnection (CredentialReady)"
_TLS = "ExternalConnection (UpstreamTLSReady)"


@dataclass(frozen=True)
class Troubleshooting:
    """Where a reason appears, whether it says the resource works, and what to do about it."""

    on: str
    text: str
    working: bool = False


TROUBLESHOOTING: dict[Reason, Troubleshooting] = {
    Reason.ALL_LINKS_READY: Troubleshooting(
        f"{_APPS} (LinksReady)",
        "Every connection the app links exists and is Ready. Nothing to do.",
        working=True,
    ),
    Reason.ALREADY_SAVED: Troubleshooting(
        _TEST_SAMPLE,
        "The test was saved as a sample already, under the name the message shows. Nothing "
        "more is saved; run a new test to save another answer.",
    ),
    Reason.COMPILED: Troubleshooting(
        "ProjectConfig (Compiled)",
        "`service.config.yml` compiled; the message sums up what it declares. Nothing to do.",
        working=True,
    ),
    Reason.CONNECTION_NOT_FOUND: Troubleshooting(
        f"{_APPS}, ConnectionTest",
        "A link (or the test) names a connection that is not in the namespace. Check the name "
        "in `spec.connections` (or `spec.connection`), or create the connection.",
    ),
    Reason.CONNECTION_NOT_READY: Troubleshooting(
        f"{_APPS}, ConnectionTest",
        "A linked connection exists but is not Ready. Its own Ready condition says why: "
        "`kubectl describe externalconnection NAME`.",
    ),
    Reason.CREDENTIAL_ENCRYPTED: Troubleshooting(
        _SEALED,
        "The connection's secret (its Secret's value, or `auth.sealedSecret` opened with this "
        "installation's sealing key) is encrypted with the keyring for the proxies and in use. "
        "Nothing to do. Until 0.2.0 this reason was `CredentialSealed`.",
        working=True,
    ),
    Reason.INVALID_AWS_KEYS: Troubleshooting(
        "ExternalConnection",
        "The AWS keys are not the JSON `aws configure export-credentials --format process` "
        "writes (`AccessKeyId`, `SecretAccessKey`, and `SessionToken` for temporary keys), or a "
        "field breaks its rule (an access key id is 16 to 128 upper case letters and digits); "
        "the message names the field, never its value. Export the keys again and store them.",
    ),
    Reason.INVALID_BASE_URL: Troubleshooting(
        "ExternalConnection",
        "`baseURL` is not an `https://` origin (or is `http://` without "
        "`installation.allowHttpUpstreams`), or its host is one the installation blocks "
        "(`installation.allowedPrivateNetworks`). The message names the rule; fix the URL.",
    ),
    Reason.INVALID_CONFIG: Troubleshooting(
        "ProjectConfig",
        "`service.config.yml` does not compile; the message lists each problem. "
        "`gatehouse-service validate` shows them with their lines.",
    ),
    Reason.INVALID_LABEL: Troubleshooting(
        _TEST_SAMPLE,
        "The label in the `gatehouse.dev/save-as-sample` annotation is empty or over 200 "
        "characters. Give a shorter, non-empty one.",
    ),
    Reason.INVALID_PURGE_TIME: Troubleshooting(
        "ExternalConnection (CachePurged, advisory)",
        "The annotation `gatehouse.dev/cache-purged-at` is not an RFC 3339 time of at most 64 "
        "characters, so the connection's cache is off (every request reaches the API) until it "
        "is. Run `gatehouse cache purge NAME`, which sets it to now, or remove the annotation.",
    ),
    Reason.INVALID_SAMPLE: Troubleshooting(
        _TEST_SAMPLE,
        "The sample made from the test's answer breaks a ConnectionSample rule; the message "
        "names the field. Nothing is saved.",
    ),
    Reason.INVALID_SECRET_VALUE: Troubleshooting(
        "ExternalConnection",
        "The secret is empty, not UTF-8, or has line breaks or control characters inside it, "
        "which a header cannot carry (surrounding whitespace, such as a file's last newline, is "
        "trimmed); or, for basic auth, it is not user:password. The message says which. Write "
        "the value again.",
    ),
    Reason.INVALID_SERVICE_ACCOUNT_KEY: Troubleshooting(
        "ExternalConnection",
        "The Google key file is not a service account's JSON key (fields missing, or a key of "
        "another kind). Download a JSON key for the service account and store it again.",
    ),
    Reason.INVALID_SPEC: Troubleshooting(
        "any",
        "A field breaks a rule the CRD could not hold (an object stored before a schema "
        "change); the message names it. Fix the field.",
    ),
    Reason.INVALID_TOKEN_URL: Troubleshooting(
        "ExternalConnection",
        "`auth.oauth2ClientCredentials.tokenURL` (or `auth.oauth2AuthorizationCode`'s "
        "`tokenURL`, `authorizationURL` or `revocationURL`: the message names it) is not an "
        "`https://` URL (or `http://` without `installation.allowHttpUpstreams`), has a query or "
        "fragment, or its host is not a valid name.",
    ),
    Reason.METHOD_NOT_ALLOWED: Troubleshooting(
        "ConnectionTest (Passed)",
        "The test's method is not among the connection's `allowedMethods` (the message lists "
        "them), so it is not sent. Test with an allowed method, or allow it on the connection. "
        "The proxy refuses such a request with the same reason.",
    ),
    Reason.NAMESPACE_TABLE_FULL: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "The namespace's routes together would take more of the routing table than a namespace "
        "may; the message names the field that makes this route large (instructions, paths, "
        "links). Shrink it, or remove routes the namespace no longer needs.",
    ),
    Reason.ROLE_BY_WEB_IDENTITY: Troubleshooting(
        "ExternalConnection (CredentialReady)",
        "`auth.awsSigV4.webIdentity`: the proxies sign with the role's keys, asked of AWS STS "
        "with their own identity (their web identity token, else EKS Pod Identity's role); "
        "nothing is stored. If fetches fail with `credential_failed`, the message gives STS's "
        "code: `InvalidIdentityToken` (the proxies have no web identity: "
        "`installation.aws.webIdentity.enabled`, or the cluster's OIDC provider is not "
        "registered in IAM), `AccessDenied` (the role's trust policy does not trust the "
        "proxies' service account, or their Pod Identity role, or requires another session "
        'name: it is `<namespace>.<connection>`). "This proxy has no AWS identity": neither a '
        "web identity token nor EKS Pod Identity (an association made after the proxies "
        "started needs a restart); a message naming Pod Identity's agent: it refused or could "
        "not be reached.",
        working=True,
    ),
    Reason.ROLE_NOT_ALLOWED: Troubleshooting(
        "ExternalConnection, draft test",
        "`auth.awsSigV4.webIdentity.roleArn` names a role the installation does not let this "
        "namespace sign as: every project's connections share the proxies' identity, so the "
        "installation lists each namespace's roles (`installation.aws.webIdentity.roles`). Ask "
        "the platform team to add it, or use stored keys.",
    ),
    Reason.NO_CREDENTIAL_NEEDED: Troubleshooting(
        "ExternalConnection (CredentialReady)",
        "`auth.type` is `none`: the proxy adds no credential. Nothing to do.",
        working=True,
    ),
    Reason.NO_PROXY_REPLICAS: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "No proxy replica holds a table. Check the proxy Pods, the keyring Secret they mount, "
        "and the NetworkPolicy to the operator's table channel (port 8081).",
    ),
    Reason.NO_SAMPLE_BODY: Troubleshooting(
        _TEST_SAMPLE,
        "The test predates kept answer bodies, so there is nothing to save. Run it again.",
    ),
    Reason.NOT_FINISHED: Troubleshooting(
        _TEST_SAMPLE,
        "The test has not finished; a sample is saved once it has passed.",
    ),
    Reason.OUTCOME_UNKNOWN: Troubleshooting(
        "ConnectionTest",
        "The proxy replica that held the test went away or did not report it. The request may "
        "have reached the upstream, so it is not sent again: check there if it matters, then "
        "run a new test.",
    ),
    Reason.PASSED: Troubleshooting(
        "ConnectionTest (Passed)",
        "The upstream answered the test with a usable 2xx. Nothing to do.",
        working=True,
    ),
    Reason.PENDING: Troubleshooting(
        "ConnectionTest",
        "Waiting for a proxy replica (busy with the namespace's other tests, behind, or away); "
        "retried for a minute before the test gives up.",
    ),
    Reason.PENDING_PROXIES: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "Not every serving proxy replica holds the latest route yet (shown after 2 s). If it "
        "lasts, check the proxies' `/readyz` and `gatehouse_operator_proxy_replicas_current` "
        "against `gatehouse_operator_proxy_replicas_serving`; a replica without the operator "
        "keeps serving its last table.",
    ),
    Reason.PROXY_BEHIND: Troubleshooting(
        "ConnectionTest",
        "After a minute of waiting, no replica held the connection's latest route; the request "
        f"was never sent. {_SEE_PENDING}",
    ),
    Reason.PROXY_BUSY: Troubleshooting(
        "ConnectionTest",
        "After a minute of waiting, the namespace's test places stayed full; the request was "
        f"never sent. {_SEE_PENDING}",
    ),
    Reason.PROXY_ERROR: Troubleshooting(
        "ConnectionTest",
        "The proxy failed inside, or its answer broke the contract between the two programs; "
        "the proxy's log says why.",
    ),
    Reason.PROXY_UNAVAILABLE: Troubleshooting(
        "ConnectionTest",
        "After a minute of waiting, no replica could take the test; the request was never "
        f"sent. {_SEE_PENDING}",
    ),
    Reason.PURGED: Troubleshooting(
        "ExternalConnection (CachePurged, advisory)",
        "The connection's cached answers from before the time in the message are never served "
        "again (`gatehouse cache purge`). Nothing to do.",
        working=True,
    ),
    Reason.ROUTED: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "Every serving proxy replica holds the resource's latest route. Nothing to do.",
        working=True,
    ),
    Reason.RUNNING: Troubleshooting(
        "ConnectionTest",
        "Sent to a proxy replica, waiting for its report. Lasting past the test's deadline, it "
        "ends as timed out or `OutcomeUnknown`.",
    ),
    Reason.SAMPLE_EXISTS: Troubleshooting(
        _TEST_SAMPLE,
        "Another connection's sample has that name. Save this one under another label.",
    ),
    Reason.SAMPLE_LIMIT_REACHED: Troubleshooting(
        _TEST_SAMPLE,
        "The connection keeps its maximum number of samples. Delete one, then ask again.",
    ),
    Reason.SAVE_ERROR: Troubleshooting(
        _TEST_SAMPLE,
        "The API server refused to write the sample (the message gives its status); the test's "
        "own verdict stands. Ask again.",
    ),
    Reason.SAVED: Troubleshooting(
        _TEST_SAMPLE,
        "The test's answer was saved as a sample, under the name the message shows.",
        working=True,
    ),
    Reason.SEALED_FOR_ANOTHER_CONNECTION: Troubleshooting(
        _SEALED,
        "`auth.sealedSecret` was sealed for another name, namespace or baseURL, or (an OAuth "
        "2.0 client secret) another `tokenURL` or `clientId`; the message says what it was "
        "sealed for. Seal the value for this connection: `gatehouse seal -f FILE`. In "
        "`UpstreamTLSReady`, `tls.clientCertificate.sealed` likewise, or a value sealed as an "
        "auth secret rather than with `gatehouse seal --tls-cert --tls-key`.",
    ),
    Reason.SEALED_KEY_UNKNOWN: Troubleshooting(
        _SEALED,
        "The value was sealed with a key this installation does not hold: another cluster's, "
        "or a key lost with its Secret. Seal it again with this cluster's key.",
    ),
    Reason.SEALED_VALUE_CORRUPT: Troubleshooting(
        _SEALED,
        "The sealed value was cut or altered (a copy-paste, an edited header) and does not "
        "open. Seal it again.",
    ),
    Reason.SEALING_KEYS_MISSING: Troubleshooting(
        _SEALED,
        "The operator holds no sealing keys: their Secret is missing (the operator's log says "
        "whether to restore it from a backup), unreadable, or a `sealingKeys.existingSecret` "
        "without `sealing-keys.json` (`gatehouse sealing-key rotate --secret NAMESPACE/NAME` "
        "adds the first key).",
    ),
    Reason.SECRET_CONFLICT: Troubleshooting(
        _APPS,
        "A Secret named `<kind>-<name>-gatehouse` (the app's credential Secret) exists and the "
        "operator did not make it for this app; it is neither overwritten nor adopted. Rename "
        "or delete that Secret, or give the app another name; the operator tries again every "
        "30 s.",
    ),
    Reason.SECRET_CREATED: Troubleshooting(
        f"{_APPS} (CredentialIssued)",
        "The app's credential Secret (`<kind>-<name>-gatehouse`) is written. Nothing to do.",
        working=True,
    ),
    Reason.SECRET_FORBIDDEN: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "The operator may not read (or write) that Secret: with `operator.watchNamespaces` it "
        "has rights only in those namespaces. Add the namespace, or move the resource.",
    ),
    Reason.SECRET_KEY_NOT_FOUND: Troubleshooting(
        "ExternalConnection",
        "`auth.secretRef` names a key the Secret does not have (or, in `UpstreamTLSReady`, "
        "`tls.clientCertificate.secretRef`'s Secret lacks `tls.crt` or `tls.key`, or "
        "`tls.caBundleRef` names a key it does not have). Add the key, or fix the name.",
    ),
    Reason.SECRET_NOT_FOUND: Troubleshooting(
        "ExternalConnection",
        "`auth.secretRef` (or, in `UpstreamTLSReady`, `tls.clientCertificate.secretRef` or "
        "`tls.caBundleRef`) names a Secret that is not there. Create it in the connection's "
        "namespace.",
    ),
    Reason.SECRET_NOT_LABELLED: Troubleshooting(
        "ExternalConnection (CredentialWatched, advisory)",
        "The Secret works but is read once a minute: `kubectl label secret NAME "
        "gatehouse.dev/credential=true` to see rotations at once.",
    ),
    Reason.SECRET_NOT_USED: Troubleshooting(
        "draft test (the connections page, the service API)",
        "`auth.type: none`, and `awsSigV4` with `webIdentity` (a role's keys), take no secret: "
        "leave it out.",
    ),
    Reason.SECRET_TOO_LONG: Troubleshooting(
        "ExternalConnection",
        "The secret is over the size limit; the message gives both sizes. Check that the key "
        "holds the credential alone.",
    ),
    Reason.TABLE_ENTRY_TOO_LARGE: Troubleshooting(
        f"ExternalConnection, {_APPS}",
        "The route would take more of the routing table than one route may (32 KiB; a "
        "connection's `spec.tls` aside, bounded by its own rules); the message names the field "
        "that makes it large (instructions, paths, links). Shrink it.",
    ),
    Reason.TEST_FAILED: Troubleshooting(
        _TEST_SAMPLE,
        "Only a passing test is saved as a sample. Its Passed condition says why it failed.",
    ),
    Reason.UPSTREAM_STATUS: Troubleshooting(
        "ConnectionTest (Passed)",
        "The API answered, but not with a 2xx; the message gives the status. Check the request "
        "and the credential against the API's documentation.",
    ),
    Reason.VALID: Troubleshooting(
        "ExternalConnection (Accepted)",
        "The spec is valid; the message names the origin requests are pinned to.",
        working=True,
    ),
    Reason.WATCHED: Troubleshooting(
        "ExternalConnection (CredentialWatched)",
        "The credential's Secret is labelled, so a rotation is seen at once. Nothing to do.",
        working=True,
    ),
    Reason.CLIENT_CERTIFICATE_CURRENT: Troubleshooting(
        "ExternalConnection (ClientCertificateCurrent, advisory)",
        "The client certificate (spec.tls.clientCertificate) has more than a third of its "
        "lifetime left; the message gives its subject and expiry. Nothing to do.",
        working=True,
    ),
    Reason.CLIENT_CERTIFICATE_EXPIRED: Troubleshooting(
        _TLS,
        "The client certificate's notAfter has passed, so the API would refuse it: the "
        "connection is not Ready and the proxy answers 503. Renew it: update its "
        "kubernetes.io/tls Secret (cert-manager does when it renews), or seal the new one.",
    ),
    Reason.CLIENT_CERTIFICATE_EXPIRING: Troubleshooting(
        "ExternalConnection (ClientCertificateCurrent, advisory)",
        "Less than a third of the client certificate's lifetime is left (when cert-manager "
        "renews); the message says when it expires. Renew it and update its Secret: the proxies "
        "present the new one at once.",
    ),
    Reason.CLIENT_KEY_MISMATCH: Troubleshooting(
        _TLS,
        "tls.key (or the sealed private key) is not the key of the first certificate of "
        "tls.crt. The first certificate must be the client's own, its chain after it; check the "
        "pair came from the same issuance.",
    ),
    Reason.INVALID_CA_BUNDLE: Troubleshooting(
        _TLS,
        "tls.caBundle (or the Secret key tls.caBundleRef names) is not one or more PEM "
        "certificates, or is over 64 KiB; the message says which. Put the CA certificates "
        "alone, in PEM.",
    ),
    Reason.INVALID_CLIENT_CERTIFICATE: Troubleshooting(
        _TLS,
        "tls.crt (or the sealed chain) is not PEM certificates, holds more than 8, is over "
        "32 KiB, or its first certificate is not valid yet (judged again every minute, so it "
        "is used once it starts); the message says which.",
    ),
    Reason.INVALID_CLIENT_KEY: Troubleshooting(
        _TLS,
        "tls.key (or the sealed key) is not one unencrypted PEM private key of an allowed kind: "
        "RSA of 2,048 to 4,096 bits, EC on P-256 or P-384, or Ed25519; the message says which "
        "rule it breaks, never the key.",
    ),
    Reason.SECRET_WRONG_TYPE: Troubleshooting(
        _TLS,
        "tls.clientCertificate.secretRef names a Secret that is not of type kubernetes.io/tls "
        "(with tls.crt and tls.key). Create it with `kubectl create secret tls NAME --cert "
        "--key`, or let cert-manager write it.",
    ),
    Reason.TLS_CONFIGURED: Troubleshooting(
        _TLS,
        "spec.tls is checked and encrypted for the proxies; the message names the client "
        "certificate's subject and the CAs trusted. Nothing to do.",
        working=True,
    ),
}

# A ConnectionTest the proxy refuses fails with the refusal's reason (Passed, False): what each
# means for the test, and what to do. An app's fetch gets the same refusals by their code.
_NOT_A_TEST = "An app's fetch only: a test never gets it."
_TRIED_AGAIN = (
    "Never a test's reason: its request was not sent, so the operator sends the test again "
    "(`Pending`), and after a minute it ends as `ProxyBusy`."
)

REFUSAL_TROUBLESHOOTING: dict[RefusalReason, str] = {
    RefusalReason.BLOCKED_ADDRESS: (
        "The connection's host resolves to an address the installation blocks (private, "
        "loopback, metadata...), or it is an `http://` one the installation does not call; the "
        "message says which. Use a public `https://` host, or allow the network with "
        "`installation.allowedPrivateNetworks`."
    ),
    RefusalReason.CONCURRENCY_LIMITED: (
        "The replica's cap on requests in flight for the namespace, the app (tests count as "
        "one) or the connection stayed full; the message says which. Run the test again after "
        "`Retry-After`; if it lasts, they send more at once than the installation allows."
    ),
    RefusalReason.CONNECTION_UNAVAILABLE: (
        "The proxy cannot use the connection: it is not Ready (its own Ready condition says "
        "why: `kubectl describe externalconnection NAME`), or this replica cannot decrypt its "
        "credential (the keyring Secret it mounts lacks the key); the message says which."
    ),
    RefusalReason.CONTENT_TYPE_NOT_ALLOWED: (
        "The API answered with a media type outside the connection's `allowedContentTypes`; "
        "the message names it. Add the type if apps should get it, or test a path that answers "
        "with an allowed one."
    ),
    RefusalReason.CREDENTIAL_FAILED: (
        "The Google token exchange for the connection's service account failed; the message "
        "says why (the provider's error code). Check the key and the account's access."
    ),
    RefusalReason.IMAGES_ONLY: (
        "The connection is image-only (`allowedMethods: []`, `allowPublicImages`): it serves "
        "images straight from its origin, and no request goes through the proxy. Allow a "
        "method on the connection to test it."
    ),
    RefusalReason.INVALID_BODY: (
        "Where the API key goes in the query, the test's body has a field named as the key "
        "(servers merge body fields with the query's); for an app's fetch also a body "
        "compressed in a coding other than gzip and deflate. Rename or drop the field."
    ),
    RefusalReason.INVALID_PATH: (
        "The test's path is one servers could read differently (encoded `/` or `\\`, double or "
        "`%u` encoding, look-alike characters); the message says which. Write the path plainly."
    ),
    RefusalReason.INVALID_QUERY: (
        "The test's query has a raw `#`, or a raw `;` where the API key goes in the query. "
        "Encode it (`%23`, `%3B`)."
    ),
    RefusalReason.METHOD_NOT_ALLOWED: (
        "The proxy refused the method, or a `_method` override in the query or body naming a "
        "method not among the connection's `allowedMethods`. Test with an allowed method, or "
        "allow it on the connection."
    ),
    RefusalReason.NOT_READY: (
        "The proxy replica has no routing table yet. See `NoProxyReplicas`, and the replica's "
        "`/readyz` (its metrics port) for `feed.lastError`."
    ),
    RefusalReason.PATH_NOT_ALLOWED: (
        "The test's path, or the object a copy header names, is outside the connection's "
        "`allowedPaths`. Test a path it allows, or add the path to `allowedPaths`."
    ),
    RefusalReason.PATH_TRAVERSAL: (
        "The test's path has dot segments (`..`, `.`, or encoded ones) that servers resolve "
        "differently. Write the path without them."
    ),
    RefusalReason.RATE_LIMITED: (
        "Over one of the connection's quotas (`limits.requestsPerMinute`, which tests count "
        "apart from every app, `connectionRequestsPerMinute`, `requestsPerDay`), or the API "
        "asked to wait (its 429 or 503 with `Retry-After` paused the endpoint, or the whole "
        "connection when `limits.credentialLimit` says it is the credential's limit); the "
        "message says which. Run the test again later."
    ),
    RefusalReason.REQUEST_BYTES_LIMITED: (
        "The request bodies the replica holds for the namespace (or for all) would go over "
        "its cap. Run the test again after `Retry-After`."
    ),
    RefusalReason.REQUEST_TIMEOUT: (
        f"The request's body did not arrive within `proxy.requestReadTimeoutSeconds`. {_NOT_A_TEST}"
    ),
    RefusalReason.REQUEST_TOO_LARGE: (
        "The test's body is over the connection's `limits.maxRequestBytes`. Send a smaller body, "
        "or raise the limit."
    ),
    RefusalReason.RESPONSE_TOO_LARGE: (
        "The API's answer is over the connection's `limits.maxResponseBytes`, so an app's fetch "
        "of it is refused; the test shows its status, content type and start. Ask for less (a "
        "page size, a filter), or raise the limit."
    ),
    RefusalReason.TEST_NOT_STARTED: (
        "The test found no place on its replica before it had to start, or the replica was "
        f"stopping. {_TRIED_AGAIN}"
    ),
    RefusalReason.TEST_TIMED_OUT: (
        "The test's request was sent and the API had not answered by the test's deadline. It is "
        "not sent again (it may have reached the API): check there if it matters, then run a "
        "new test; a slow API needs a larger `limits.timeoutSeconds`."
    ),
    RefusalReason.TESTS_BUSY: (
        f"The replica's places for the namespace's tests were full. {_TRIED_AGAIN}"
    ),
    RefusalReason.TOKEN_ENDPOINT_FAILED: (
        "The OAuth 2.0 token request failed: the message gives the provider's `error` and "
        "`error_description` (scrubbed), or the bound it broke (a redirect, an answer too large "
        "or too slow, an `expires_in` of 0, an address not allowed). Check `tokenURL`, "
        "`clientId` and the client secret."
    ),
    RefusalReason.UNAUTHENTICATED: (
        f"The request had no app credential, or an unknown one. {_NOT_A_TEST}"
    ),
    RefusalReason.VIEWER_AUTHORIZATION_REQUIRED: (
        "The connection's OAuth 2.0 grant (the viewer's own, or the connection's shared one) is "
        "not connected, was disconnected, or the provider no longer accepts its refresh token "
        "(revoked, expired, or the client id, token URL or scopes changed since it was "
        "connected): the person connects the account again. A test gets it for a connection "
        "whose shared account is not connected."
    ),
    RefusalReason.UNKNOWN_ALIAS: (
        "The replica routes no such connection: it was deleted while the test was on its way "
        "(for an app's fetch: the app links no connection under that alias). Check the name."
    ),
    RefusalReason.UNSUPPORTED_ENCODING: (
        "The API compressed its answer although asked not to, in a coding the proxy cannot "
        "decode to scrub the credential (br, zstd, several stacked). The API must answer "
        "uncompressed, gzip or deflate."
    ),
    RefusalReason.UPSTREAM_FAILED: (
        "The API could not be reached, the request failed, or the answer broke off (or its "
        "compressed body could not be decoded); the message says which. Check `baseURL`, and "
        "that the API answers from the cluster."
    ),
    RefusalReason.UPSTREAM_INFORMATIONAL: (
        "The API gave an interim (1xx) status, such as `101 Switching Protocols`, as its final "
        "answer; the proxy relays none. The path does not suit a fetch through the proxy."
    ),
    RefusalReason.UPSTREAM_REDIRECT: (
        "The API answered with a redirect: never followed, and an app's fetch of it is refused. "
        "The test shows its status and `response.location`; point `baseURL` or the path at "
        "where it leads."
    ),
    RefusalReason.UPSTREAM_TIMEOUT: (
        "The API took longer than the connection's `limits.timeoutSeconds` to answer. Check the "
        "API, or raise the limit."
    ),
    RefusalReason.UPSTREAM_CERTIFICATE_UNTRUSTED: (
        "The API's TLS certificate is not trusted, or does not name the host of `baseURL` (the "
        "message says which). Host names are always verified. For an API behind a private CA, "
        "give the CA in `spec.tls` (`caBundle`); check `baseURL`'s host against the names in its "
        "certificate."
    ),
    RefusalReason.CLIENT_CERTIFICATE_REFUSED: (
        "The API ended the TLS connection before answering, as a server refusing a client "
        "certificate does: the connection's client certificate (`spec.tls.clientCertificate`) is "
        "not one the API accepts (another CA's, expired, not the one it expects), or the API "
        "requires one and the connection has none. Check the certificate with the API's owner."
    ),
    RefusalReason.RESERVED_HEADER: (
        "The request carried an `X-Gatehouse-*` header: those names are the proxy's own (the "
        f"viewer's identity it forwards), never taken from an app. {_NOT_A_TEST}"
    ),
    RefusalReason.VIEWER_ASSERTION_MISSING: (
        "The connection needs the viewer's identity (`forwardViewerIdentity`) and the request "
        "carried no `Gatehouse-Viewer-Assertion`. A test calls as no viewer and never gets it: "
        f"{_NOT_A_TEST}"
    ),
    RefusalReason.VIEWER_ASSERTION_INVALID: (
        "The viewer's assertion did not hold; the message names the rule (format, signature, "
        "issuer, audience, expired, lifetime, app, claims). Mint a new one for this app from an "
        f"issuer in `viewers.issuers`. {_NOT_A_TEST}"
    ),
    RefusalReason.VIEWER_KEYS_UNAVAILABLE: (
        "The proxy could not read the keys of the assertion's issuer (its `jwksURL` or "
        "`keysSecret`); the message says why, and the proxy logs it. Check the URL or the "
        f"Secret; requests are taken again after `Retry-After`. {_NOT_A_TEST}"
    ),
}
