"""kubectl apply rejects bad input with a message that names the field and its rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatehouse_contract.routes import MAX_CACHE_BODY_BYTES, MAX_CACHE_SECONDS
from gatehouse_dev.cluster import Cluster
from gatehouse_operator.api.url_fields import (
    AUTHORIZATION_URL,
    BASE_URL,
    CODE_TOKEN_URL,
    REVOCATION_URL,
    TOKEN_URL,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

VALID: dict[str, Any] = {
    "apiVersion": "gatehouse.dev/v1alpha1",
    "kind": "ExternalConnection",
    "metadata": {"name": "example"},
    "spec": {
        "displayName": "Example API",
        "baseURL": "https://api.example.com",
        "linkPolicy": "Builders",
        "auth": {
            "type": "apiKey",
            "apiKey": {"name": "X-API-Key", "in": "header"},
            "secretRef": {"name": "example", "key": "api-key"},
        },
    },
}


@pytest.fixture(scope="module")
def crds_installed(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/externalconnections.gatehouse.dev",
        "crd/dataapps.gatehouse.dev",
        "crd/charttypes.gatehouse.dev",
    )


def _apply(cluster: Cluster, namespace: str, resource: dict[str, Any]) -> tuple[int, str]:
    done = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(resource), check=False
    )
    return done.returncode, done.stderr


def _with(path: str, value: Any) -> dict[str, Any]:
    resource = copy.deepcopy(VALID)
    node = resource["spec"]
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return resource


_DELETE = object()
_CODE: dict[str, Any] = {
    "authorizationURL": "https://auth.example.com/authorize",
    "tokenURL": "https://auth.example.com/token",
    "clientId": "c",
}


def _code(**section: Any) -> dict[str, Any]:
    return {
        "type": "oauth2AuthorizationCode",
        "oauth2AuthorizationCode": {**_CODE, **section},
        "secretRef": {"name": "s", "key": "k"},
    }


def _aws(**section: Any) -> dict[str, Any]:
    return {
        "type": "awsSigV4",
        "awsSigV4": {"region": "us-east-1", "service": "execute-api", **section},
        "secretRef": {"name": "s", "key": "aws-keys.json"},
    }


_AWS_SECTION = (
    "auth.awsSigV4 (region, service) is required when auth.type is awsSigV4, and only then"
)
_RESERVED_HEADER = "headers[].name must not be a header the proxy or HTTP itself controls"
_TTL_OVER_MAX = "cache.ttlSeconds must be at most cache.maxTTLSeconds"
_BODY_OVER_RESPONSE = "cache.maxBodyBytes must be at most limits.maxResponseBytes"


def test_a_valid_connection_is_accepted_with_defaults(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    code, err = _apply(cluster, namespace, VALID)
    assert code == 0, err
    spec = yaml.safe_load(
        cluster.kubectl(
            "get", "externalconnection", "example", "-n", namespace, "-o", "yaml"
        ).stdout
    )["spec"]
    assert spec["allowedMethods"] == ["GET"]
    assert spec["allowPublicImages"] is False
    assert spec["limits"] == {
        "timeoutSeconds": 10,
        "maxRequestBytes": 262_144,
        "maxResponseBytes": 1_048_576,
        "requestsPerMinute": 60,
    }


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("baseURL", "api.example.com", "baseURL must be an absolute URL"),
        ("baseURL", "ftp://api.example.com", "baseURL must use https"),
        ("baseURL", "https://", "baseURL must include a host"),
        ("baseURL", "https://user:pw@api.example.com", "baseURL must not contain credentials"),
        ("baseURL", "https://api.example.com/v1", "baseURL must be an origin without a path"),
        ("baseURL", "https://api.example.com?x=1", "baseURL must not have a query string"),
        ("baseURL", "https://api.example.com#top", "baseURL must not have a fragment"),
        ("allowedMethods", ["GET", "TRACE"], 'Unsupported value: "TRACE"'),
        ("allowedMethods", [], "allowedMethods must name at least one method, unless"),
        # Public images go with auth none only (VALID has an API key), as the reference has it.
        ("allowPublicImages", True, "allowPublicImages is allowed only with auth.type none"),
        ("allowedPaths", ["v1/users"], "spec.allowedPaths[0]"),
        ("allowedPaths", ["/v1/../admin"], "must not contain . or .. segments"),
        ("allowedPaths", ["/v1//admin"], "must not contain //"),
        ("allowedPaths", ["/v1/%2e%2e"], "spec.allowedPaths[0]"),
        ("auth.type", "digest", 'Unsupported value: "digest"'),
        ("auth.apiKey", _DELETE, "auth.apiKey (name and in) is required"),
        ("auth.secretRef", _DELETE, "exactly one of auth.secretRef and auth.sealedSecret"),
        (
            "auth.sealedSecret",
            "gh1.e30.AAAA",
            "exactly one of auth.secretRef and auth.sealedSecret",
        ),
        ("auth.sealedSecret", "not sealed", "spec.auth.sealedSecret in body should match"),
        ("auth.apiKey", {"name": "Host", "in": "header"}, "must not be a header the proxy"),
        # Read as CGI-style servers read names (N6), and routing headers apps may not send.
        ("auth.apiKey", {"name": "Content_Length", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "Transfer_Encoding", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "X-Forwarded-Host", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "X.Forwarded.Host", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "Proxy", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "X-Gatehouse-Key", "in": "header"}, "'-' (as CGI, PHP"),
        ("auth.apiKey", {"name": "key", "in": "body"}, 'Unsupported value: "body"'),
        ("linkPolicy", "Everyone", 'Unsupported value: "Everyone"'),
        ("linkPolicy", _DELETE, "spec.linkPolicy: Required value"),
        ("instructions", "x" * 10_001, "spec.instructions: Too long"),
        ("limits", {"timeoutSeconds": 121}, "spec.limits.timeoutSeconds"),
        ("limits", {"maxResponseBytes": 26_214_401}, "spec.limits.maxResponseBytes"),
        ("limits", {"connectionRequestsPerMinute": 0}, "spec.limits.connectionRequestsPerMinute"),
        ("limits", {"requestsPerDay": 0}, "spec.limits.requestsPerDay"),
        # Which vendor answers are the credential's limit (R4-6): bounded, each rule named.
        ("limits", {"credentialLimit": {"statuses": [404]}}, "Unsupported value: 404"),
        ("limits", {"credentialLimit": {"statuses": []}}, "spec.limits.credentialLimit.statuses"),
        (
            "limits",
            {"credentialLimit": {"pathPrefixes": ["/a/../b"]}},
            "limits.credentialLimit.pathPrefixes entries must not contain . or .. segments",
        ),
        (
            "limits",
            {"credentialLimit": {"pathPrefixes": [f"/p{i}" for i in range(17)]}},
            "spec.limits.credentialLimit.pathPrefixes",
        ),
        (
            "limits",
            {"credentialLimit": {"header": {"name": "X Scope"}}},
            "spec.limits.credentialLimit.header.name",
        ),
        # The response cache (issue 51): bounded as the contract's CachePolicy, each rule named.
        ("cache", {"ttlSeconds": 120, "maxTTLSeconds": 60}, _TTL_OVER_MAX),
        ("cache", {"maxTTLSeconds": 30}, _TTL_OVER_MAX),  # under the default ttlSeconds (60)
        ("cache", {"ttlSeconds": 0}, "spec.cache.ttlSeconds"),
        ("cache", {"maxTTLSeconds": MAX_CACHE_SECONDS + 1}, "spec.cache.maxTTLSeconds"),
        ("cache", {"maxBodyBytes": MAX_CACHE_BODY_BYTES + 1}, "spec.cache.maxBodyBytes"),
        ("cache", {"maxBodyBytes": 2_000_000}, _BODY_OVER_RESPONSE),  # maxResponseBytes: 1 MiB
        ("cache", {"scope": "viewer"}, 'Unsupported value: "viewer"'),
        ("cache", {"staleWhileRevalidateSeconds": -1}, "spec.cache.staleWhileRevalidateSeconds"),
        ("cache", {"staleIfErrorSeconds": MAX_CACHE_SECONDS + 1}, "spec.cache.staleIfErrorSeconds"),
        ("cache", {"ttl": 60}, 'unknown field "spec.cache.ttl"'),
        # A connection's own headers: tokens, not the proxy's, not the key's, not secret.
        ("headers", [{"name": "X-Forwarded-Host", "value": "a"}], _RESERVED_HEADER),
        ("headers", [{"name": "Authorization", "value": "Token a"}], _RESERVED_HEADER),
        ("headers", [{"name": "Transfer_Encoding", "value": "x"}], _RESERVED_HEADER),
        ("headers", [{"name": "x_api_key", "value": "v"}], "must not be the API key's own"),
        ("headers", [{"name": "A", "value": "1"}, {"name": "a", "value": "2"}], "be unique"),
        ("headers", [{"name": "Notion Version", "value": "1"}], "spec.headers[0].name"),
        ("headers", [{"name": "Notion-Version", "value": "a\nb"}], "spec.headers[0].value"),
        ("headers", [{"name": f"X-{i}", "value": "1"} for i in range(21)], "spec.headers"),
        ("allowedContentTypes", ["*/*"], "spec.allowedContentTypes[0]"),
        ("allowedContentTypes", ["json"], "spec.allowedContentTypes[0]"),
        # OAuth 2.0 client credentials.
        (
            "auth",
            {"type": "oauth2ClientCredentials", "secretRef": {"name": "s", "key": "k"}},
            "auth.oauth2ClientCredentials (tokenURL, clientId) is required",
        ),
        (
            "auth",
            {
                "type": "oauth2ClientCredentials",
                "oauth2ClientCredentials": {"tokenURL": "ftp://auth.example.com", "clientId": "c"},
                "secretRef": {"name": "s", "key": "k"},
            },
            "tokenURL must be an https URL",
        ),
        (
            "auth",
            {
                "type": "oauth2ClientCredentials",
                "oauth2ClientCredentials": {
                    "tokenURL": "https://auth.example.com/token?x=1",
                    "clientId": "c",
                },
                "secretRef": {"name": "s", "key": "k"},
            },
            "tokenURL must not have a query or fragment",
        ),
        (
            "auth",
            {
                "type": "oauth2ClientCredentials",
                "oauth2ClientCredentials": {
                    "tokenURL": "https://auth.example.com/token",
                    "clientId": "c",
                    "parameters": {"client_secret": "x"},
                },
                "secretRef": {"name": "s", "key": "k"},
            },
            "must not set a parameter the grant sets itself",
        ),
        (
            "auth",
            {
                "type": "oauth2ClientCredentials",
                "oauth2ClientCredentials": {
                    "tokenURL": "https://auth.example.com/token",
                    "clientId": "c",
                    "clientAuthentication": "jwt",
                },
                "secretRef": {"name": "s", "key": "k"},
            },
            'Unsupported value: "jwt"',
        ),
        # OAuth 2.0 authorization code.
        (
            "auth",
            {"type": "oauth2AuthorizationCode", "secretRef": {"name": "s", "key": "k"}},
            "auth.oauth2AuthorizationCode (authorizationURL, tokenURL, clientId) is required",
        ),
        (
            "auth",
            {
                "type": "bearer",
                "oauth2AuthorizationCode": _CODE,
                "secretRef": {"name": "s", "key": "k"},
            },
            "auth.oauth2AuthorizationCode (authorizationURL, tokenURL, clientId) is required",
        ),
        (
            "auth",
            {"type": "oauth2AuthorizationCode", "oauth2AuthorizationCode": _CODE},
            "exactly one of auth.secretRef and auth.sealedSecret is required",
        ),
        *[
            (
                "auth",
                _code(**{field: url}),
                f"auth.oauth2AuthorizationCode.{field} {rule}",
            )
            for field in ("authorizationURL", "tokenURL", "revocationURL")
            for url, rule in (
                ("ftp://auth.example.com/x", "must be an https URL"),
                ("https://auth.example.com/x?prompt=consent", "must not have a query or fragment"),
                ("https://u:p@auth.example.com/x", "must not contain credentials"),
            )
        ],
        *[
            (
                "auth",
                _code(authorizationParameters={name: "x"}),
                "auth.oauth2AuthorizationCode.authorizationParameters must not set a parameter "
                "OAuth 2.0 or PKCE sets itself",
            )
            for name in ("redirect_uri", "State", "code_challenge_method", "scope")
        ],
        (
            "auth",
            _code(authorizationParameters={"bad name": "x"}),
            "auth.oauth2AuthorizationCode.authorizationParameters names are letters, digits",
        ),
        (
            "auth",
            _code(authorizationParameters={f"p{i}": "x" for i in range(9)}),
            "spec.auth.oauth2AuthorizationCode.authorizationParameters",
        ),
        (
            "auth",
            _code(authorizationParameters={"prompt": "a\nb"}),
            "spec.auth.oauth2AuthorizationCode.authorizationParameters.prompt",
        ),
        ("auth", _code(credentialScope="everyone"), 'Unsupported value: "everyone"'),
        ("auth", _code(clientAuthentication="jwt"), 'Unsupported value: "jwt"'),
        ("auth", _code(pkce=False), 'unknown field "spec.auth.oauth2AuthorizationCode.pkce"'),
        ("auth", {"type": "awsSigV4", "secretRef": {"name": "s", "key": "k"}}, _AWS_SECTION),
        ("auth", {**_aws(), "type": "bearer"}, _AWS_SECTION),
        ("auth", _aws(region="US-East-1"), "spec.auth.awsSigV4.region"),
        ("auth", _aws(service="execute api"), "spec.auth.awsSigV4.service"),
        ("auth", _aws(region="a" * 64), "spec.auth.awsSigV4.region"),
        ("auth", _aws(payloadSigning="chunked"), 'Unsupported value: "chunked"'),
        # A role by web identity: an IAM role's ARN, a duration STS grants, and no stored
        # secret beside it.
        (
            "auth",
            _aws(webIdentity={"roleArn": "arn:aws:iam::123456789012:role/reader"}),
            "exactly one of auth.secretRef and auth.sealedSecret is required for every auth "
            "type except none and awsSigV4 with webIdentity",
        ),
        (
            "auth",
            {
                **_aws(webIdentity={"roleArn": "arn:aws:iam::123456789012:user/me"}),
                "secretRef": None,
            },
            "spec.auth.awsSigV4.webIdentity.roleArn",
        ),
        (
            "auth",
            {
                **_aws(
                    webIdentity={
                        "roleArn": "arn:aws:iam::123456789012:role/reader",
                        "durationSeconds": 60,
                    }
                ),
                "secretRef": None,
            },
            "spec.auth.awsSigV4.webIdentity.durationSeconds",
        ),
        (
            "auth",
            _aws(webIdentity={"roleARN": "arn:aws:iam::123456789012:role/reader"}),
            'unknown field "spec.auth.awsSigV4.webIdentity.roleARN"',
        ),
    ],
)
def test_bad_connection_is_rejected_naming_the_field(
    cluster: Cluster,
    crds_installed: None,
    namespace: str,
    path: str,
    value: Any,
    message: str,
) -> None:
    code, err = _apply(cluster, namespace, _with(path, value))
    assert code != 0
    assert message in err


def test_what_apis_ask_for_today_is_accepted(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    resource = _with(
        "auth",
        {
            "type": "oauth2ClientCredentials",
            "oauth2ClientCredentials": {
                "tokenURL": "https://login.microsoftonline.com/tenant/oauth2/v2.0/token",
                "clientId": "00000000-0000-0000-0000-000000000000",
                "scopes": ["https://graph.microsoft.com/.default"],
                "clientAuthentication": "body",
                "parameters": {"resource": "https://graph.microsoft.com"},
            },
            "secretRef": {"name": "graph", "key": "client-secret"},
        },
    )
    resource["spec"]["headers"] = [
        {"name": "Notion-Version", "value": "2022-06-28"},
        {"name": "X-GitHub-Api-Version", "value": "2022-11-28"},
        {"name": "Content-Type", "value": "application/vnd.api+json"},
    ]
    resource["spec"]["allowedContentTypes"] = ["application/json", "text/*"]
    resource["spec"]["limits"] = {
        "connectionRequestsPerMinute": 100,
        "requestsPerDay": 10_000,
        "credentialLimit": {
            "statuses": [429],
            "pathPrefixes": ["/v1"],
            "header": {"name": "X-RateLimit-Scope", "value": "account"},
        },
    }
    code, err = _apply(cluster, namespace, resource)
    assert code == 0, err
    # Each viewer's own Google account, offline access asked for; the section's defaults filled.
    sheets = _with(
        "auth",
        _code(
            authorizationURL="https://accounts.google.com/o/oauth2/v2/auth",
            tokenURL="https://oauth2.googleapis.com/token",
            scopes=["https://www.googleapis.com/auth/spreadsheets.readonly"],
            authorizationParameters={"access_type": "offline", "prompt": "consent"},
            revocationURL="https://oauth2.googleapis.com/revoke",
        ),
    )
    sheets["metadata"]["name"] = "sheets"
    code, err = _apply(cluster, namespace, sheets)
    assert code == 0, err
    stored = yaml.safe_load(
        cluster.kubectl("get", "externalconnection", "sheets", "-n", namespace, "-o", "yaml").stdout
    )["spec"]["auth"]["oauth2AuthorizationCode"]
    assert (stored["credentialScope"], stored["clientAuthentication"]) == ("viewer", "basic")
    basic = _with("auth", {"type": "basic", "secretRef": {"name": "b", "key": "pair"}})
    basic["metadata"]["name"] = "basic"
    code, err = _apply(cluster, namespace, basic)
    assert code == 0, err


def test_an_image_only_connection_with_no_methods_is_accepted(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    tiles = _with("auth", {"type": "none"})
    tiles["metadata"]["name"] = "tiles"
    tiles["spec"].update(allowedMethods=[], allowPublicImages=True)
    code, err = _apply(cluster, namespace, tiles)
    assert code == 0, err
    stored = yaml.safe_load(
        cluster.kubectl("get", "externalconnection", "tiles", "-n", namespace, "-o", "yaml").stdout
    )["spec"]
    assert stored["allowedMethods"] == []


def test_a_cache_is_accepted_with_its_defaults_and_only_with_get(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    code, err = _apply(cluster, namespace, _with("cache", {}))
    assert code == 0, err
    stored = yaml.safe_load(
        cluster.kubectl(
            "get", "externalconnection", "example", "-n", namespace, "-o", "yaml"
        ).stdout
    )["spec"]
    assert stored["cache"] == {
        "ttlSeconds": 60,
        "maxTTLSeconds": 3_600,
        "maxBodyBytes": 262_144,
        "scope": "app",
        "staleWhileRevalidateSeconds": 0,
        "staleIfErrorSeconds": 0,
    }
    writes = _with("cache", {})
    writes["spec"]["allowedMethods"] = ["POST", "PUT"]
    code, err = _apply(cluster, namespace, writes)
    assert code != 0
    assert "cache needs GET in allowedMethods: only GET answers are cached" in err


@pytest.mark.parametrize(
    "api_key",
    [
        {"name": "Authorization", "in": "header"},
        {"name": "X_Api_Key", "in": "header"},
        {"name": "X-Forwarded-Host", "in": "query"},
    ],
)
def test_api_key_names_that_are_no_ones_else_are_accepted(
    cluster: Cluster, crds_installed: None, namespace: str, api_key: dict[str, str]
) -> None:
    code, err = _apply(cluster, namespace, _with("auth.apiKey", api_key))
    assert code == 0, err


def test_aws_signing_is_accepted_with_its_default_payload_signing(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    code, err = _apply(cluster, namespace, _with("auth", _aws()))
    assert code == 0, err
    spec = yaml.safe_load(
        cluster.kubectl(
            "get", "externalconnection", "example", "-n", namespace, "-o", "yaml"
        ).stdout
    )["spec"]
    assert spec["auth"]["awsSigV4"] == {
        "region": "us-east-1",
        "service": "execute-api",
        "payloadSigning": "signed",
    }


def test_google_service_account_needs_a_scope(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    resource = _with(
        "auth",
        {
            "type": "googleServiceAccount",
            "googleServiceAccount": {"scopes": []},
            "secretRef": {"name": "sa", "key": "key.json"},
        },
    )
    code, err = _apply(cluster, namespace, resource)
    assert code != 0
    assert "spec.auth.googleServiceAccount.scopes" in err
    resource["spec"]["auth"]["googleServiceAccount"]["scopes"] = ["not a scope"]
    code, err = _apply(cluster, namespace, resource)
    assert code != 0
    assert "spec.auth.googleServiceAccount.scopes[0]" in err


def test_duplicate_aliases_are_rejected(
    cluster: Cluster, crds_installed: None, namespace: str
) -> None:
    app: dict[str, Any] = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "DataApp",
        "metadata": {"name": "sales"},
        "spec": {
            "connections": [
                {"alias": "crm", "connection": "example"},
                {"alias": "crm", "connection": "other"},
            ]
        },
    }
    code, err = _apply(cluster, namespace, app)
    assert code != 0
    assert "Duplicate value" in err
    app["spec"]["connections"] = [{"alias": "Bad Alias", "connection": "example"}]
    code, err = _apply(cluster, namespace, app)
    assert code != 0
    assert "spec.connections[0].alias" in err


@pytest.mark.parametrize(
    "url",
    [
        "api.example.com",
        "ftp://api.example.com",
        "HTTPS://api.example.com",
        "https://",
        "https://user:pw@api.example.com",
        "https://api.example.com/v1",
        "https://api.example.com?x=1",
        "https://api.example.com#top",
        "https://api.example.com/token?x=1",
        "https://api.example.com",
        "http://127.0.0.1:8080",
        "https://login.example.com/oauth2/token",
    ],
)
def test_the_models_url_rules_are_the_api_servers(
    cluster: Cluster, crds_installed: None, namespace: str, url: str
) -> None:
    """baseURL's and tokenURL's rules are declared once (api.url_fields): the API server's CEL
    and the operator's model refuse the same URLs, rule by rule, in the same words."""
    resource = _with(
        "auth",
        {
            "type": "oauth2ClientCredentials",
            "oauth2ClientCredentials": {"tokenURL": url, "clientId": "c"},
            "secretRef": {"name": "s", "key": "k"},
        },
    )
    resource["spec"]["baseURL"] = url
    done = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump(resource), check=False,
    )  # fmt: skip
    for field in (BASE_URL, TOKEN_URL):
        for rule in field.rules():
            if rule.pattern:  # isURL is the API server's alone
                assert (field.message(rule) in done.stderr) == (not rule.holds(url)), (
                    field.message(rule),
                    done.stderr,
                )
    refused = bool(BASE_URL.problem(url) or TOKEN_URL.problem(url))
    assert (done.returncode != 0) == refused, done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "login.example.com/authorize",
        "ftp://login.example.com/authorize",
        "https://",
        "https://user:pw@login.example.com/authorize",
        "https://login.example.com/authorize?prompt=consent",
        "https://login.example.com/authorize#top",
        "http://127.0.0.1:8080/authorize",
        "https://login.example.com/oauth2/authorize",
    ],
)
def test_the_authorization_codes_url_rules_are_the_api_servers(
    cluster: Cluster, crds_installed: None, namespace: str, url: str
) -> None:
    """authorizationURL, tokenURL and revocationURL keep the token URL's rules, declared once:
    the API server and the model refuse the same URLs, each message naming its field."""
    fields = (AUTHORIZATION_URL, CODE_TOKEN_URL, REVOCATION_URL)
    resource = _with("auth", _code(**{field.name.rpartition(".")[2]: url for field in fields}))
    done = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump(resource), check=False,
    )  # fmt: skip
    for field in fields:
        for rule in field.rules():
            if rule.pattern:  # isURL is the API server's alone
                assert (field.message(rule) in done.stderr) == (not rule.holds(url)), (
                    field.message(rule),
                    done.stderr,
                )
    refused = any(field.problem(url) for field in fields)
    assert (done.returncode != 0) == refused, done.stderr
