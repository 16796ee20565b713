"""Injected credentials are scrubbed from what upstreams send back, even split across chunks."""

from __future__ import annotations

import asyncio
import base64
import html
import itertools
import json
from collections.abc import AsyncIterator
from urllib.parse import quote, quote_plus

import pytest

from gatehouse_contract import sent_forms
from gatehouse_contract.redaction import (
    FRAGMENT_BYTES,
    REDACTED,
    BodyScrubber,
    Prefix,
    Redactor,
    scrub,
    scrubbed,
    scrubbed_prefix,
)
from gatehouse_dev.echoes import FORMS, leaks
from gatehouse_proxy.rules.headers import app_response_headers

SECRET = "sk live/42"  # a space and a slash: its URL-encoded form differs


def _stream(body: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def _scrub_chunks(chunks: list[bytes]) -> bytes:
    scrubber = BodyScrubber(Redactor([SECRET]))
    return b"".join([scrubber.feed(chunk) for chunk in chunks] + [scrubber.flush()])


BODY = f'{{"echo": "{SECRET}", "next": "/v1?key=sk%20live%2F42&page=2"}}'.encode()
EXPECTED = b'{"echo": "[redacted]", "next": "/v1?key=[redacted]&page=2"}'


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_a_secret_split_anywhere_is_scrubbed(cut: int) -> None:
    assert _scrub_chunks(_stream(BODY, [cut])) == EXPECTED


def test_byte_by_byte_and_whole() -> None:
    assert _scrub_chunks([bytes([b]) for b in BODY]) == EXPECTED
    assert _scrub_chunks([BODY]) == EXPECTED


def test_percent_encoding_in_either_hex_case_and_plus_for_space() -> None:
    assert scrub("k=sk+live%2f42 k=sk%20live%2F42", [SECRET]) == f"k={REDACTED} k={REDACTED}"


def test_json_escaped_forms_are_scrubbed() -> None:
    secret = 'a"b\\c'
    assert scrub('{"k": "a\\"b\\\\c"}', [secret]) == f'{{"k": "{REDACTED}"}}'


def test_other_bytes_pass_unchanged_and_nothing_is_lost() -> None:
    body = bytes(range(256)) * 40
    assert _scrub_chunks(_stream(body, [1, 7, 300, 5000])) == body


def test_the_async_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in _stream(BODY, [5, 17, 18, 40]):
            yield chunk

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in scrubbed(chunks(), Redactor([SECRET]))])

    assert asyncio.run(collect()) == EXPECTED


def _prefix(chunks: list[bytes], limit: int) -> tuple[Prefix, int]:
    """The prefix kept of ``chunks``, and how many chunks were scrubbed (paced)."""
    paced = 0

    async def pace() -> None:
        nonlocal paced
        paced += 1

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return asyncio.run(scrubbed_prefix(body(), Redactor([SECRET]), limit, pace)), paced


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_a_prefix_is_scrubbed_wherever_the_chunks_and_the_limit_fall(cut: int) -> None:
    whole, _ = _prefix(_stream(BODY, [cut]), 10_000)
    assert whole == Prefix(EXPECTED, len(BODY), whole=True)
    part, _ = _prefix(_stream(BODY, [cut]), cut)
    assert part.data == EXPECTED[:cut]
    assert SECRET.encode() not in part.data
    assert (part.size, part.whole) == (len(BODY), cut >= len(EXPECTED))


def test_past_the_prefix_chunks_are_counted_not_scrubbed() -> None:
    chunks = [BODY] * 1_000
    prefix, paced = _prefix(chunks, len(EXPECTED) * 3)
    assert prefix == Prefix(EXPECTED * 3, len(BODY) * 1_000, whole=False)
    # The prefix and the scrubber's carry-over (a secret's longest escaped form) only.
    assert paced < 10


TOKEN = "sk_live~4/2+Zq.9x"  # characters that encoders treat differently


def _every_escape(char: str) -> list[str]:
    byte = ord(char)
    return [
        f"%{byte:02x}",
        f"%{byte:02X}",
        f"\\u{byte:04x}",
        f"\\u{byte:04X}",
        f"&#{byte};",
        f"&#x{byte:x};",
        f"&#X{byte:02X};",
    ]


