"""The service API's OpenAPI 3.1 document, with schemas generated from the body models."""

from __future__ import annotations

from functools import cache

from pydantic import JsonValue
from pydantic.json_schema import models_json_schema

from gatehouse_contract.connecting import LINK_SECONDS, GrantsSummary
from gatehouse_operator.api.connection_test import SampleRequest
from gatehouse_operator.connections.models import (
    BuildSpec,
    CachePurged,
    ConnectionDetail,
    ConnectionList,
    ConnectionTestOutcome,
    ConnectionTestRequest,
    ConnectionUsage,
    DraftTestOutcome,
    DraftTestRequest,
    RecentRequests,
    SampleSaveOutcome,
)
from gatehouse_operator.service_api.models import (
    BODY_SECONDS,
    MAX_BODY_BYTES,
    ConnectLink,
    DefaultsResult,
    DefaultsUpdate,
    ErrorBody,
    Revoked,
)

_MODELS = (
    SampleRequest,
    BuildSpec,
    CachePurged,
    ConnectionDetail,
    ConnectionList,
    ConnectionTestOutcome,
    ConnectionTestRequest,
    ConnectionUsage,
    DefaultsResult,
    DefaultsUpdate,
    DraftTestOutcome,
    DraftTestRequest,
    ErrorBody,
    RecentRequests,
    SampleSaveOutcome,
    ConnectLink,
    GrantsSummary,
    Revoked,
)
_REF = "#/components/schemas/{model}"


# The document and its parts are typed as open JSON (mypy checks every value is JSON): nothing
# here reads them back, and OpenAPI's own shape is the document's business.
def _ref(model: type) -> dict[str, JsonValue]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model: type, description: str) -> dict[str, JsonValue]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*statuses: int) -> dict[str, JsonValue]:
    meaning = {
        400: "The body breaks a rule; the message names the field.",
        401: "No bearer token, or the API server did not accept it.",
        403: "RBAC does not allow the caller this action.",
        404: "No such resource.",
        408: f"The body did not arrive within {BODY_SECONDS:g} s.",
        409: "A conflict: the test was not saved, the connection exists already, or it does "
        "not have what the action is for (a cache to purge, an authorization code to connect).",
        413: f"The body is over {MAX_BODY_BYTES:,} bytes; refused before it is read.",
        422: "Admission refused the request; the message names the field and the rule.",
        429: "The caller has as many tests or draft tests running as one caller may (or, for "
        "requests, the namespace as many gathers as it may have at once).",
        410: "The connect link was used already or is past its time.",
        502: "The Kubernetes API server failed.",
        503: "No proxy replica could answer (or the installation names no page URL).",
        504: "The test did not finish (or was not saved) in time.",
    }
    return {str(status): _json(ErrorBody, meaning[status]) for status in statuses}


def _name(name: str, description: str) -> dict[str, JsonValue]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": description,
    }


NAMESPACE = _name("namespace", "The project's namespace.")


