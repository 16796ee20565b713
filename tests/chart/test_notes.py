"""What ``helm install`` prints: how to open the page signed in, the way a newcomer reads it."""

from __future__ import annotations

from tests.chart.rendered import notes


def test_notes_say_how_to_open_the_page_signed_in_with_no_token_to_paste() -> None:
    shipped = notes()
    forward = "kubectl -n gatehouse-system port-forward service/gh-gatehouse-operator 8082"
    assert forward in shipped
    assert "gatehouse open -n <project namespace> --server http://localhost:8082" in shipped
    assert "sign in with a Kubernetes token" not in shipped
    assert "where browsers reach" not in shipped
    named = notes("operator.page.url=https://gatehouse.example.com")
    assert "where browsers reach https://gatehouse.example.com: gatehouse open -n" in named
