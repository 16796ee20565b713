"""Redaction and caps for test results and samples, one rule per case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gatehouse_operator.api.stored import StoredConnectionTestStatus
from gatehouse_operator.connections import samples

SECRET = "sk-0123456789"


@pytest.mark.parametrize("key", sorted(samples.SENSITIVE_KEYS))
def test_every_sensitive_key_is_redacted_at_any_depth(key: str) -> None:
    document = {"a": [{"b": {key: "value", "kept": 1}}]}
    assert samples.redact(document, ()) == {"a": [{"b": {key: "[redacted]", "kept": 1}}]}


@pytest.mark.parametrize("key", ["accessToken", "Access-Token", "CLIENT_SECRET", "X_Api_Key"])
def test_keys_match_whatever_their_case_or_separators(key: str) -> None:
    assert samples.redact({key: {"nested": "x"}}, ()) == {key: "[redacted]"}


@pytest.mark.parametrize("key", ["tokens_used", "secretary", "password_hint_shown", "author"])
def test_lookalike_keys_are_kept(key: str) -> None:
    assert samples.redact({key: "x"}, ()) == {key: "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key={SECRET}", "key=[redacted]"),
        (f"key={SECRET.replace('-', '%2D')}", "key=[redacted]"),  # an escape no encoder needs
        ("a=1&api_key=abc&b=2", "a=1&api_key=[redacted]&b=2"),
        ("Authorization: Bearer abc.def", "Authorization: [redacted]"),
        ('{"refresh_token": "r-1"}', '{"refresh_token": "[redacted]"}'),
        ("tokens: 12", "tokens: 12"),
        (
            "next: https://x.example/cb?access_token=abc&b=1",
            "next: https://x.example/cb?access_token=[redacted]&b=1",
        ),
        (
            '{"next": "https://x.example/?apiKey=abc"}',
            '{"next": "https://x.example/?apiKey=[redacted]"}',
        ),
        ("x-api-key: abc, tokens_used=3", "x-api-key: [redacted], tokens_used=3"),
    ],
)
def test_free_text_loses_secrets_and_sensitive_pairs(text: str, expected: str) -> None:
    assert samples.redact(text, (SECRET,)) == expected


def test_the_secret_is_scrubbed_as_sent_and_as_encoded() -> None:
    secret = "a b/c"
    body = json.dumps({"echo": f"x {secret} y", "url": "q=a%20b%2Fc"})
    shown = samples.views(body, "application/json", (secret,))
    for view in (shown.text, json.dumps(shown.sample)):
        assert secret not in view
        assert "a%20b%2Fc" not in view


def test_a_sample_cuts_arrays_to_fifty_items() -> None:
    body = json.dumps({"items": list(range(120)), "rows": [[0] * 80]})
    sample = samples.views(body, "application/json", ()).sample
    assert len(sample["items"]) == 50
    assert len(sample["rows"][0]) == 50


def test_a_large_sample_becomes_a_marked_preview() -> None:
    body = json.dumps({"text": "x" * 40_000, "token": "t"})
    sample: Any = samples.views(body, "application/json", ()).sample
    assert sample["truncated"] is True
    assert len(json.dumps(sample).encode()) <= samples.MAX_SAMPLE_BYTES + 64
    assert '"t"' not in sample["preview"]


def test_a_text_body_is_kept_as_redacted_text() -> None:
    sample = samples.views(f"ok {SECRET}\npassword=hunter2", "text/plain", (SECRET,)).sample
    assert sample == "ok [redacted]\npassword=[redacted]"


def test_the_test_result_keeps_json_layout_and_all_items() -> None:
    body = json.dumps({"items": list(range(60)), "token": "t"})
    shown = json.loads(samples.views(body, "application/json; charset=utf-8", ()).text)
    assert shown == {"items": list(range(60)), "token": "[redacted]"}


@pytest.mark.parametrize(
    ("prefix", "document", "lossless"),
    [
        ("[1, 2, 3", [1, 2], False),  # the last number may go on: only whole values stay
        ('{"a": [1, 2], "b": "x, ]y', {"a": [1, 2]}, False),  # a cut inside a string
        ('{"a": "x,}y", "b": {"c": [1, 2, 3], "d"', {"a": "x,}y", "b": {"c": [1, 2, 3]}}, False),
        ('{"items": [', {"items": []}, False),
        ('"just a string', None, False),
        ("12345", None, False),
    ],
)
def test_a_json_prefix_is_closed_after_its_last_whole_value(
    prefix: str, document: Any, lossless: bool
) -> None:
    closed = samples.closed_prefix(prefix)
    assert (closed is None) is (document is None)
    if closed is not None:
        assert closed == (document, lossless)


def test_a_sample_of_a_cut_array_is_the_whole_answers_sample() -> None:
    """A long list cut past its 50th item loses nothing a sample keeps."""
    whole = json.dumps([{"id": n, "token": "t"} for n in range(2_000)])
    cut = whole[:10_000]
    assert samples.views(cut, "application/json", (), cut=True).sample == (
        samples.views(whole, "application/json", ()).sample
    )


def test_a_sample_of_a_cut_object_says_it_is_a_preview() -> None:
    whole = json.dumps({"items": list(range(5_000)), "next": "cursor-1"})
    shown = samples.views(whole[:2_000], "application/json", (), cut=True)
    assert shown.sample["truncated"] is True
    assert shown.text.startswith('{"items": [0, 1, 2')


def test_json_nested_deeper_than_python_recurses_is_shown_as_text() -> None:
    body = "[" * 50_000
    for cut in (False, True):
        shown = samples.views(body, "application/json", (), cut=cut)
        assert shown.text == body
        assert shown.sample["truncated"] is True


def test_a_tests_request_body_is_kept_redacted_and_capped() -> None:
    sent = samples.sent(
        {"query": "q", "api_key": "k1", "rows": list(range(80)), "note": "password=hunter2"},
        ["s3cret"],
    )
    assert sent == {
        "query": "q",
        "api_key": "[redacted]",
        "rows": list(range(samples.MAX_ARRAY_ITEMS)),
        "note": "password=[redacted]",
    }
    assert samples.sent(None, []) is None
    big = samples.sent({"text": "x" * 40_000}, [])
    assert big["truncated"] is True
    assert len(json.dumps(big).encode()) <= samples.MAX_SAMPLE_BYTES


def test_what_a_tester_typed_is_scrubbed() -> None:
    assert samples.typed("/v1/items?page=2&api_key=k-123&access_token=t") == (
        "/v1/items?page=2&api_key=[redacted]&access_token=[redacted]"
    )
    assert samples.typed("/v1/items?page_token=abc") == "/v1/items?page_token=abc"


def test_a_sample_label_is_optional() -> None:
    passed = {"conditions": [{"type": "Passed", "status": "True"}], "sampleBody": {}}
    status = StoredConnectionTestStatus.model_validate(passed)
    assert samples.save_refusal(status, "") is None
    refused = samples.save_refusal(status, "x" * 201)
    assert refused is not None
    assert "at most 200 characters (or none)" in refused.message
