"""``gatehouse seal`` offline (``--cert``): the value from stdin or a file, never argv; the
connection's file comes back with its sealed value and nothing else changed."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import yaml

from gatehouse_operator import cli
from gatehouse_operator.sealed_values import Scope, SealedValue, SealingKeys

CONNECTION = """\
# Stripe, for the shop's apps.
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata:
  name: stripe
  namespace: shop
spec:
  displayName: Stripe  # shown to app builders
  baseURL: https://API.stripe.com:443
  auth:
    type: bearer
    secretRef: {name: stripe, key: token}
  linkPolicy: AdminsOnly
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
"""
SECRET = b"sk_live_canary_cli\n"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[SealingKeys, Path]:
    keys = SealingKeys.generate()
    cert = tmp_path / "keys.json"
    cert.write_text(keys.public().dump())
    return keys, cert


def stdin(monkeypatch: pytest.MonkeyPatch, data: bytes, *, tty: bool = False) -> None:
    stream = io.TextIOWrapper(io.BytesIO(data))
    monkeypatch.setattr(stream, "isatty", lambda: tty)
    monkeypatch.setattr(sys, "stdin", stream)


def test_seal_rewrites_the_connection_file_from_stdin(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, cert = keys
    source = tmp_path / "stripe.yaml"
    source.write_text(CONNECTION)
    stdin(monkeypatch, SECRET)
    assert cli.main(["seal", "-f", str(source), "--cert", str(cert)]) == 0
    out, err = capsys.readouterr()
    assert "canary" not in out + err
    assert "# Stripe, for the shop's apps." in out
    assert "# shown to app builders" in out
    connection, unrelated = yaml.safe_load_all(out)
    assert unrelated["metadata"]["name"] == "unrelated"
    auth = connection["spec"]["auth"]
    assert "secretRef" not in auth
    # Bound to the origin the operator pins (its normal form), not the text as written.
    scope = Scope("shop", "stripe", "https://api.stripe.com")
    assert private.open(auth["sealedSecret"], scope) == SECRET
    assert f"sealed for {scope} with key {private.active}" in err


def test_seal_without_a_file_prints_the_value_or_a_patch(
    tmp_path: Path,
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, cert = keys
    secret = tmp_path / "token"
    secret.write_bytes(SECRET)
    common = ["seal", "--name", "stripe", "--base-url", "https://api.stripe.com", "-n", "shop"]
    assert cli.main([*common, "--from-file", str(secret), "--cert", str(cert)]) == 0
    value = capsys.readouterr().out.strip()
    assert SealedValue.parse(value).scope == Scope("shop", "stripe", "https://api.stripe.com")
    args = [*common, "--from-file", str(secret), "--cert", str(cert), "-o", "patch"]
    assert cli.main(args) == 0
    patch = yaml.safe_load(capsys.readouterr().out)
    assert patch["spec"]["auth"]["secretRef"] is None
    assert patch["spec"]["auth"]["sealedSecret"].startswith("gh1.")


@pytest.mark.parametrize(
    ("args", "tty", "message"),
    [
        (["--name", "s", "--base-url", "https://a.example", "-n", "x"], True, "on stdin or with"),
        (["--name", "s", "--base-url", "https://a.example"], False, "the connection's namespace"),
        (["--name", "s", "--base-url", "ftp://a.example", "-n", "x"], False, "spec.baseURL"),
        (["--name", "s"], False, "give -f CONNECTION.yaml, or --name and --base-url"),
    ],
)
def test_seal_refuses_with_one_line_naming_the_option(
    keys: tuple[SealingKeys, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    tty: bool,
    message: str,
) -> None:
    _, cert = keys
    stdin(monkeypatch, SECRET, tty=tty)
    assert cli.main(["seal", *args, "--cert", str(cert)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "canary" not in err