@pytest.mark.parametrize(
    "echo",
    [
        TOKEN.replace("/", "\\/"),  # JSON's escaped slash
        TOKEN.replace("~", "%7E"),  # a character clients leave unencoded
        TOKEN.replace("~", "%7e").replace("/", "%2F"),  # mixed-case hex
        TOKEN.replace("+", "&#43;"),  # HTML entity
        TOKEN.replace("+", "&plus;").replace("/", "&sol;"),
        "".join(f"\\u{ord(char):04x}" for char in TOKEN),  # JSON \uXXXX throughout
        "".join(f"&#x{ord(char):x};" for char in TOKEN),
        "".join(f"%{ord(char):02x}" for char in TOKEN),
    ],
)
def test_escaped_echoes_are_scrubbed(echo: str) -> None:
    body = f'{{"error": "bad key {echo}", "n": 1}}'.encode()
    scrubbed_body = _scrub_chunks_of(body, TOKEN)
    assert scrubbed_body == b'{"error": "bad key [redacted]", "n": 1}'


def test_every_escape_of_every_character_split_anywhere() -> None:
    for index, char in enumerate(TOKEN):
        for escape in _every_escape(char):
            echo = TOKEN[:index] + escape + TOKEN[index + 1 :]
            body = f"<p>{echo}</p>".encode()
            for cut in range(1, len(body)):
                assert _scrub_chunks_of(body, TOKEN, [cut]) == b"<p>[redacted]</p>", (echo, cut)


@pytest.mark.parametrize("pad", [b"", b"u", b"us"])
def test_base64_inside_a_longer_base64_string(pad: bytes) -> None:
    encoded = base64.b64encode(pad + b"user:" + TOKEN.encode() + b"\n").decode()
    for form in (encoded, encoded.replace("+", "-").replace("/", "_")):
        scrubbed_body = _scrub_chunks_of(f"Basic {form}".encode(), TOKEN).decode()
        assert REDACTED in scrubbed_body
        assert base64.b64encode(TOKEN.encode()).decode()[2:-2] not in scrubbed_body


def test_short_values_do_not_blank_unrelated_base64() -> None:
    body = base64.b64encode(b"abc" * 100)
    assert _scrub_chunks_of(body, "abc123") == body


def test_headers_lose_json_and_html_escaped_echoes() -> None:
    kept = dict(
        app_response_headers(
            [
                ("Link", "<https://x.example/?k=sk_live~4\\/2+Zq.9x>"),
                ("Content-Disposition", 'attachment; filename="sk_live&#126;4/2&#43;Zq.9x"'),
            ],
            redact=Redactor([TOKEN]),
            media_type=None,
        )
    )
    assert kept == {
        "link": "<https://x.example/?k=[redacted]>",
        "content-disposition": 'attachment; filename="[redacted]"',
    }


def test_a_json_body_full_of_escapes_keeps_every_other_byte() -> None:
    body = json.dumps(
        [{"url": f"https://x.example/a/{n}?q=%20&r=&amp;", "s": "\\"} for n in range(500)]
    )
    assert _scrub_chunks_of(body.encode(), TOKEN, [7, 4000, 9000]) == body.encode()


