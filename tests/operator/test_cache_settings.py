"""``spec.cache``: a connection's response cache (issue 51). Off unless set, bounded by the
contract's constants, each rule refused with a message that names the field and the rule. The API
server's CEL rules are applied to real objects in tests/e2e/test_crd_validation.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_contract.routes import MAX_CACHE_BODY_BYTES, MAX_CACHE_SECONDS
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.meta import spec_error


def _spec(cache: Any, **fields: Any) -> dict[str, Any]:
    return {
        "displayName": "Vendor",
        "baseURL": "https://api.example.com",
        "linkPolicy": "Builders",
        "auth": {"type": "none"},
        "cache": cache,
        **fields,
    }


@pytest.mark.parametrize(
    ("cache", "fields", "said"),
    [
        (
            {"ttlSeconds": 120, "maxTTLSeconds": 60},
            {},
            "spec.cache: Value error, cache.ttlSeconds must be at most cache.maxTTLSeconds",
        ),
        # The default ttlSeconds (60) is above a maxTTLSeconds set alone under it.
        (
            {"maxTTLSeconds": 30},
            {},
            "spec.cache: Value error, cache.ttlSeconds must be at most cache.maxTTLSeconds",
        ),
        ({"ttlSeconds": 0}, {}, "spec.cache.ttlSeconds: Input should be greater than or equal"),
        (
            {"ttlSeconds": MAX_CACHE_SECONDS + 1},
            {},
            f"spec.cache.ttlSeconds: Input should be less than or equal to {MAX_CACHE_SECONDS}",
        ),
        (
            {"maxTTLSeconds": MAX_CACHE_SECONDS + 1},
            {},
            f"spec.cache.maxTTLSeconds: Input should be less than or equal to {MAX_CACHE_SECONDS}",
        ),
        (
            {"maxBodyBytes": MAX_CACHE_BODY_BYTES + 1},
            {"limits": {"maxResponseBytes": 26_214_400}},
            "spec.cache.maxBodyBytes: Input should be less than or equal to "
            f"{MAX_CACHE_BODY_BYTES}",
        ),
        ({"maxBodyBytes": 0}, {}, "spec.cache.maxBodyBytes: Input should be greater than or"),
        (
            {"maxBodyBytes": 2_000_000},
            {},  # limits.maxResponseBytes defaults to 1 MiB
            "spec.: Value error, cache.maxBodyBytes must be at most limits.maxResponseBytes",
        ),
        (
            {"maxBodyBytes": 4_096},
            {"limits": {"maxResponseBytes": 1_024}},
            "spec.: Value error, cache.maxBodyBytes must be at most limits.maxResponseBytes",
        ),
        (
            {},
            {"allowedMethods": ["POST"]},
            "spec.: Value error, cache needs GET in allowedMethods: only GET answers",
        ),
        (
            {"scope": "viewer"},
            {},
            "spec.cache.scope: 'viewer' is not one of 'app' or 'connection'",
        ),
        (
            {"staleWhileRevalidateSeconds": -1},
            {},
            "spec.cache.staleWhileRevalidateSeconds: Input should be greater than or equal to 0",
        ),
        (
            {"staleIfErrorSeconds": MAX_CACHE_SECONDS + 1},
            {},
            "spec.cache.staleIfErrorSeconds: Input should be less than or equal to",
        ),
        ({"ttl": 60}, {}, "spec.cache.ttl: unknown key"),
    ],
)
def test_a_bad_cache_is_refused_naming_the_field(
    cache: Any, fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        ExternalConnectionSpec.model_validate(_spec(cache, **fields))
    assert spec_error(refused.value).startswith(said), spec_error(refused.value)


def test_the_cache_is_off_unless_set_and_an_empty_one_takes_the_defaults() -> None:
    unset = _spec(None)
    del unset["cache"]
    assert ExternalConnectionSpec.model_validate(unset).cache is None
    cache = ExternalConnectionSpec.model_validate(_spec({})).cache
    assert cache is not None
    assert cache.model_dump(by_alias=True) == {
        "ttlSeconds": 60,
        "maxTTLSeconds": 3_600,
        "maxBodyBytes": 262_144,
        "scope": "app",
        "staleWhileRevalidateSeconds": 0,
        "staleIfErrorSeconds": 0,
    }


def test_the_bounds_themselves_are_accepted() -> None:
    cache = {
        "ttlSeconds": MAX_CACHE_SECONDS,
        "maxTTLSeconds": MAX_CACHE_SECONDS,
        "maxBodyBytes": MAX_CACHE_BODY_BYTES,
        "scope": "connection",
        "staleWhileRevalidateSeconds": MAX_CACHE_SECONDS,
        "staleIfErrorSeconds": MAX_CACHE_SECONDS,
    }
    spec = ExternalConnectionSpec.model_validate(
        _spec(cache, allowedMethods=["GET", "POST"], limits={"maxResponseBytes": 26_214_400})
    )
    assert spec.cache is not None
    assert spec.cache.model_dump(by_alias=True) == cache
