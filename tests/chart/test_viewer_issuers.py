"""The chart hands the proxies the trusted viewer issuers as they read them: each issuer's JWKS
URL, or its Secret mounted as a file at the path the setting names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gatehouse_proxy.viewers.trust import issuers_from_json
from tests.chart.rendered import render


def _proxy(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        doc
        for doc in documents
        if doc["kind"] == "Deployment" and doc["metadata"]["name"].endswith("-proxy")
    )


def test_the_issuers_reach_the_proxy_as_it_reads_them_with_their_secrets_mounted() -> None:
    proxy = _proxy(
        render(
            "viewers.issuers[0].issuer=https://bi.example",
            "viewers.issuers[0].audience=gatehouse",
            "viewers.issuers[0].jwksURL=https://bi.example/.well-known/jwks.json",
            "viewers.issuers[1].issuer=https://sso.example",
            "viewers.issuers[1].audience=gatehouse-prod",
            "viewers.issuers[1].keysSecret.name=sso-keys",
            "viewers.issuers[1].keysSecret.key=jwks.json",
            "viewers.maxAssertionLifetime=120",
        )
    )
    pod = proxy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    first, second = issuers_from_json(env["GATEHOUSE_VIEWER_ISSUERS"], allow_http=False)
    assert first.jwks_url == "https://bi.example/.well-known/jwks.json"
    assert second.keys_file == Path("/etc/gatehouse/viewer-keys/1/jwks.json")
    assert second.audience == "gatehouse-prod"
    assert env["GATEHOUSE_VIEWER_MAX_ASSERTION_SECONDS"] == "120"
    assert env["GATEHOUSE_VIEWER_RECORD_IDS"] == "true"
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert mounts == {**mounts, "viewer-keys-1": "/etc/gatehouse/viewer-keys/1"}
    assert "viewer-keys-0" not in mounts
    volume = next(volume for volume in pod["volumes"] if volume["name"] == "viewer-keys-1")
    assert volume["secret"] == {
        "secretName": "sso-keys",
        "items": [{"key": "jwks.json", "path": "jwks.json"}],
    }


def test_by_default_no_issuer_is_trusted() -> None:
    container = _proxy(render())["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert issuers_from_json(env["GATEHOUSE_VIEWER_ISSUERS"], allow_http=False) == ()
    assert env["GATEHOUSE_VIEWER_MAX_ASSERTION_SECONDS"] == "300"
