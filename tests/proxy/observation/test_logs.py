"""Log lines in JSON: one object per line, the fields collectors index, tracebacks kept, and the
same schema from both programs."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from gatehouse_contract.observability import JSONFormatter


def test_a_json_line_has_time_level_logger_and_message() -> None:
    try:
        raise RuntimeError("upstream broke off")
    except RuntimeError:
        record = logging.LogRecord(
            "gatehouse.proxy", logging.ERROR, __file__, 1, "table %s", ("rejected",), sys.exc_info()
        )
    entry = json.loads(JSONFormatter().format(record))
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "gatehouse.proxy"
    assert entry["message"] == "table rejected"
    assert entry["time"].endswith("+00:00")
    assert "RuntimeError: upstream broke off" in entry["exception"]


def test_a_line_about_a_resource_names_it_under_object() -> None:
    reference = {"kind": "ExternalConnection", "namespace": "shop", "name": "vendor"}
    record = logging.makeLogRecord(
        {"name": "kopf.objects", "levelno": logging.INFO, "levelname": "INFO",
         "msg": "reconciled", "k8s_ref": reference}
    )  # fmt: skip
    entry = json.loads(JSONFormatter().format(record))
    assert entry["object"] == reference
    assert set(entry) == {"time", "level", "logger", "message", "object"}


def test_the_operator_writes_the_proxys_json_lines(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    with subprocess.Popen(
        [sys.executable, "-m", "gatehouse_operator", "--log-format=json", "--liveness="],
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig),
             "GATEHOUSE_KEYRING_SECRET": "gatehouse/keyring"},
        stderr=subprocess.PIPE,
        text=True,
    ) as operator:  # fmt: skip
        try:
            assert operator.stderr is not None
            first = operator.stderr.readline()
        finally:
            operator.terminate()
            operator.wait(timeout=30)
    entry = json.loads(first)
    assert (
        {"time", "level", "logger", "message"}
        <= set(entry)
        <= {"time", "level", "logger", "message", "object", "exception"}
    ), entry
    assert entry["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
