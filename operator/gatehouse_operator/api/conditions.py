"""The conditions every resource's status carries: their types and the reasons they give.

Typed, so that a reason is spelled one way wherever it is set and matched (cert-manager's typed
condition reasons are the model); ``gatehouse_operator.status`` writes them.
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    """The conditions Gatehouse writes. Ready sums up a resource's (Passed a ConnectionTest's);
    an advisory one says something worth acting on without making the resource unready."""

    ACCEPTED = "Accepted"
    CACHE_PURGED = "CachePurged"
    CLIENT_CERTIFICATE_CURRENT = "ClientCertificateCurrent"
    COMPILED = "Compiled"
    CREDENTIAL_ISSUED = "CredentialIssued"
    CREDENTIAL_READY = "CredentialReady"
    CREDENTIAL_WATCHED = "CredentialWatched"
    LINKS_READY = "LinksReady"
    PASSED = "Passed"
    READY = "Ready"
    SAMPLE_SAVED = "SampleSaved"
    UPSTREAM_TLS_READY = "UpstreamTLSReady"


# Conditions that say something worth acting on without making the resource unready.
ADVISORY = frozenset(
    {
        ConditionType.CREDENTIAL_WATCHED,
        ConditionType.CACHE_PURGED,
        ConditionType.CLIENT_CERTIFICATE_CURRENT,
    }
)


class Reason(StrEnum):
    """Why a condition is as it is: a CamelCase word, stable for alerts and scripts to match.

    A condition may also carry a reason it takes from elsewhere: the failing condition's (Ready
    repeats it), a connection's Ready (a test of it), or the proxy's refusal (a test the proxy
    refused: ``gatehouse_contract.errors.RefusalReason``, as ``PathNotAllowed``)."""

    ALL_LINKS_READY = "AllLinksReady"
    ALREADY_SAVED = "AlreadySaved"
    CLIENT_CERTIFICATE_CURRENT = "ClientCertificateCurrent"
    CLIENT_CERTIFICATE_EXPIRED = "ClientCertificateExpired"
    CLIENT_CERTIFICATE_EXPIRING = "ClientCertificateExpiringSoon"
    CLIENT_KEY_MISMATCH = "ClientKeyMismatch"
    COMPILED = "Compiled"
    CONNECTION_NOT_FOUND = "ConnectionNotFound"
    CONNECTION_NOT_READY = "ConnectionNotReady"
    CREDENTIAL_ENCRYPTED = "CredentialEncrypted"
    INVALID_AWS_KEYS = "InvalidAwsKeys"
    INVALID_BASE_URL = "InvalidBaseURL"
    INVALID_CA_BUNDLE = "InvalidCABundle"
    INVALID_CLIENT_CERTIFICATE = "InvalidClientCertificate"
    INVALID_CLIENT_KEY = "InvalidClientKey"
    INVALID_CONFIG = "InvalidConfig"
    INVALID_LABEL = "InvalidLabel"
    INVALID_PURGE_TIME = "InvalidPurgeTime"
    INVALID_SAMPLE = "InvalidSample"
    INVALID_SECRET_VALUE = "InvalidSecretValue"
    INVALID_SERVICE_ACCOUNT_KEY = "InvalidServiceAccountKey"
    INVALID_SPEC = "InvalidSpec"
    INVALID_TOKEN_URL = "InvalidTokenURL"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NAMESPACE_TABLE_FULL = "NamespaceTableFull"
    NO_CREDENTIAL_NEEDED = "NoCredentialNeeded"
    NO_PROXY_REPLICAS = "NoProxyReplicas"
    NO_SAMPLE_BODY = "NoSampleBody"
    ROLE_BY_WEB_IDENTITY = "RoleByWebIdentity"
    ROLE_NOT_ALLOWED = "RoleNotAllowed"
    NOT_FINISHED = "NotFinished"
    OUTCOME_UNKNOWN = "OutcomeUnknown"
    PASSED = "Passed"
    PENDING = "Pending"
    PENDING_PROXIES = "PendingProxies"
    PROXY_BEHIND = "ProxyBehind"
    PROXY_BUSY = "ProxyBusy"
    PROXY_ERROR = "ProxyError"
    PROXY_UNAVAILABLE = "ProxyUnavailable"
    PURGED = "Purged"
    ROUTED = "Routed"
    RUNNING = "Running"
    SAMPLE_EXISTS = "SampleExists"
    SAMPLE_LIMIT_REACHED = "SampleLimitReached"
    SAVE_ERROR = "SaveError"
    SAVED = "Saved"
    SEALED_FOR_ANOTHER_CONNECTION = "SealedForAnotherConnection"
    SEALED_KEY_UNKNOWN = "SealedKeyUnknown"
    SEALED_VALUE_CORRUPT = "SealedValueCorrupt"
    SEALING_KEYS_MISSING = "SealingKeysMissing"
    SECRET_CONFLICT = "SecretConflict"
    SECRET_CREATED = "SecretCreated"
    SECRET_FORBIDDEN = "SecretForbidden"
    SECRET_KEY_NOT_FOUND = "SecretKeyNotFound"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_NOT_LABELLED = "SecretNotLabelled"
    SECRET_NOT_USED = "SecretNotUsed"
    SECRET_TOO_LONG = "SecretTooLong"
    SECRET_WRONG_TYPE = "SecretWrongType"
    TABLE_ENTRY_TOO_LARGE = "TableEntryTooLarge"
    TEST_FAILED = "TestFailed"
    TLS_CONFIGURED = "TLSConfigured"
    UPSTREAM_STATUS = "UpstreamStatus"
    VALID = "Valid"
    WATCHED = "Watched"
