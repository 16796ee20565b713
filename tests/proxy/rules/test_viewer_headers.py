"""The viewer's headers in an app's request: the assertion is read and never sent on; a header of
the proxy's own (X-Gatehouse-*, in any spelling servers read as one) refuses the request."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.headers import upstream_request_headers, viewer_assertions


def test_the_assertion_is_read_and_never_sent_on() -> None:
    sent = [("Gatehouse-Viewer-Assertion", "a.b.c"), ("Accept", "application/json")]
    assert viewer_assertions(sent) == ["a.b.c"]
    assert upstream_request_headers(sent, set()) == [("Accept", "application/json")]
    spelled = [("gatehouse_viewer_assertion", "x.y.z")]
    assert viewer_assertions(spelled) == ["x.y.z"]
    assert upstream_request_headers(spelled, set()) == []


@pytest.mark.parametrize(
    "name",
    ["X-Gatehouse-Viewer-Id", "x-gatehouse-app-id", "X_Gatehouse_Project_Id", "X.Gatehouse.X"],
)
def test_a_header_of_the_proxys_own_refuses_the_request(name: str) -> None:
    with pytest.raises(ProxyError) as refused:
        viewer_assertions([("Accept", "*/*"), (name, "admin")])
    assert refused.value.code == "reserved_header"
    assert refused.value.status == 400
    assert name in refused.value.message
