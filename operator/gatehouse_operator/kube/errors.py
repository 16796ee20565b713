"""The Kubernetes API's refusals, typed: the client's ``ApiException`` (of its async client or
its sync one) is turned into one of these once, where the call is made (``translate`` wraps an
API group's handle), and nothing outside ``kube`` sees it.

The classes follow the API server's status reasons: a caller catches ``NotFound`` or ``Conflict``
rather than comparing numbers, and ``ApiError`` for any. None renders the response's headers or
body (they may quote the request): ``str()`` is the status and its reason.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubernetes import client as sync_client
from kubernetes.aio import client

from gatehouse_operator.errors import GatehouseError

T = TypeVar("T")
_API_EXCEPTIONS = (client.ApiException, sync_client.ApiException)
# A rule broken by an object or a list: the API server says "Invalid value: " and the rule
# (older ones put the JSON type where a value would be: "object": ), no value to point at, so
# left out; a value it quotes ("Invalid value: \"/a/../b\": ...") says which, so kept.
_NO_VALUE = re.compile(r'^Invalid value: (?:"(?:object|array)": )?(?!")')


@dataclass(frozen=True)
class Cause:
    """One of the API server's field causes (``details.causes``) of a refused write: the field's
    path, its message, and the reason (``FieldValueInvalid``, ``FieldValueRequired``...)."""

    field: str
    message: str
    reason: str

    @property
    def rule(self) -> str:
        """Its message, without "Invalid value: " where no value follows (an object's rule)."""
        return _NO_VALUE.sub("", self.message)


class ApiError(GatehouseError):
    """The API server answered a call with an error status."""

    def __init__(
        self, status: int, reason: str | None, body: str = "", retry_after: str | None = None
    ) -> None:
        super().__init__(status, reason)
        self.status, self.reason = status, reason
        # The response's body, the API server's Status: its message names the field and rule,
        # and may quote the request, so it is shown only to whoever made that request.
        self.body = body
        self.retry_after = retry_after  # the Retry-After header of a 429 or 503

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.reason}"

    @property
    def causes(self) -> list[Cause]:
        """The field causes the API server gave (a schema's or a webhook's refusal names the
        fields); none when its body has none."""
        try:
            found = json.loads(self.body).get("details", {}).get("causes") or []
            return [
                Cause(str(c.get("field", "")), str(c.get("message", "")), str(c.get("reason", "")))
                for c in found
                if isinstance(c, dict)
            ]
        except (ValueError, TypeError, AttributeError):
            return []


class Unauthorized(ApiError):
    """401: the credential was not accepted."""


class Forbidden(ApiError):
    """403: RBAC (or an admission policy) refuses the caller."""


class NotFound(ApiError):
    """404: no such object (or no such kind)."""


class Conflict(ApiError):
    """409: the name is taken (AlreadyExists), or the object changed since it was read."""


class Invalid(ApiError):
    """400 or 422: the request itself is refused (the schema's rules, a webhook's denial); its
    ``causes`` name the fields."""


class Unavailable(ApiError):
    """429 or 5xx: the API server (or what stands behind it) cannot answer now."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    429: Unavailable,
}


def translated(error: client.ApiException | sync_client.ApiException) -> ApiError:
    """The typed error for the client's ``error``."""
    status = int(error.status or 0)
    kind = _BY_STATUS.get(status, Unavailable if status >= 500 else ApiError)
    headers = error.headers or {}
    body = error.body if isinstance(error.body, str) else ""
    return kind(status, error.reason, body, headers.get("Retry-After"))


@contextlib.contextmanager
def translating() -> Iterator[None]:
    """Raises the typed error for the client's ApiException raised within."""
    try:
        yield
    except _API_EXCEPTIONS as error:
        raise translated(error) from None


async def _awaited(answer: Awaitable[Any]) -> Any:
    with translating():
        return await answer


class _Translating:
    """An API group's handle whose calls raise ``ApiError``s: each method called through it
    (its coroutine awaited, for the async client) under ``translating``."""

    def __init__(self, api: object) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._api, name)
        if name.startswith("_") or not callable(found):
            return found

        @functools.wraps(found)
        def call(*args: Any, **kwargs: Any) -> Any:
            with translating():
                answer = found(*args, **kwargs)
            return _awaited(answer) if inspect.isawaitable(answer) else answer

        return call


def translate(api: T) -> T:
    """``api`` (a client's ``CoreV1Api``, ``CustomObjectsApi``, ``ApiClient``...) with every
    call's ApiException turned into an ``ApiError``."""
    return cast(T, _Translating(api))
