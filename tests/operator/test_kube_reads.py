"""Reads the API server turns away for a moment are asked again, a bounded number of times."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes.aio import client

from gatehouse_operator.kube import calls as kube_calls
from gatehouse_operator.kube import errors as kube_errors


def _refusal(status: int) -> kube_errors.ApiError:
    """The client's error as a call through ``KubeCalls`` raises it."""
    error = client.ApiException(status=status, reason="storage is (re)initializing")
    error.headers = {"Retry-After": "0"}
    return kube_errors.translated(error)


def test_a_read_refused_while_storage_initializes_is_asked_again() -> None:
    answers: list[object] = [_refusal(429), _refusal(503), "listed"]

    async def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    assert asyncio.run(kube_calls.read(call)) == "listed"


def test_reads_give_up_after_their_attempts_and_other_errors_pass_at_once() -> None:
    calls = 0

    async def refused(status: int) -> str:
        nonlocal calls
        calls += 1
        raise _refusal(status)

    with pytest.raises(kube_errors.ApiError):
        asyncio.run(kube_calls.read(lambda: refused(429)))
    assert calls == kube_calls.READ_ATTEMPTS
    calls = 0
    with pytest.raises(kube_errors.ApiError):
        asyncio.run(kube_calls.read(lambda: refused(403)))
    assert calls == 1
