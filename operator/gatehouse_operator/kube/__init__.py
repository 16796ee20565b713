"""The few Kubernetes API calls the operator makes itself (kopf does the watching), one module a
job: the shared parts (``calls``), Secrets and ConfigMaps (``secrets``), apps' proxy credentials
(``tokens``), the gatehouse.dev resources, their status and Events (``resources``), and saved
samples (``samples``). ``Kube`` is all of them, so a caller holds one."""

from __future__ import annotations

from gatehouse_operator.kube.calls import API_ERRORS, api_client, failure
from gatehouse_operator.kube.samples import SampleRefused, Samples
from gatehouse_operator.kube.secrets import WATCHED_LABEL, WATCHED_SELECTOR, watched
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
    "Kube",
    "SampleRefused",
    "SecretTaken",
    "api_client",
    "credential_owner",
    "failure",
    "watched",
]


class Kube(AppTokens, Samples):
    """The operator's own API calls: Secrets, apps' tokens, resources, samples."""
