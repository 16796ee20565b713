"""How a use case says no: a stable code, a message for people, and the HTTP status the service
API answers it with (the page shows the message); and the checks both front ends make first."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from gatehouse_operator.api.meta import DNS_SUBDOMAIN, first_problem
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.kube.errors import Cause


class Refused(GatehouseError):
    def __init__(self, status: int, code: str, message: str, causes: Sequence[Cause] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        # The API server's field causes, where it refused a change the use case made: for the
        # page to name each under its field's title (the message names them by their paths).
        self.causes = causes


# A namespace, resource or sample name as Kubernetes spells them (a DNS subdomain; projectUuid
# fits too). Anything else (``..``, ``%2F``) never reaches a permission check or an API path.
_NAME = re.compile(DNS_SUBDOMAIN)


def check_names(params: Mapping[str, object]) -> None:
    for key, value in params.items():
        if not (isinstance(value, str) and len(value) <= 253 and _NAME.match(value)):
            raise Refused(404, "not_found", f"{key}: not a Kubernetes name")


def validation_message(error: ValidationError) -> str:
    where, rule = first_problem(error)
    return f"{where or 'body'}: {rule}"
