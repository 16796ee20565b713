"""The URL fields of a connection (baseURL, an OAuth 2.0 tokenURL): their rules, declared once.

Each rule is one RE2 pattern, which the CRD's CEL rule and the model's validator both apply, and
one message naming the field: ``kubectl apply`` and the page's check answer alike. What CEL cannot
check well (host syntax, IDNA, numeric hosts, the installation's scheme rule) stays with
``connections.origin``, which names the field the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from gatehouse_operator.cel import cel, validations

MAX_URL_CHARS = 2048
_SCHEME = "^[A-Za-z][A-Za-z0-9+.-]*://"
_HOST = f"{_SCHEME}[^/?#@]+"


@dataclass(frozen=True)
class UrlRule:
    """A rule a URL must keep: match ``pattern`` (or, ``refuses``, not match it), checked only
    where it matches ``given`` (a rule before says what is wrong otherwise). ``pattern`` empty:
    the API server's ``isURL``, which no Python check restates (``connections.origin`` parses)."""

    message: str  # {name} is the field as messages name it, {example} a URL it may be
    pattern: str = ""
    refuses: bool = False
    given: str = ""
    # An origin has no path, an endpoint has one: some rules are one kind's only.
    origin: bool = True
    endpoint: bool = True

    def cel(self) -> str:
        check = (
            f"{'!' if self.refuses else ''}self.matches('{self.pattern}')"
            if self.pattern
            else "isURL(self)"
        )
        return f"!self.matches('{self.given}') || {check}" if self.given else check

    def holds(self, url: str) -> bool:
        if not self.pattern or (self.given and not re.search(self.given, url)):
            return True
        return bool(re.search(self.pattern, url)) != self.refuses


_HTTP = "(http only where the installation allows it)"
RULES = (
    UrlRule("{name} must be an absolute URL such as {example}", _SCHEME),
    # Worded for each kind as users of each have read it.
    UrlRule(f"{{name}} must use https {_HTTP}", "^https?://", given=_SCHEME, endpoint=False),
    UrlRule(f"{{name}} must be an https URL {_HTTP}", "^https?://", given=_SCHEME, origin=False),
    UrlRule("{name} must include a host", _HOST, given=_SCHEME),
    UrlRule(
        "{name} must not contain credentials; reference a Secret in auth.secretRef",
        f"{_SCHEME}[^/?#]*@",
        refuses=True,
    ),
    UrlRule(
        "{name} must be an origin without a path; restrict paths with allowedPaths",
        f"{_SCHEME}[^/?#]*/[^?#]",
        refuses=True,
        endpoint=False,
    ),
    UrlRule("{name} must not have a query string", "[?]", refuses=True, endpoint=False),
    UrlRule("{name} must not have a fragment", "[#]", refuses=True, endpoint=False),
    UrlRule("{name} must not have a query or fragment", "[?#]", refuses=True, origin=False),
    UrlRule("{name} is not a valid URL", given=_HOST),
)


@dataclass(frozen=True)
class UrlField:
    """One URL field: its name in messages (the path from the spec), whether it is an origin or
    an endpoint, and an example; ``field()`` is its pydantic field, CEL rules included."""

    name: str
    example: str
    origin: bool
    description: str

    def rules(self) -> list[UrlRule]:
        return [rule for rule in RULES if (rule.origin if self.origin else rule.endpoint)]

    def message(self, rule: UrlRule) -> str:
        return rule.message.format(name=self.name, example=self.example)

    def problem(self, url: str) -> str:
        """The first rule ``url`` breaks, in its message; "" when it keeps them all."""
        return next((self.message(rule) for rule in self.rules() if not rule.holds(url)), "")

    @property
    def required(self) -> str:
        """What the field asks for when it is left empty."""
        kind = "an origin " if self.origin else ""
        return f"{kind}such as {self.example}"

    def checked(self, url: str) -> str:
        """The model's validator: the URL as given, or the first rule it breaks."""
        problem = self.problem(url)
        if problem:
            raise ValueError(problem)
        return url

    def field(self, **extra: Any) -> Any:
        return Field(
            min_length=1,
            max_length=MAX_URL_CHARS,
            description=self.description,
            json_schema_extra=validations(
                *(cel(rule.cel(), self.message(rule)) for rule in self.rules())
            ),
            **extra,
        )


BASE_URL = UrlField(
    name="baseURL",
    example="https://api.example.com",
    origin=True,
    description="The origin every request is pinned to: scheme, host and optional port.",
)
TOKEN_URL = UrlField(
    name="auth.oauth2ClientCredentials.tokenURL",
    example="https://login.example.com/oauth2/token",
    origin=False,
    description="The authorization server's token endpoint: https (http only where the "
    "installation allows it for baseURL), no credentials, query or fragment. Redirects are "
    "refused.",
)
# An authorization-code connection's endpoints: the token URL's rules, each field named.
_CODE = "auth.oauth2AuthorizationCode"
CODE_TOKEN_URL = UrlField(
    name=f"{_CODE}.tokenURL",
    example="https://login.example.com/oauth2/token",
    origin=False,
    description=TOKEN_URL.description,
)
AUTHORIZATION_URL = UrlField(
    name=f"{_CODE}.authorizationURL",
    example="https://login.example.com/oauth2/authorize",
    origin=False,
    description="The authorization server's authorization endpoint, where a person is sent to "
    "grant access: https (http only where the installation allows it for baseURL), no "
    "credentials, query or fragment (extra query parameters go in authorizationParameters).",
)
REVOCATION_URL = UrlField(
    name=f"{_CODE}.revocationURL",
    example="https://login.example.com/oauth2/revoke",
    origin=False,
    description="The provider's token revocation endpoint (RFC 7009), called when a grant is "
    "dropped; the token URL's rules. Called only on the token URL's origin (scheme, host, "
    "port), since the client secret goes with it; elsewhere a dropped grant is only forgotten. "
    "Unset: the provider has none, and a dropped grant is only forgotten.",
)
