"""The auth kinds, each ``credential.type`` of the routing table given its injector: the one place
the kinds are listed (a test holds it to every type the table may carry).

A new kind is a class here (:class:`gatehouse_proxy.credentials.injecting.CredentialInjector`;
a minted one subclasses :class:`gatehouse_proxy.credentials.minting.MintedTokens` and writes how
to mint) and a row below; nothing on the request path changes
(docs/development/adding-an-auth-kind.md lists the operator's side).
"""

from __future__ import annotations

from collections.abc import Mapping

from gatehouse_contract.routes import AuthType
from gatehouse_proxy.credentials.injecting import CredentialInjector
from gatehouse_proxy.credentials.kinds import (
    authorization_code,
    aws_sigv4,
    client_credentials,
    generic,
    service_account,
)

KINDS: Mapping[AuthType, type[CredentialInjector]] = {
    "none": generic.NoCredential,
    "apiKey": generic.ApiKey,
    "bearer": generic.Bearer,
    "basic": generic.Basic,
    "oauth2ClientCredentials": client_credentials.ClientCredentials,
    "googleServiceAccount": service_account.ServiceAccount,
    "oauth2AuthorizationCode": authorization_code.AuthorizationCode,
    "awsSigV4": aws_sigv4.AwsSigV4,
}
