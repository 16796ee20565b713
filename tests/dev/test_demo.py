"""`make demo` applies examples/demo with the port the stack started the example upstream on."""

from __future__ import annotations

import yaml

from gatehouse_dev import demo


def test_the_demo_connection_calls_the_upstream_where_it_listens() -> None:
    documents = list(yaml.safe_load_all(demo.manifest(18081)))
    (connection,) = [d for d in documents if d["kind"] == "ExternalConnection"]
    assert connection["spec"]["baseURL"] == "http://127.0.0.1:18081"
    assert demo.manifest(18080) == demo.EXAMPLE.read_text()
