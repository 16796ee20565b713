"""Installation settings read from the environment: a flag takes what the chart writes for
every boolean setting (true/false, and on/off for a switch such as GATEHOUSE_AUDIT_LOG)."""

from __future__ import annotations

import pytest

from gatehouse_contract.env import env_count, env_flag, env_port


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        *[(raw, False) for raw in ("", "false", "off", "0", "no")],
        *[(raw, True) for raw in ("true", " On ", "1", "yes")],
    ],
)
def test_a_flag_is_true_or_false_however_the_chart_spells_it(
    monkeypatch: pytest.MonkeyPatch, raw: str, value: bool
) -> None:
    monkeypatch.setenv("GATEHOUSE_AUDIT_LOG", raw)
    assert env_flag("GATEHOUSE_AUDIT_LOG") is value


def test_anything_else_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEHOUSE_AUDIT_LOG", "si")
    with pytest.raises(ValueError, match="GATEHOUSE_AUDIT_LOG must be true or false"):
        env_flag("GATEHOUSE_AUDIT_LOG")


@pytest.mark.parametrize("raw", ["²", "٣", "+5"])
def test_a_count_or_port_in_other_digits_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("GATEHOUSE_TEST_NUMBER", raw)
    with pytest.raises(ValueError, match="GATEHOUSE_TEST_NUMBER must be a whole number"):
        env_count("GATEHOUSE_TEST_NUMBER", 1)
    with pytest.raises(ValueError, match="GATEHOUSE_TEST_NUMBER must be a port number"):
        env_port("GATEHOUSE_TEST_NUMBER", 1)
