"""How the CLIs call the operator's service API: the server and the caller's token found as
``endpoints`` says (the kubeconfig's bearer token last), one call answered as a typed body or
refused with the API's own message."""

from __future__ import annotations

import argparse
from typing import TypeVar
from urllib.parse import quote

import urllib3
from pydantic import BaseModel, ValidationError

from gatehouse_operator.cli import endpoints, kubeconfig
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.service_api.models import ErrorBody

Answer = TypeVar("Answer", bound=BaseModel)


def connection_path(namespace: str, connection: str) -> str:
    """A connection's path in the service API, each name percent-encoded as one segment."""
    return (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/connections/{quote(connection, safe='')}"
    )


class Refusal(GatehouseError):
    """The service API said no, or could not be reached; the message says why."""


class ServiceCalls:
    def __init__(self, server: str, token: str) -> None:
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=10, read=30), retries=False)

    @classmethod
    def of(cls, args: argparse.Namespace) -> ServiceCalls:
        """From ``--server`` and ``--token`` (else the environment's; else the kubeconfig's
        token, once ``kubeconfig.load`` has loaded it)."""
        server = endpoints.api_url(args.server)
        if not server:
            raise Refusal(endpoints.NO_SERVER)
        token = endpoints.token(args.token) or kubeconfig.bearer_token()
        if not token:
            raise Refusal(endpoints.NO_TOKEN)
        return cls(server, token)

    def call(self, method: str, path: str, answer: type[Answer]) -> Answer:
        """``answer`` as the service API sent it, read leniently: a newer operator's added
        fields are not this CLI's concern."""
        url = self.server + path
        try:
            reply = self.http.request(method, url, headers=self.headers)
        except urllib3.exceptions.HTTPError as error:
            raise Refusal(f"cannot reach {url}: {error}") from None
        if reply.status >= 300:
            try:
                message = ErrorBody.model_validate_json(reply.data, extra="ignore").error.message
            except ValidationError:
                message = ""
            raise Refusal(f"{reply.status}: {message or 'the service API refused'}")
        try:
            return answer.model_validate_json(reply.data, extra="ignore")
        except ValidationError:
            raise Refusal(f"{url} answered what this CLI cannot read") from None
