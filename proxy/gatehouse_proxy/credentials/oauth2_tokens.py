"""OAuth 2.0 client credentials (RFC 6749 4.4): the token request a connection's client makes.

The client authenticates as its connection says: HTTP Basic (2.3.1, the default: every server
must accept it, with id and secret form-encoded before base64) or the id and secret in the form
body. The secret is decrypted for the one request and goes nowhere but the token URL; what the
endpoint says back is scrubbed of it before anyone sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_contract import sent_forms
from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import TokenRequest
from gatehouse_proxy.credentials.token_grants import GrantRequest, MintedToken, TokenClient

CLIENT_CREDENTIALS = "client_credentials"
TOKEN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class TokenRequestSent:
    form: dict[str, str]
    headers: dict[str, str]
    # Every form the client secret is sent in: what the endpoint says back is scrubbed of them.
    secret_forms: tuple[str, ...]


def token_request_form(
    request: TokenRequest, scopes: tuple[str, ...], secret: str
) -> TokenRequestSent:
    """The form and headers of one token request."""
    form = {"grant_type": CLIENT_CREDENTIALS}
    if scopes:
        form["scope"] = " ".join(scopes)
    return client_form(request, secret, form)


def client_form(request: TokenRequest, secret: str, grant: dict[str, str]) -> TokenRequestSent:
    """A grant's form (``grant``), with the request's extra parameters and the client
    authenticated as the request says: the form and headers of one token request."""
    form = {**grant, **dict(request.parameters)}
    headers = {"Accept": "application/json"}
    sent = sent_forms.client_secret(request, secret)
    if request.client_authentication == "basic":
        headers["Authorization"] = sent.value
    else:
        # The body is encoded as sent_forms.form_body writes it (TokenClient.post).
        form["client_id"] = request.client_id
        form["client_secret"] = secret
    return TokenRequestSent(form, headers, sent.forms)


async def mint(
    client: TokenClient,
    request: TokenRequest,
    scopes: tuple[str, ...],
    secret: str,
    seconds: float = TOKEN_TIMEOUT_SECONDS,
) -> MintedToken:
    sent = token_request_form(request, scopes, secret)
    return await client.post(
        GrantRequest(
            request.url,
            form=sent.form,
            headers=sent.headers,
            seconds=seconds,
            code="token_endpoint_failed",
            redact=Redactor(sent.secret_forms),
        )
    )
