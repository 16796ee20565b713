"""Redaction and size caps for what a connection answered: test results and saved samples.

A sample tells the app generator the shape of an API's responses, so it keeps structure and drops
what must never be shown: the connection's own secret wherever it appears, and the value of every
key that usually holds a credential, at any depth. Keys match whatever their case or separators
(``access_token``, ``accessToken`` and ``Access-Token`` are one key); in free text, values written
as ``key=value`` or ``key: value`` after such a key are replaced too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from gatehouse_operator.api.connection_test import SAMPLE_LABEL_CHARS, SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.conditions import Verdict, condition
from gatehouse_proxy.redaction import REDACTED, scrub

SENSITIVE_KEYS = frozenset(
    {
        "authorization",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "refresh_token",
        "secret",
        "password",
        "x-api-key",
        "private_key",
        "client_secret",
    }
)
MAX_ARRAY_ITEMS = 50
MAX_SAMPLE_BYTES = 16 * 1024
MAX_SAMPLES_PER_CONNECTION = 20
_SEPARATORS = re.compile(r"[-_\s]")
_NORMALISED = frozenset(_SEPARATORS.sub("", key) for key in SENSITIVE_KEYS)


def _spelled_any_way(key: str) -> str:
    return "[-_ ]?".join(re.escape(char) for char in key)


# ``key=value``, ``key: value`` and ``"key": "value"`` inside free text: form bodies, query
# strings, header dumps, JSON that an API returns as a string. Only sensitive keys are matched, so
# a pair such as ``https://host/?access_token=...`` cannot hide inside the "value" of ``https:``.
# Keys start and end at word boundaries, so ``tokens_used`` stays.
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<key>"
    + "|".join(_spelled_any_way(key) for key in sorted(_NORMALISED, key=len, reverse=True))
    + r")(?![A-Za-z0-9_-])(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<value>(?:(?:Bearer|Basic|Token)\s+)?[^\"'&\s,;}]+)",
    re.IGNORECASE,
)


def is_sensitive(key: str) -> bool:
    return _SEPARATORS.sub("", key.lower()) in _NORMALISED


def _scrub_text(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without the secrets, and without values given to sensitive keys."""

    return _PAIR.sub(lambda pair: f"{pair['key']}{pair['sep']}{REDACTED}", scrub(text, secrets))


def redact(value: Any, secrets: Iterable[str], *, max_items: int | None = None) -> Any:
    """``value`` with sensitive keys' values replaced, secrets scrubbed, arrays optionally cut."""
    secrets = tuple(secrets)
    if isinstance(value, dict):
        return {
            key: REDACTED if is_sensitive(key) else redact(item, secrets, max_items=max_items)
            for key, item in value.items()
        }
    if isinstance(value, list):
        kept = value if max_items is None else value[:max_items]
        return [redact(item, secrets, max_items=max_items) for item in kept]
    if isinstance(value, str):
        return _scrub_text(value, secrets)
    return value


def _parsed(body: str, content_type: str) -> Any:
    """The body as JSON when it is JSON, else None (a JSON ``null`` body is not worth keeping)."""
    if "json" not in content_type.lower() and not body.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def redacted_text(body: str, content_type: str, secrets: Iterable[str]) -> str:
    """A body for people to read: JSON keeps its layout with sensitive values replaced."""
    secrets = tuple(secrets)
    document = _parsed(body, content_type)
    if document is None:
        return _scrub_text(body, secrets)
    return json.dumps(redact(document, secrets), ensure_ascii=False)


def sample_body(body: str, content_type: str, secrets: Iterable[str]) -> Any:
    """The body as a sample: redacted, arrays cut to 50 items, at most 16 KiB of JSON.

    A larger result becomes ``{"truncated": true, "preview": <the first characters>}``, still
    redacted, so the generator sees at least the beginning of the shape.
    """
    secrets = tuple(secrets)
    document = _parsed(body, content_type)
    kept = (
        _scrub_text(body, secrets)
        if document is None
        else redact(document, secrets, max_items=MAX_ARRAY_ITEMS)
    )
    encoded = json.dumps(kept, ensure_ascii=False)
    if len(encoded.encode()) <= MAX_SAMPLE_BYTES:
        return kept
    preview = encoded.encode()[: MAX_SAMPLE_BYTES - 64].decode(errors="ignore")
    return {"truncated": True, "preview": preview}


def save_refusal(status: dict[str, Any], label: str) -> Verdict | None:
    """Why a finished test cannot be saved with ``label`` (None: it can). The service API asks
    the same before it sets the annotation, so its callers need not wait for the operator."""
    if status.get("sample"):
        return Verdict(
            "SampleSaved", "False", "AlreadySaved", f"saved already as sample {status['sample']!r}"
        )
    if not 1 <= len(label.strip()) <= SAMPLE_LABEL_CHARS:
        return Verdict(
            "SampleSaved",
            "False",
            "InvalidLabel",
            f"metadata.annotations[{SAVE_AS_SAMPLE_ANNOTATION}]: a label of 1 to "
            f"{SAMPLE_LABEL_CHARS} characters",
        )
    passed = condition(status, "Passed")
    if passed.get("status") != "True":
        return Verdict(
            "SampleSaved", "False", "TestFailed", "only a passing test is saved as a sample"
        )
    if status.get("sampleBody") is None:
        return Verdict(
            "SampleSaved",
            "False",
            "NoSampleBody",
            "this test finished before tests kept their sample body: run the test again",
        )
    return None
