"""The profile's reading of py-spy's samples: each counted once, for the innermost layer it
reaches, library code for the layer that called it."""

from __future__ import annotations

from gatehouse_dev.bench_profile import OTHER, SERVER_AND_LOOP, STEPS, attribute, steps

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


def test_each_sample_counts_for_the_step_of_a_fetch_its_module_serves() -> None:
    step = dict((label.partition(" ")[0], label) for label, _ in STEPS)
    raw = "\n".join(
        [
            # asyncio's lock, taken by the tenant caps: the caps' (the standard library is not a
            # step of its own).
            f"{LOOP};enter (gatehouse_proxy/limits/tenancy.py:85);acquire (asyncio/locks.py:380) 3",
            # The vendor's pause, heeded on the passage: the limits' step, not the passage's.
            f"{LOOP};heed (gatehouse_proxy/passage/vendor_pause.py:30) 1",
            f"{LOOP};send (gatehouse_proxy/upstream/forwarder.py:233);_write "
            "(aiohttp/http_writer.py:104) 2",
            f"{LOOP};through (gatehouse_proxy/passage/steps.py:3);scrub "
            "(gatehouse_contract/redaction.py:4) 4",
            f"{LOOP};observe (gatehouse_proxy/observation/metrics.py:2);inc "
            "(prometheus_client/values.py:2) 5",
            f"{LOOP};through (gatehouse_proxy/passage/steps.py:340) 6",
            # A cached answer read: the cache's; the store's call under it, the limits'.
            f"{LOOP};look_up (gatehouse_proxy/caching/response_cache.py:9) 2",
            f"{LOOP};look_up (gatehouse_proxy/caching/response_cache.py:9);read "
            "(gatehouse_proxy/store/answer_store.py:1);run (redis/asyncio/client.py:1) 1",
            # The loop's own work, and the server's.
            f"{LOOP} 7",
            f"{LOOP};send (uvicorn/protocols/http/httptools_impl.py:524) 8",
            "<module> (<string>:1) 9",
        ]
    )
    assert steps(raw) == {
        step["limits"]: 5,
        step["cache"]: 2,
        step["upstream"]: 2,
        step["scrub"]: 4,
        step["observers"]: 5,
        step["the"]: 6,
        SERVER_AND_LOOP: 15,
        OTHER: 9,
    }
