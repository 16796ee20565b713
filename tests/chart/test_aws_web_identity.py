"""The chart hands the proxies their web identity for AWS STS as they read it, and the operator
the roles each namespace may sign as."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gatehouse_operator.settings import AwsRoles
from gatehouse_proxy.credentials.aws_roles import AwsSettings
from tests.chart.rendered import render


def _deployment(documents: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    return next(
        doc
        for doc in documents
        if doc["kind"] == "Deployment" and doc["metadata"]["name"].endswith(suffix)
    )


def _env(deployment: dict[str, Any]) -> dict[str, str | None]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container["env"]}


def test_the_proxies_get_a_token_for_sts_alone_and_the_operator_the_roles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents = render(
        "installation.aws.webIdentity.enabled=true",
        "installation.aws.stsURL=https://sts.{region}.amazonaws.com.cn/",
        "installation.aws.webIdentity.roles.shop[0]=arn:aws:iam::111122223333:role/shop-*",
    )
    proxy = _deployment(documents, "-proxy")
    pod = proxy["spec"]["template"]["spec"]
    env = _env(proxy)
    monkeypatch.setenv("GATEHOUSE_AWS_STS_URL", str(env["GATEHOUSE_AWS_STS_URL"]))
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(env["AWS_WEB_IDENTITY_TOKEN_FILE"]))
    settings = AwsSettings.from_env()
    assert settings.sts_url == "https://sts.{region}.amazonaws.com.cn/"
    mount = next(
        mount
        for mount in pod["containers"][0]["volumeMounts"]
        if mount["name"] == "aws-web-identity"
    )
    assert f"{mount['mountPath']}/token" == str(settings.web_identity_token_file)
    volume = next(volume for volume in pod["volumes"] if volume["name"] == "aws-web-identity")
    assert volume["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "path": "token",
                "audience": "sts.amazonaws.com",
                "expirationSeconds": 86400,
            }
        }
    ]
    operator = _env(_deployment(documents, "-operator"))
    monkeypatch.setenv("GATEHOUSE_AWS_ROLES", str(operator["GATEHOUSE_AWS_ROLES"]))
    roles = AwsRoles.from_env()
    assert roles.allows("shop", "arn:aws:iam::111122223333:role/shop-reports")
    assert not roles.allows("shop", "arn:aws:iam::111122223333:role/admin")
    assert not roles.allows("other", "arn:aws:iam::111122223333:role/shop-reports")


def test_by_default_the_proxies_have_no_web_identity_and_no_namespace_a_role() -> None:
    documents = render()
    proxy = _deployment(documents, "-proxy")
    assert "AWS_WEB_IDENTITY_TOKEN_FILE" not in _env(proxy)
    assert "aws-web-identity" not in json.dumps(proxy)
    assert _env(_deployment(documents, "-operator"))["GATEHOUSE_AWS_ROLES"] == "{}"


@pytest.mark.parametrize(
    "raw", ["[]", '{"shop": "arn:aws:iam::1:role/x"}', '{"shop": ["role/x"]}', "{"]
)
def test_the_roles_setting_is_refused_when_it_is_not_a_list_of_arns(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("GATEHOUSE_AWS_ROLES", raw)
    with pytest.raises(ValueError, match="GATEHOUSE_AWS_ROLES must be a JSON object"):
        AwsRoles.from_env()
