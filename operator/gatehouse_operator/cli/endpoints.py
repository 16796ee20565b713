"""Where the CLIs find the operator's service API and the caller's token: one set of environment
names, the ones ``make up``'s env file (``.gatehouse/dev/env``) exports, so that a sourced shell
needs no other setting. The names of earlier releases are still read, after the current ones.

- the service API's URL: ``--server``, else $GATEHOUSE_API_URL, else $GATEHOUSE_SERVER (older);
- the token it is called with: ``--token``, else $GATEHOUSE_TOKEN, else the kubeconfig's bearer
  token (a token user, an exec plugin's, or the Pod's ServiceAccount).
"""

from __future__ import annotations

import os

API_URL = "GATEHOUSE_API_URL"
TOKEN = "GATEHOUSE_TOKEN"  # noqa: S105 (a variable's name)
# Read after the current name: the name `gatehouse requests` read first.
API_URL_ALIASES = ("GATEHOUSE_SERVER",)

NO_SERVER = f"no server: give --server URL or set ${API_URL} (`source .gatehouse/dev/env` sets it)"
NO_TOKEN = (
    f"no token: give --token, set ${TOKEN}, or use a kubeconfig that authenticates with a "
    "token (a client certificate cannot be sent to the service API)"
)


def api_url(given: str | None) -> str:
    """The service API's URL: ``given``, else the environment's; empty when none is set."""
    if given:
        return given
    for name in (API_URL, *API_URL_ALIASES):
        if found := os.environ.get(name, ""):
            return found
    return ""


def token(given: str | None) -> str:
    """The caller's token: ``given``, else $GATEHOUSE_TOKEN; empty when neither is set (the
    kubeconfig's is asked next, by the caller, once it is loaded)."""
    return given or os.environ.get(TOKEN, "")
