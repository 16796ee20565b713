"""Origins are canonical, and hosts that could be read two ways are refused."""

from __future__ import annotations

import pytest

from gatehouse_operator.connections.origin import OriginError, normalise_origin


@pytest.mark.parametrize(
    ("base_url", "origin"),
    [
        ("https://api.example.com", "https://api.example.com"),
        ("https://API.Example.com/", "https://api.example.com"),
        ("https://api.example.com.", "https://api.example.com"),
        ("https://api.example.com:443", "https://api.example.com"),
        ("https://api.example.com:8443", "https://api.example.com:8443"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
        ("https://[2606:4700::1111]", "https://[2606:4700::1111]"),
        ("https://93.184.215.14", "https://93.184.215.14"),
    ],
)
def test_canonical_origin(base_url: str, origin: str) -> None:
    assert normalise_origin(base_url, allow_http=False) == origin


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ("http://api.example.com", "does not allow"),
        ("ftp://api.example.com", "must use https"),
        ("https://u:p@api.example.com", "credentials"),
        ("https://api.example.com/v1", "no path"),
        ("https://api.example.com:99999", "invalid port"),
        ("https://2130706433", "numeric address"),
        ("https://0x7f.0.0.1", "numeric address"),
        ("https://0177.0.0.1", "numeric address"),
        ("https://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11", "numeric address"),
        ("https://127\u30020\u30020\u30021", "numeric address"),
        ("https://\uff10x7f.1", "numeric address"),
        ("https://\uff12\uff11\uff13\uff10\uff17\uff10\uff16\uff14\uff13\uff13", "numeric address"),
        ("https://api.example.com:0", "port 0"),
        ("https://bad_host.example", "not a valid host name"),
        ("https://-bad.example", "not a valid host name"),
    ],
)
def test_refused_origins(base_url: str, message: str) -> None:
    with pytest.raises(OriginError, match=message):
        normalise_origin(base_url, allow_http=False)


def test_http_when_the_installation_allows_it() -> None:
    assert normalise_origin("http://127.0.0.1:8080", allow_http=True) == "http://127.0.0.1:8080"
