"""The process supervisor fails early and loudly, and leaves nothing running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gatehouse_dev import processes
from gatehouse_dev.processes import Server, StartupError, terminate_pid


def test_a_server_that_exits_during_startup_fails_with_its_log(tmp_path: Path) -> None:
    server = Server("broken", ["sh", "-c", "echo 'bad flag --nope'; exit 3"], tmp_path / "s.log")
    server.start(detached=False)
    with pytest.raises(StartupError, match=r"(?s)exited with code 3.*bad flag --nope"):
        server.wait_until(lambda: False, timeout=10)


def test_a_server_that_never_gets_ready_times_out_with_its_log(tmp_path: Path) -> None:
    server = Server("slow", ["sh", "-c", "echo warming up; exec sleep 30"], tmp_path / "s.log")
    server.start(detached=False)
    try:
        with pytest.raises(StartupError, match=r"(?s)not ready after 0s.*warming up"):
            server.wait_until(lambda: False, timeout=0.3)
    finally:
        server.stop()
    assert server.process is not None
    assert server.process.poll() is not None


def test_terminate_escalates_to_kill_when_term_is_ignored(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
    )
    server = Server("stubborn", [sys.executable, "-c", code], tmp_path / "s.log")
    server.start(detached=False)
    server.wait_until(ready.exists, timeout=10)
    terminate_pid(server.pid, timeout=0.5)
    assert server.process is not None
    assert server.process.wait(timeout=5) != 0
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)


def test_free_port_never_gives_a_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may hand out a just-closed port again; the servers a stack starts must not
    share one (a proxy that cannot bind is answered for by whoever holds its port)."""
    ports = iter([41001, 41002, 41001, 41003])

    class Socket:
        def __init__(self, family: int) -> None: ...
        def __enter__(self) -> Socket:
            return self

        def __exit__(self, *exc: object) -> None: ...
        def bind(self, address: tuple[str, int]) -> None:
            self.port = next(ports)

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(processes, "_GIVEN", set())
    monkeypatch.setattr("gatehouse_dev.processes.socket.socket", Socket)
    handed = [processes.free_port() for _ in range(3)]
    assert handed == [41001, 41002, 41003]
