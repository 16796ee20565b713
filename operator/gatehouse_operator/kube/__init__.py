"""The few Kubernetes API calls the operator makes itself (kopf does the watching), one module a
job over one shared client (``calls``), whose calls raise the typed errors of ``errors`` (the
client's ApiException never leaves this package): Secrets and ConfigMaps (``secrets``), apps'
proxy credentials (``tokens``), the gatehouse.dev resources, their status and Events
(``resources``), and saved samples (``samples``). ``Kube`` holds one of each, built once in
wiring, so a call says which job it is: ``kube.secrets.secret_data(...)``,
``kube.samples.saved(...)``."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes.aio import client

from gatehouse_operator.kube.calls import API_ERRORS, KubeCalls, api_client, failure
from gatehouse_operator.kube.resources import Resources
from gatehouse_operator.kube.samples import Samples
from gatehouse_operator.kube.secrets import WATCHED_LABEL, WATCHED_SELECTOR, Secrets, watched
from gatehouse_operator.kube.tokens import (
    CREDENTIAL_LABEL,
    SECRET_TAKEN_RETRY_SECONDS,
    TOKEN_KEY,
    AppTokens,
    SecretTaken,
    credential_owner,
)

__all__ = [
    "API_ERRORS",
    "CREDENTIAL_LABEL",
    "SECRET_TAKEN_RETRY_SECONDS",
    "TOKEN_KEY",
    "WATCHED_LABEL",
    "WATCHED_SELECTOR",
    "AppTokens",
    "Kube",
    "Resources",
    "Samples",
    "SecretTaken",
    "Secrets",
    "api_client",
    "credential_owner",
    "failure",
    "watched",
]


@dataclass(frozen=True)
class Kube:
    """The operator's own API calls, by job."""

    # The operator's client, for what is asked as a user beside it (access.as_user).
    api: client.ApiClient
    resources: Resources
    secrets: Secrets
    tokens: AppTokens
    samples: Samples

    @classmethod
    def of(cls, api: client.ApiClient, namespaces: tuple[str, ...] = ()) -> Kube:
        """Every part over ``api``. ``namespaces``: the ones the operator watches, if not all."""
        calls = KubeCalls(api, namespaces)
        resources, secrets = Resources(calls), Secrets(calls)
        return cls(api, resources, secrets, AppTokens(calls, secrets), Samples(calls, resources))
