"""Headers naming another object (copy and rename sources) are held to the allowed paths."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.copy_sources import check_copy_sources

PATH_STYLE = "https://storage.example.com"
ALLOWED = ("/shared/reports",)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Amz-Copy-Source", "/shared/private/salaries.csv"),
        ("x-amz-copy-source", "shared/private/salaries.csv"),
        ("X-Amz-Copy-Source", "/other-bucket/reports/x?versionId=3"),
        ("X_Amz_Copy_Source", "/shared/private/x"),
        ("x.amz.copy.source", "/shared/private/x"),
        ("X-Goog-Copy-Source", "shared/private/x"),
        ("x-oss-copy-source", "/shared/private/x"),
        ("x-cos-copy-source", "shared/private/x"),
        ("x-obs-copy-source", "/shared/private/x"),
        ("x-bce-copy-source", "/shared/private/x"),
        ("x-ms-copy-source", "https://storage.example.com/shared/private/x?sv=1&sig=2"),
        ("x-ms-copy-source", "https://evil.example/shared/reports/x"),
        ("x-ms-copy-source", "http://storage.example.com/shared/reports/x"),
        ("x-ms-copy-source", "https://storage.example.com:8443/shared/reports/x"),
        ("x-ms-rename-source", "/shared/private/x"),
        ("x-ms-file-rename-source", "/shared/private/x"),
        ("X-Copy-From", "shared/private/x"),
        ("X-Copy-From-Account", "AUTH_other"),
    ],
)
def test_a_source_outside_the_allowed_paths_is_refused(name: str, value: str) -> None:
    with pytest.raises(ProxyError) as refused:
        check_copy_sources([(name, value)], PATH_STYLE, ALLOWED)
    assert refused.value.code == "path_not_allowed"
    assert refused.value.status == 403
    assert name in refused.value.message


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("/shared/reports/../private/x", "path_traversal"),
        ("/shared/reports/%2e%2e/private/x", "path_traversal"),
        ("/shared/reports/%2F..%2Fprivate", "invalid_path"),
        ("/shared/reports/%25u002e%25u002e/x", "invalid_path"),
        ("//evil.example/shared/reports/x", "invalid_path"),
    ],
)
def test_a_source_is_normalised_as_a_request_path_is(value: str, code: str) -> None:
    with pytest.raises(ProxyError) as refused:
        check_copy_sources([("X-Amz-Copy-Source", value)], PATH_STYLE, ALLOWED)
    assert refused.value.code == code
    assert "X-Amz-Copy-Source" in refused.value.message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Amz-Copy-Source", "/shared/reports/2024/q1.csv"),
        ("X-Amz-Copy-Source", "shared/reports/q1.csv?versionId=7"),
        ("x-ms-copy-source", "https://STORAGE.example.com:443/shared/reports/x?sig=1"),
        ("X-Copy-From", "shared/reports/x"),
        # Not sources: a range of one, and a condition on it.
        ("X-Amz-Copy-Source-Range", "bytes=0-9"),
        ("X-Amz-Copy-Source-If-Match", '"etag"'),
        ("X-Request-Id", "from-source"),
    ],
)
def test_a_source_inside_the_allowed_paths_passes(name: str, value: str) -> None:
    check_copy_sources([(name, value)], PATH_STYLE, ALLOWED)


def test_a_virtual_hosted_bucket_is_read_without_its_segment() -> None:
    origin = "https://acme-data.s3.eu-west-1.amazonaws.com"
    allowed = ("/reports",)
    check_copy_sources([("X-Amz-Copy-Source", "acme-data/reports/q1.csv")], origin, allowed)
    check_copy_sources([("X-Amz-Copy-Source", "/acme-data/reports/q1.csv")], origin, allowed)
    for outside in ("acme-data/private/x", "other-bucket/reports/x", "/private/x"):
        with pytest.raises(ProxyError, match="outside"):
            check_copy_sources([("X-Amz-Copy-Source", outside)], origin, allowed)
    # Tencent's form: the whole host, then the key.
    cos = "https://files-1250000000.cos.ap-guangzhou.myqcloud.com"
    check_copy_sources(
        [("x-cos-copy-source", "files-1250000000.cos.ap-guangzhou.myqcloud.com/reports/a")],
        cos,
        allowed,
    )


def test_without_allowed_paths_every_source_passes() -> None:
    check_copy_sources(
        [("X-Amz-Copy-Source", "/anything/../else"), ("X-Copy-From-Account", "other")],
        PATH_STYLE,
        (),
    )
