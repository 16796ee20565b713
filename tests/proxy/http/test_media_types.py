"""The type a browser reads in an answer's Content-Type: the WHATWG algorithms, held to the cases
web-platform-tests holds browsers to (mimesniff/mime-types, fetch/content-type), and to what an
upstream may send to slip another type past a simpler reading."""

from __future__ import annotations

import pytest

from gatehouse_proxy.http import media_types
from gatehouse_proxy.http.media_types import MAX_CHARS, MediaType, extract, parse

# (input, its serialisation once parsed; None: not a media type). From web-platform-tests'
# mimesniff/mime-types/resources/mime-types.json.
PARSED = [
    ("text/html;charset=gbk", "text/html;charset=gbk"),
    ("TEXT/HTML;CHARSET=GBK", "text/html;charset=GBK"),
    ("text/html;charset=gbk(", 'text/html;charset="gbk("'),
    ("text/html;x=(;charset=gbk", 'text/html;x="(";charset=gbk'),
    ("text/html;charset=gbk;charset=windows-1255", "text/html;charset=gbk"),
    ("text/html;charset =gbk", "text/html"),
    ("text/html ;charset=gbk", "text/html;charset=gbk"),
    ("text/html; charset=gbk", "text/html;charset=gbk"),
    ("text/html;charset= gbk", 'text/html;charset=" gbk"'),
    ("text/html;charset='gbk'", "text/html;charset='gbk'"),
    ("text/html;test;charset=gbk", "text/html;charset=gbk"),
    ("text/html;test=;charset=gbk", "text/html;charset=gbk"),
    ("text/html;';charset=gbk", "text/html;charset=gbk"),
    ('text/html;";charset=gbk', "text/html;charset=gbk"),
    ("text/html ; ; charset=gbk", "text/html;charset=gbk"),
    ("text/html;;;;charset=gbk", "text/html;charset=gbk"),
    ('text/html;charset="gbk"', "text/html;charset=gbk"),
    ('text/html;charset="gbk', "text/html;charset=gbk"),
    ('text/html;charset=gbk"', 'text/html;charset="gbk\\""'),
    ('text/html;charset="\\ gbk"', 'text/html;charset=" gbk"'),
    ('text/html;charset="\\g\\b\\k"', "text/html;charset=gbk"),
    ('text/html;charset="gbk"x', "text/html;charset=gbk"),
    ("text/html;charset={gbk}", 'text/html;charset="{gbk}"'),
    ("x/x;test", "x/x"),
    ('x/x;test="\\', 'x/x;test="\\\\"'),
    ("text/html;test=\u00ff;charset=gbk", 'text/html;test="\u00ff";charset=gbk'),
    ("x/x;test=\ufffd;x=x", "x/x;x=x"),
    ("", None),
    ("\t", None),
    ("bogus", None),
    ("bogus/", None),
    ("bogus/ ", None),
    ("bogus/bogus/;", None),
    ("</>", None),
    ("(/)", None),
    ("text/html(;doesnot=matter", None),
    ("{/}", None),
    ("\u0100/\u0100", None),
    # What an upstream may write to have its type dropped downstream, and browsers sniff.
    ("application/json\x01", None),
    ("application/json\x0b", None),
    ("application/json\x0c", None),
    ("application/json\u00a0", None),
    ("application/json\xc2\xa0", None),  # a UTF-8 no-break space, byte for byte
    ("application/json\xe3\x80\x80", None),  # U+3000, byte for byte
    ("application/json\x85", None),
    (" \r\n\tapplication/json\r\n ", "application/json"),
    ("Application/JSON ; x=<script>", 'application/json;x="<script>"'),
    ("application/json;x=\x01y", "application/json"),
]


@pytest.mark.parametrize(("value", "serialised"), PARSED)
def test_a_value_is_parsed_as_browsers_parse_it(value: str, serialised: str | None) -> None:
    parsed = parse(value)
    assert (None if parsed is None else str(parsed)) == serialised


# (the header's values in order, the type extracted). The first 16 are web-platform-tests'
# fetch/content-type/resources/content-types.json.
EXTRACTED = [
    (["", "text/plain"], "text/plain"),
    (["text/plain", ""], "text/plain"),
    (["text/html", "text/plain"], "text/plain"),
    (["text/plain;charset=gbk", "text/html"], "text/html"),
    (
        ["text/plain;charset=gbk", "text/html;charset=windows-1254"],
        "text/html;charset=windows-1254",
    ),
    (["text/plain;charset=gbk", "text/plain"], "text/plain;charset=gbk"),
    (
        ["text/plain;charset=gbk", "text/plain;charset=windows-1252"],
        "text/plain;charset=windows-1252",
    ),
    (
        ["text/html;charset=gbk", 'text/html;x=",text/plain'],
        'text/html;x=",text/plain";charset=gbk',
    ),
    (["text/html;charset=gbk", "text/plain", "text/html"], "text/html"),
    (["text/plain", "*/*"], "text/plain"),
    (["text/html", "*/*"], "text/html"),
    (["*/*", "text/html"], "text/html"),
    (["text/plain", "*/*;charset=gbk"], "text/plain"),
    (["text/html", "*/*;charset=gbk"], "text/html"),
    (['text/html;x="', "text/plain"], 'text/html;x=", text/plain"'),
    (['text/html;"', "text/plain"], "text/html"),
    # The grown attack suite's: another type in a parameter's place, two headers.
    (["application/json;,text/html"], "text/html"),
    (["application/json", "text/html"], "text/html"),
    (["application/json, text/html\x01"], "application/json"),
    (["text/html", "application/json\u3000"], "text/html"),
    (['application/json;x=",text/html"'], 'application/json;x=",text/html"'),
    ([], None),
    ([""], None),
    (["*/*"], None),
    (["application/json\x0b"], None),
    (["application/json;" + "x" * MAX_CHARS], None),
]


@pytest.mark.parametrize(("values", "extracted"), EXTRACTED)
def test_the_type_of_several_values_is_the_one_browsers_use(
    values: list[str], extracted: str | None
) -> None:
    found = extract(values)
    assert (None if found is None else str(found)) == extracted


def test_the_essence_and_parameters_are_read_off_the_parsed_type() -> None:
    found = parse('Text/HTML; Charset="UTF-8"; q=1')
    assert found is not None
    assert found.essence == "text/html"
    assert found.parameter("charset") == "UTF-8"
    assert found.parameter("boundary") is None


def test_the_common_types_read_as_the_whole_reading_reads_them() -> None:
    # The table of common values (a look-up) stands in for the reading: it must never differ.
    for value, found in media_types._COMMON.items():
        assert found == media_types._extracted([value])
        assert media_types.extract([value]) is found
    assert media_types.extract(["application/json", "text/html"]) == MediaType("text", "html")
