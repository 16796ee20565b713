"""The profile's reading of py-spy's samples: each counted once, for the innermost layer it
reaches, library code for the layer that called it."""

from __future__ import annotations

from gatehouse_dev.bench_profile import OTHER, attribute

LOOP = "_run_once (asyncio/base_events.py:1922)"
RAW = "\n".join(
    [
        f"{LOOP};handle (gatehouse_proxy/app.py:120);match (re/__init__.py:166) 3",
        f"{LOOP};send (uvicorn/protocols/http/httptools_impl.py:480)"
        ";write (asyncio/selector_events.py:1080) 2",
        f"{LOOP};wrap (starlette/responses.py:260);scrub (gatehouse_contract/redaction.py:240) 4",
        "<module> (<string>:1) 1",
    ]
)


def test_each_sample_counts_for_the_innermost_layer_it_reaches() -> None:
    layers, functions = attribute(RAW)
    assert layers == {
        "Gatehouse's checks, tenancy and injection": 3,  # re, called by the proxy
        "event loop and sockets (asyncio)": 2,  # the socket write, not uvicorn's send
        "the scrubber (redaction of the injected secret)": 4,
        OTHER: 1,
    }
    assert functions["handle (app.py)"] == 3
