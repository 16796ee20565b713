"""Access tokens for Google service accounts: JWT-bearer exchange, cached and refreshed early.

The token endpoint is the installation's (Google's by default), never the key file's
``token_uri``: the signed assertion is posted there, so a key file must not choose where it goes.
Tokens are minted once for the fleet and kept as every minted token is
(:mod:`gatehouse_proxy.credentials.fleet_tokens`); a failed exchange is answered from memory, with
backoff.

Parsing an RSA key with OpenSSL's consistency check holds the GIL for as long as it takes (35 ms
at 2,048 bits, seconds for large keys): a worker thread does not free the event loop. So keys are
loaded without it (the operator proved each key by signing with it before encrypting it), at most
4,096 bits, and each parsed signer is kept per key file for as long as the key is routed.
Signing, unlike parsing, lets go of the GIL: it runs in a worker thread, and the loop serves
other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

from cryptography.exceptions import UnsupportedAlgorithm
from google.auth import crypt, jwt

from gatehouse_contract import sent_forms
from gatehouse_contract.google_keys import MAX_RSA_BITS, load_rsa_key
from gatehouse_contract.redaction import Redactor
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.token_grants import GrantRequest, MintedToken, TokenClient
from gatehouse_proxy.errors import ProxyError

GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_ASSERTION_LIFETIME = 3600


def _signer(key_file: bytes) -> tuple[crypt.Signer, str]:
    info = json.loads(key_file)
    key = load_rsa_key(info["private_key"].encode())
    if key.key_size > MAX_RSA_BITS:
        raise ValueError("the RSA key is too large")
    signer = crypt.RSASigner(key, info.get("private_key_id"))  # type: ignore[no-untyped-call]
    return signer, str(info["client_email"])


def _sign_assertion(
    signer: crypt.Signer, email: str, scopes: tuple[str, ...], audience: str
) -> bytes:
    now = int(time.time())
    payload = {
        "iss": email,
        "scope": " ".join(scopes),
        "aud": audience,
        "iat": now,
        "exp": now + _ASSERTION_LIFETIME,
    }
    assertion: bytes = jwt.encode(signer, payload)  # type: ignore[no-untyped-call]
    return assertion


class GoogleMinter:
    """Signs an assertion with a service account's key and exchanges it for an access token.

    Tokens are kept by :class:`gatehouse_proxy.credentials.fleet_tokens.FleetTokens`, once for the
    fleet; this keeps only parsed signers, one per key file for as long as some connection routes
    it.
    """

    def __init__(
        self,
        client: TokenClient,
        token_url: str = GOOGLE_TOKEN_URL,
        timeout: float = 10.0,
    ) -> None:
        self.client = client
        self.token_url = token_url
        self.timeout = timeout
        # Parsed signers by the key file's hash, and which credential uses which.
        self._signers: dict[str, tuple[crypt.Signer, str]] = {}
        self._signer_of: dict[CredentialKey, str] = {}

    def forget(self, keep: set[CredentialKey]) -> None:
        """Drops the signers of credentials that are no longer routed."""
        for key in [key for key in self._signer_of if key not in keep]:
            del self._signer_of[key]
        used = set(self._signer_of.values())
        for fingerprint in [f for f in self._signers if f not in used]:
            del self._signers[fingerprint]

    def discard(self, key: CredentialKey) -> None:
        """Drops one credential's signer at once (a draft's, after its test)."""
        self.forget({owner for owner in self._signer_of if owner != key})

    def _signer_for(self, owner: CredentialKey, key_file: bytes) -> tuple[crypt.Signer, str]:
        fingerprint = hashlib.sha256(key_file).hexdigest()
        signer = self._signers.get(fingerprint)
        if signer is None:
            signer = self._signers[fingerprint] = _signer(key_file)
        self._signer_of[owner] = fingerprint
        return signer

    async def mint(
        self, owner: CredentialKey, key_file: bytes, scopes: tuple[str, ...]
    ) -> MintedToken:
        try:
            signer, email = self._signer_for(owner, key_file)
            assertion = await asyncio.to_thread(
                _sign_assertion, signer, email, tuple(sorted(scopes)), self.token_url
            )
        except (ValueError, KeyError, TypeError, UnsupportedAlgorithm):
            raise ProxyError(
                "credential_failed", "the service account key could not sign a token request"
            ) from None
        return await self.client.post(
            GrantRequest(
                self.token_url,
                form={"grant_type": JWT_BEARER, "assertion": assertion.decode()},
                headers={},
                seconds=self.timeout,
                code="credential_failed",
                # The error code only: Google's descriptions may quote the assertion.
                redact=Redactor(sent_forms.form_field(assertion.decode()).forms),
                describe_errors=False,
            )
        )
