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
from dataclasses import dataclass
from typing import Any

from gatehouse_contract.redaction import REDACTED, Redactor
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.connection_test import SAMPLE_LABEL_CHARS, SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.api.stored import StoredConnectionTestStatus
from gatehouse_operator.status import Verdict

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


class Redaction:
    """One answer's redaction: the secrets' forms are compiled once, then used for each of its
    strings (a JSON answer has thousands)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._scrub = Redactor(secrets).text

    def text(self, text: str) -> str:
        """``text`` without the secrets, and without values given to sensitive keys."""
        return _PAIR.sub(lambda pair: f"{pair['key']}{pair['sep']}{REDACTED}", self._scrub(text))

    def value(self, value: Any) -> Any:
        """``value`` with sensitive keys' values replaced and secrets scrubbed, at any depth."""
        if isinstance(value, dict):
            return {
                key: REDACTED if is_sensitive(key) else self.value(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def redact(value: Any, secrets: Iterable[str]) -> Any:
    return Redaction(secrets).value(value)


def _cut_arrays(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _cut_arrays(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_arrays(item) for item in value[:MAX_ARRAY_ITEMS]]
    return value


def _json_like(body: str, content_type: str) -> bool:
    return "json" in content_type.lower() or body.lstrip().startswith(("{", "["))


# What matters to where a JSON text may be cut: whole strings (skipped), brackets, commas, and a
# quote no closing quote follows (the string the cut fell into).
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|"|[\[\]{},]')
_CLOSING = {"[": "]", "{": "}"}


class _Open:
    """A container open at some point of the text: its bracket, the commas seen in it, and
    whether the item after the last comma is whole yet."""

    def __init__(self, bracket: str) -> None:
        self.bracket = bracket
        self.commas = 0
        self.item_done = False


def _last_cut(text: str) -> int | None:
    """The last place a cut leaves whole values only: after an opening or closing bracket
    inside the top-level container, or before a comma. None when there is none."""
    depth = 0
    cut = None
    for token in _JSON_TOKEN.finditer(text):
        char = token[0]
        if char == '"':
            break  # an unterminated string: nothing after it is structure
        if char in _CLOSING:
            depth += 1
            cut = token.end()
        elif char in "]}":
            depth -= 1
            if depth < 1:
                return None  # the top level closed: not a cut document
            cut = token.end()
        elif char == ",":
            if depth < 1:
                return None
            cut = token.start()
    return cut


def _open_at(text: str) -> list[_Open]:
    """The containers still open at the end of ``text``, which ends at a cut."""
    stack: list[_Open] = []
    for token in _JSON_TOKEN.finditer(text):
        char = token[0]
        if char in _CLOSING:
            stack.append(_Open(char))
        elif char in "]}":
            stack.pop()
            stack[-1].item_done = True
        elif char == ",":
            stack[-1].commas += 1
            stack[-1].item_done = False
    if text[-1] not in _CLOSING:
        stack[-1].item_done = True  # a cut before a comma ends a whole value
    return stack


def closed_prefix(text: str) -> tuple[Any, bool] | None:
    """The beginning of a JSON document cut anywhere, as a document: cut after its last whole
    value and closed. None when there is none (a cut inside a top-level string or number).

    The flag says whether a sample of it equals a sample of the whole document: true when the
    cut falls past the top-level array's MAX_ARRAY_ITEMS-th item (the sample cuts it there
    anyway); false when anything the sample would have kept was lost.
    """
    end = _last_cut(text)
    if end is None:
        return None
    still_open = _open_at(text[:end])
    closing = "".join(_CLOSING[open_.bracket] for open_ in reversed(still_open))
    try:
        document = json.loads(text[:end] + closing)
    except (ValueError, RecursionError):
        return None
    # Past the top-level array's 50th item, the sample keeps nothing more; anything open before
    # that point lost what the sample would have kept.
    top = still_open[0]
    return document, top.bracket == "[" and top.commas + top.item_done >= MAX_ARRAY_ITEMS


@dataclass(frozen=True)
class Views:
    """One answer as people see it (``text``: JSON keeps its layout) and as a sample keeps it
    (redacted, arrays cut to 50 items, at most 16 KiB of JSON, else the start as a preview)."""

    text: str
    sample: Any


def views(body: str, content_type: str, secrets: Iterable[str], *, cut: bool = False) -> Views:
    """Both views of an answer, parsed once and redacted once. ``cut``: ``body`` is only the
    beginning of the answer (the proxy keeps a prefix), so a JSON body is closed after its last
    whole value, and a sample that could differ from the whole answer's is a preview."""
    redaction = Redaction(secrets)
    document, complete = _document(body, content_type, cut)
    if document is not None:
        try:
            redacted = redaction.value(document)
            return Views(
                json.dumps(redacted, ensure_ascii=False), _capped(_cut_arrays(redacted), complete)
            )
        except RecursionError:
            pass  # nested deeper than Python recurses: shown as text, like any other text
    text = redaction.text(body)
    return Views(text, _capped(text, not cut))


def _document(body: str, content_type: str, cut: bool) -> tuple[Any, bool]:
    """The body as JSON (None when it is not, or is a JSON ``null``, not worth keeping), and
    whether it is the whole answer's sample."""
    if not _json_like(body, content_type):
        return None, False
    if cut:
        return closed_prefix(body) or (None, False)
    try:
        return json.loads(body), True
    except (ValueError, RecursionError):
        return None, False


def _capped(kept: Any, complete: bool) -> Any:
    """A sample of at most 16 KiB of JSON; a larger one, or one of a part of the answer that
    could differ from the whole's, becomes ``{"truncated": true, "preview": <its start>}``,
    still redacted, so the generator sees at least the beginning of the shape."""
    encoded = json.dumps(kept, ensure_ascii=False).encode()
    if complete and len(encoded) <= MAX_SAMPLE_BYTES:
        return kept
    preview = encoded[: MAX_SAMPLE_BYTES - 64].decode(errors="ignore")
    return {"truncated": True, "preview": preview}


def sent(body: Any, secrets: Iterable[str]) -> Any:
    """A test's JSON request body as a sample keeps it: redacted, arrays cut and size-capped as
    the answer is."""
    if body is None:
        return None
    try:
        return _capped(_cut_arrays(Redaction(secrets).value(body)), complete=True)
    except RecursionError:
        return {"truncated": True, "preview": ""}


def typed(path: str) -> str:
    """A path and query as a tester typed it, as it is kept and shown: the values of keys that
    usually hold a credential replaced (the connection's own secret is scrubbed again where the
    operator knows it)."""
    return Redaction(()).text(path)


def typed_credentials(path: str) -> list[str]:
    """The keys of ``path`` whose values :func:`typed` would replace, as written (empty: it
    keeps ``path`` as it is). A value already replaced does not count, so a path that went
    through :func:`typed` has none."""
    return sorted({pair["key"] for pair in _PAIR.finditer(path) if pair["value"] != REDACTED})


def save_refusal(status: StoredConnectionTestStatus, label: str) -> Verdict | None:
    """Why a finished test cannot be saved with ``label`` (None: it can). The service API asks
    the same before it sets the annotation, so its callers need not wait for the operator."""
    if status.sample:
        return Verdict(
            ConditionType.SAMPLE_SAVED,
            "False",
            Reason.ALREADY_SAVED,
            f"saved already as sample {status.sample!r}",
        )
    if len(label.strip()) > SAMPLE_LABEL_CHARS:
        return Verdict(
            ConditionType.SAMPLE_SAVED,
            "False",
            Reason.INVALID_LABEL,
            f"metadata.annotations[{SAVE_AS_SAMPLE_ANNOTATION}]: a label of at most "
            f"{SAMPLE_LABEL_CHARS} characters (or none)",
        )
    passed = status.condition(ConditionType.PASSED)
    if passed.status != "True":
        return Verdict(
            ConditionType.SAMPLE_SAVED,
            "False",
            Reason.TEST_FAILED,
            "only a passing test is saved as a sample",
        )
    if status.sample_body is None:
        return Verdict(
            ConditionType.SAMPLE_SAVED,
            "False",
            Reason.NO_SAMPLE_BODY,
            "this test finished before tests kept their sample body: run the test again",
        )
    return None