def _scrub_chunks_of(
    body: bytes, secret: str, cuts: list[int] | None = None, redact: Redactor | None = None
) -> bytes:
    scrubber = BodyScrubber(redact or Redactor([secret]))
    chunks = _stream(body, cuts or [len(body) // 2])
    return b"".join([scrubber.feed(chunk) for chunk in chunks] + [scrubber.flush()])


# The red team's forms (round 3, N7): what an upstream did with an echoed credential that app
# code can undo. Each is caught in a body, whole and split across chunks at every offset.
KEY = "VENDOR-TOKEN-0123456789-abcdef"
URLISH = "sk live/AbC+xyz=09&q"  # characters that every encoder treats its own way
LONG = "ghp_" + "Ab9" * 40  # its base64 (168 characters) crosses a line at 64 and 76


@pytest.mark.parametrize("secret", [KEY, URLISH, LONG], ids=["key", "urlish", "long"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_echo_in_each_form_is_scrubbed_whole_and_split_at_every_offset(
    form: str, secret: str
) -> None:
    if form == "amp-unterminated" and "&" not in secret:
        pytest.skip("no & in the secret")
    echo = FORMS[form](secret)
    assert leaks(echo, secret), "the form itself reads as the secret"
    body = b"<p>pre " + echo + b" post</p>"
    whole = Redactor([secret])(body)
    assert not leaks(whole, secret), whole
    assert whole.startswith(b"<p>pre ")
    assert whole.endswith(b" post</p>")
    cuts = range(1, len(body)) if secret != LONG else range(1, len(body), 7)
    for cut in cuts:
        scrubbed_body = _scrub_chunks_of(body, secret, [cut])
        assert not leaks(scrubbed_body, secret), (cut, scrubbed_body)


def test_zero_padding_of_any_length_is_read_across_chunks() -> None:
    """A reference padded with more zeros than a chunk holds: the extra zeros go (the same
    character to any reader), so the carry-over still holds the whole escape."""
    echo = b"&#" + b"0" * 200_000 + b"86;" + KEY[1:].encode()
    body = b"<p>" + echo + b"</p>"
    scrubbed_body = _scrub_chunks_of(body, KEY, list(range(65536, len(body), 65536)))
    assert scrubbed_body == b"<p>[redacted]</p>"
    padded = b"<p>&#x" + b"0" * 100 + b"41; &#" + b"0" * 9 + b"66</p>"
    assert html.unescape(Redactor([KEY])(padded).decode()) == "<p>A B</p>"


def test_an_unterminated_reference_ends_where_its_digits_end() -> None:
    redact = Redactor(["abc1"])
    # &#991 is one character (991), not "c" then "1"; &#99 before a letter is "c".
    assert redact(b"ab&#991") == b"ab&#991"
    assert redact(b"ab&#x631") == b"ab&#x631"
    assert redact(b"ab&#99;1 ab&#991;") == b"[redacted] ab&#991;"
    assert redact(b"ab&#x63 1") == b"ab&#x63 1"
    assert redact(b"ab&#99&#49 ab&#x63&#x31") == b"[redacted] [redacted]"
    # Split anywhere (after its digits too), a reference is read as it is read whole: once the
    # next chunk says where it ends.
    for body in (b"<ab&#991>", b"<ab&#99;1>", b"<ab&#x63;1>", b"<ab&#x631>", b"<ab&#99>"):
        whole = redact(body)
        for cut in range(1, len(body)):
            assert _scrub_chunks_of(body, "abc1", [cut]) == whole, (body, cut)


def test_a_utf16_body_still_decodes_after_the_value_goes() -> None:
    for codec in ("utf-16", "utf-16-le", "utf-16-be"):
        body = f'{{"echo": "{KEY}", "n": 1}}'.encode(codec)
        assert Redactor([KEY])(body).decode(codec) == '{"echo": "[redacted]", "n": 1}'


def test_a_header_loses_any_piece_of_a_value_of_eight_bytes_or_more() -> None:
    assert FRAGMENT_BYTES == 8
    redact = Redactor([KEY])
    halves = [f"<https://x.example/?a={KEY[:15]}>", f"<https://x.example/?b={KEY[15:]}>"]
    assert redact.headers(halves) == [
        "<https://x.example/?a=[redacted]>",
        "<https://x.example/?b=[redacted]>",
    ]
    # Escaped or in another case, a piece is a piece.
    assert redact.headers([f"/?a={KEY[3:11].lower()}", f"/?b={quote(KEY[11:19], safe='')}"]) == [
        "/?a=[redacted]",
        "/?b=[redacted]",
    ]
    thirds = [URLISH[:7], URLISH[7:14], URLISH[14:]]
    link = ", ".join(f"<https://x.example/?p={quote(piece, safe='')}>" for piece in thirds)
    # Pieces of seven bytes stay: the documented limit.
    assert Redactor([URLISH]).headers([link]) == [link]
    assert Redactor([URLISH]).headers([quote(URLISH[:8])]) == ["[redacted]"]
    # Other header values are left alone, whatever they share with the value below 8 bytes.
    kept = ["application/json", '"VENDOR-"', "max-age=0123456", 'W/"abcdef01"']
    assert redact.headers(kept) == kept


@pytest.mark.parametrize(
    "secret",
    ["c2VjcmV0LXZhbHVlLTEy==", "45abcdef0123456789", "sk=live=42"],
    ids=["base64 padding", "hex digits first", "equals signs"],
)
def test_an_equals_sign_beside_a_value_is_no_quoted_printable_to_it(secret: str) -> None:
    """An equals sign ends many a line and a base64 value and begins many a query value: read
    as quoted-printable, the value beside it would not be seen whole."""
    for body in (
        f"token: {secret}\nnext: 1\r\n".encode(),
        f"<https://x.example/?key={secret}&page=2>".encode(),
        f"key={secret}=\r\nmore".encode(),
    ):
        assert secret.encode() not in Redactor([secret])(body), body
        assert secret not in Redactor([secret]).headers([body.decode()])[0], body


# What the proxy sends (sent_forms): the scrubber is given those forms and reads one encoding
# more of each (red team round 4, R4-3 and R4-4).
SPECIAL = "Sx9+kQ/7vZ=m2Lp+Wr4/Tn8="  # a base64-style secret: form encoding changes + / =


@pytest.mark.parametrize("secret", [SPECIAL, "cs_live+/ secret=&%", "PlainSecret0123456789"])
def test_a_client_secret_is_scrubbed_in_its_basic_pair_as_sent(secret: str) -> None:
    sent = sent_forms.client_basic("gh-client", secret)
    encoded = sent.value.removeprefix("Basic ")
    pair = base64.b64decode(encoded).decode()
    echoes = [
        sent.value,  # the header, as a provider quotes it
        pair,  # decoded: the pair still form-encoded
        pair.lower(),
        quote(encoded, safe=""),  # the header's base64 in a URL
        encoded.replace("+", "-").replace("/", "_").rstrip("="),  # as base64url
        encoded.encode().hex(),
        base64.b64encode(sent.value.encode()).decode(),  # the whole header in base64
    ]
    redact = Redactor(sent.forms)
    for echo in echoes:
        scrubbed_text = redact.text(f'{{"error_description": "bad credentials: {echo}"}}')
        assert REDACTED in scrubbed_text, echo
        assert not leaks(scrubbed_text.encode(), secret), (echo, scrubbed_text)
    assert sent.forms[0] == secret


@pytest.mark.parametrize("sender", ["query", "header", "form"])
@pytest.mark.parametrize("secret", [SPECIAL, "sk live/42", "Qk7+vZ/9xY=aB3+cD4/eF5="])
def test_every_form_sent_is_scrubbed_and_percent_encoded_once_more(
    sender: str, secret: str
) -> None:
    """A URL that embeds the request's own (a return_to or self link) encodes what the proxy
    sent once more: a query key's %2B becomes %252B (or %252b). The secret percent-encoded twice
    is caught whatever it was sent as, a space as %2520 or %2B."""
    sent = {
        "query": sent_forms.query_value,
        "header": sent_forms.header_value,
        "form": sent_forms.form_field,
    }[sender](secret)
    redact = Redactor(sent.forms)
    twice = [quote(quote(secret, safe=""), safe=""), quote_plus(quote_plus(secret))]
    twice += [quote_plus(quote(secret, safe="")), quote(quote_plus(secret), safe="")]
    echoes = {
        *sent.forms,
        *(quote(form, safe="") for form in sent.forms),
        *(quote_plus(form) for form in sent.forms),
        *twice,
        *(echo.lower() for echo in twice),
    }
    for echo in echoes:
        body = f"<a href='https://x.example/login?return_to={echo}&n=1'>".encode()
        for cut in range(1, len(body), 5):
            scrubbed_body = _scrub_chunks_of(body, "", [cut], redact)
            assert (
                scrubbed_body == b"<a href='https://x.example/login?return_to=[redacted]&n=1'>"
            ), (
                echo,
                cut,
            )


def test_a_percent_twice_reading_leaves_a_value_with_a_percent_of_its_own() -> None:
    """%25 read once is a "%" a value may hold as it is: both readings are tried."""
    secret = "pw%2Bwith%41escapes"
    for echo in (quote(secret, safe=""), quote(quote(secret, safe=""), safe="")):
        assert Redactor([secret]).text(f"k={echo};") == "k=[redacted];", echo
    assert Redactor(["a+b/c0123"]).text("x%2525y %252 %25") == "x%2525y %252 %25"