def _query(name: str, description: str, schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


SINCE = _query(
    "since", "Only requests that ended after this (seconds since the epoch).", {"type": "number"}
)
LIMIT = _query("limit", "At most this many, the newest (1 to 500; 100).", {"type": "integer"})
AFTER = _query(
    "after",
    "A cursor an earlier answer gave (its cursor): the requests that ended since it was given, "
    "each once (at most limit of each replica's); lost counts those the replicas no longer held.",
    {"type": "string"},
)
REQUESTS = (
    "Each proxy replica's recent requests (its last 200 per connection and per app), gathered "
    "now over the table channel, newest first: time, app, connection, method, path with query "
    "values replaced by *, status, the proxy's error code, duration, bytes, replica and trace "
    "id; never a header value or a body. "
)


@cache
def document() -> dict[str, JsonValue]:
    _, schemas = models_json_schema(
        [(model, "validation") for model in _MODELS],
        by_alias=True,
        ref_template=_REF,
    )
    paths: dict[str, JsonValue] = {
        "/api/v1/namespaces/{namespace}/connections": {
            "get": {
                "summary": "The connections the caller could link",
                "description": "Admins (who may update ExternalConnections) see all; builders "
                "and interactive viewers (the link verb) only those with linkPolicy Builders. "
                "Never a secret, only whether one is set.",
                "parameters": [NAMESPACE],
                "responses": {
                    "200": _json(ConnectionList, "The connections."),
                    **_errors(401, 403, 502),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/tests": {
            "post": {
                "summary": "Test a connection through the proxy",
                "description": "Creates a ConnectionTest (needs create on connectiontests) and "
                "waits for its outcome. A passing test may be saved as a redacted sample.",
                "parameters": [NAMESPACE, _name("name", "The ExternalConnection.")],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(ConnectionTestRequest)}},
                },
                "responses": {
                    "201": _json(ConnectionTestOutcome, "The test ran; see passed."),
                    **_errors(400, 401, 403, 408, 413, 422, 429, 502, 504),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connection-drafts/tests": {
            "post": {
                "summary": "Test a connection before it is saved",
                "description": "The draft is checked by the API server as the caller (a dry-run "
                "create, or replace with replaces: RBAC, the schema's rules, the admission "
                "webhook), compiled and its credential encrypted as a saved connection's would be, "
                "and tried through a proxy replica. Nothing of it is stored: no connection, "
                "Secret or ConnectionTest.",
                "parameters": [NAMESPACE],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(DraftTestRequest)}},
                },
                "responses": {
                    "200": _json(DraftTestOutcome, "The test ran; see passed."),
                    **_errors(400, 401, 403, 404, 408, 409, 413, 422, 429, 502, 504),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}": {
            "get": {
                "summary": "One connection, with its saved samples",
                "description": "Visible as in the list: a connection the caller could not see "
                "there is 404 here. canManage says whether the caller may edit it.",
                "parameters": [NAMESPACE, _name("name", "The ExternalConnection.")],
                "responses": {
                    "200": _json(ConnectionDetail, "The connection."),
                    **_errors(401, 403, 404, 502),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/requests": {
            "get": {
                "summary": "The connection's recent requests, of every app linking it",
                "description": REQUESTS + "Visible as the connection is (404 and 403 alike).",
                "parameters": [
                    NAMESPACE,
                    _name("name", "The ExternalConnection."),
                    SINCE,
                    LIMIT,
                    AFTER,
                ],
                "responses": {
                    "200": _json(RecentRequests, "The requests."),
                    **_errors(400, 401, 403, 404, 429, 502),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/usage": {
            "get": {
                "summary": "The connection's usage per app: requests, errors, p95",
                "description": "Per minute over the last hour, or per hour over the last day, "
                "from counts the proxy replicas report; visible as the connection is.",
                "parameters": [
                    NAMESPACE,
                    _name("name", "The ExternalConnection."),
                    _query("window", "hour (default) or day.", {"enum": ["hour", "day"]}),
                ],
                "responses": {
                    "200": _json(ConnectionUsage, "The usage."),
                    **_errors(400, 401, 403, 404, 502),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/connect": {
            "post": {
                "summary": "A connect link for the connection's shared account",
                "description": "For an oauth2AuthorizationCode connection with credentialScope "
                "shared; needs update on the ExternalConnection. The link is single-use and "
                f"waits {LINK_SECONDS // 60} minutes for its click (`gatehouse connect`).",
                "parameters": [NAMESPACE, _name("name", "The ExternalConnection.")],
                "responses": {
                    "201": _json(ConnectLink, "The link."),
                    **_errors(401, 403, 404, 409, 502, 503),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/cache/purge": {
            "post": {
                "summary": "Purge the connection's cached answers",
                "description": "Sets the annotation gatehouse.dev/cache-purged-at to now: the "
                "answers cached before it are never served again, by any proxy replica once it "
                "holds the route (`gatehouse cache purge`). Needs update on the "
                "ExternalConnection; 409 when it has no spec.cache.",
                "parameters": [NAMESPACE, _name("name", "The ExternalConnection.")],
                "responses": {
                    "200": _json(CachePurged, "Purged: the new epoch."),
                    **_errors(401, 403, 404, 409, 502),
                },
            }
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/grants": {
            "get": {
                "summary": "The connection's connected accounts",
                "description": "How many accounts are connected, the last refresh, the refreshes "
                "that failed, and the most recently used (whose, where the installation records "
                "viewers' ids; an owner's digest otherwise). Never a token. Needs update on the "
                "ExternalConnection.",
                "parameters": [NAMESPACE, _name("name", "The ExternalConnection.")],
                "responses": {
                    "200": _json(GrantsSummary, "The connected accounts."),
                    **_errors(401, 403, 404, 409, 502, 503),
                },
            },
            "delete": {
                "summary": "Revoke connected accounts",
                "description": "Every account, or the one ?owner= names (its digest, as listed); "
                "each refresh token is revoked at the provider where the connection names a "
                "revocation URL. Needs update on the ExternalConnection.",
                "parameters": [
                    NAMESPACE,
                    _name("name", "The ExternalConnection."),
                    _query("owner", "One account's digest, as listed.", {"type": "string"}),
                ],
                "responses": {
                    "200": _json(Revoked, "Revoked."),
                    **_errors(400, 401, 403, 404, 409, 502, 503),
                },
            },
        },
        "/api/v1/namespaces/{namespace}/connections/{name}/samples/{sample}": {
            "delete": {
                "summary": "Delete a saved sample",
                "description": "Needs update on the ExternalConnection (manage).",
                "parameters": [
                    NAMESPACE,
                    _name("name", "The ExternalConnection."),
                    _name("sample", "The sample's id (the test it was saved from)."),
                ],
                "responses": {"204": {"description": "Deleted."}, **_errors(401, 403, 404, 502)},
            }
        },
        "/api/v1/namespaces/{namespace}/connectiontests/{name}/sample": {
            "post": {
                "summary": "Save a finished, passing test as a sample",
                "description": "Needs patch on the ConnectionTest. Sets its annotation "
                "gatehouse.dev/save-as-sample (as `gatehouse save-sample` does) and waits for "
                "the operator. A test is saved once; a failed one never.",
                "parameters": [NAMESPACE, _name("name", "The ConnectionTest.")],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(SampleRequest)}},
                },
                "responses": {
                    "201": _json(SampleSaveOutcome, "Saved."),
                    "409": _json(SampleSaveOutcome, "Not saved; reason and message say why."),
                    **_errors(400, 401, 403, 404, 408, 413, 502, 504),
                },
            }
        },
    }
    for plural, kind in (("dataapps", "DataApp"), ("charttypes", "ChartType")):
        paths[f"/api/v1/namespaces/{{namespace}}/{plural}/{{name}}/build-spec"] = {
            "get": {
                "summary": f"The app-build hand-off for a {kind}",
                "description": "Needs get on the app. Per linked alias: the connection's "
                "origin, allowed methods and paths, instructions and saved samples, for a "
                "connection the caller may see (update on it, or link on it when its linkPolicy "
                "is Builders); for any other link, missing or not, only the alias, the "
                "connection's name, the fetch path and detailsHidden: true. And the image "
                "policy (CSP img-src) of the connections the caller may see.",
                "parameters": [NAMESPACE, _name("name", f"The {kind}.")],
                "responses": {
                    "200": _json(BuildSpec, "The hand-off document."),
                    **_errors(401, 403, 404, 502),
                },
            }
        }
        paths[f"/api/v1/namespaces/{{namespace}}/{plural}/{{name}}/requests"] = {
            "get": {
                "summary": f"The {kind}'s recent requests, on every connection",
                "description": REQUESTS + "Needs update on the app (who may edit it). A "
                "fetch through a connection the caller may not see (as build-spec's "
                "detailsHidden) has only time, app, connection, status, code, replica and trace "
                "id, and detailsHidden: true; hiddenReason says why.",
                "parameters": [NAMESPACE, _name("name", f"The {kind}."), SINCE, LIMIT, AFTER],
                "responses": {
                    "200": _json(RecentRequests, "The requests."),
                    **_errors(400, 401, 403, 404, 429, 502),
                },
            }
        }
    project = _name("projectUuid", "The ProjectConfig's metadata.uid (its status.projectUuid).")
    paths["/api/v2/projects/{projectUuid}/defaults"] = {
        "get": {
            "summary": "The project's defaults",
            "description": "Needs get on the ProjectConfig; to a caller without it the "
            "projectUuid names nothing (the 404 of an unknown one). Booleans carry their "
            "effective value (true when not set).",
            "parameters": [project],
            "responses": {
                "200": _json(DefaultsResult, "The defaults."),
                **_errors(401, 403, 404, 502),
            },
        },
        "put": {
            "summary": "Change column_totals and/or pre_aggregate_execution_fallback",
            "description": "Needs get (else 404, as for an unknown projectUuid) and patch "
            "(else 403) on the ProjectConfig. Changes only the keys given; any "
            "other key or a non-boolean is a 400 naming it. A later `service deploy` keeps "
            "these values unless the file sets the same keys.",
            "parameters": [project],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(DefaultsUpdate)}},
            },
            "responses": {
                "200": _json(DefaultsResult, "The defaults after the change."),
                **_errors(400, 401, 403, 404, 408, 413, 502),
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Gatehouse service API", "version": "v1"},
        "components": {
            "schemas": schemas["$defs"],
            "securitySchemes": {
                "kubernetes": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A Kubernetes token, checked with a TokenReview.",
                }
            },
        },
        "security": [{"kubernetes": []}],
        "paths": paths,
    }
