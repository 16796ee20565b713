"""OAuth 2.0 client credentials (RFC 6749 4.4): the token request a connection's client makes.

The client authenticates as its connection says: HTTP Basic (2.3.1, the default: every server
must accept it, with id and secret form-encoded before base64) or the id and secret in the form
body. The secret is decrypted for the one request and goes nowhere but the token URL; what the
endpoint says back is scrubbed of it before anyone sees it.
"""

from __future__ import annotations

import base64
from urllib.parse import quote_plus

from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import TokenRequest
from gatehouse_proxy.token_grants import MintedToken, TokenClient

CLIENT_CREDENTIALS = "client_credentials"
TOKEN_TIMEOUT_SECONDS = 10.0


def token_request_form(
    request: TokenRequest, scopes: tuple[str, ...], secret: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers of one token request."""
    form = {"grant_type": CLIENT_CREDENTIALS}
    if scopes:
        form["scope"] = " ".join(scopes)
    form.update(request.parameters)
    headers = {"Accept": "application/json"}
    if request.client_authentication == "basic":
        pair = f"{quote_plus(request.client_id)}:{quote_plus(secret)}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form["client_id"] = request.client_id
        form["client_secret"] = secret
    return form, headers


async def mint(
    client: TokenClient,
    request: TokenRequest,
    scopes: tuple[str, ...],
    secret: str,
    seconds: float = TOKEN_TIMEOUT_SECONDS,
) -> MintedToken:
    form, headers = token_request_form(request, scopes, secret)
    return await client.post(
        request.url,
        form=form,
        headers=headers,
        seconds=seconds,
        code="token_endpoint_failed",
        redact=Redactor([secret]),
    )
