"""Starting and stopping the local servers: logs to files, bounded waits, nothing left behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run (its main thread's)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of the process, in MiB (0 once it has none, as a zombie)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class StartupError(RuntimeError):
    """A server exited or did not become ready in time; the message carries its last log lines."""


# Every port free_port gave in this process. A port is only free while its socket is open: the
# kernel may give it again to the next bind(0) before the server it was meant for has bound it.
# It did, once: the stack's proxy and one of its operator's servers got the same port, the proxy
# could not bind, and the operator answered the proxy's health check for it.
_GIVEN: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port no process holds now, and not one this process gave before."""
    while True:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the test run is killed outright (SIGKILL,
    # a CI timeout), the kernel kills the servers too instead of leaving them orphaned.
    # SIGKILL, not SIGTERM: kube-apiserver's graceful shutdown hangs once etcd is gone, and
    # nothing in a test control plane is worth a graceful stop.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:])


class Server:
    """One child process whose output goes to a log file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(
        self,
        *,
        detached: bool,
        env: dict[str, str] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        """Starts the process; ``detached`` lets it outlive us (``make up``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                pass_fds=pass_fds,
                preexec_fn=None if detached else _die_with_parent,
            )

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self.process.pid

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> None:
        """Polls ``ready`` until it holds; fails early, with the log, if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise StartupError(
                    f"{self.name} exited with code {self.process.returncode} during start-up; "
                    f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise StartupError(
                    f"{self.name} was not ready after {timeout:.0f}s; "
                    f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None:
            return
        terminate_pid(self.process.pid, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; reaps it first if it is our exited child."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        waited = 0  # not our child (make down): ask the kernel instead
    if waited == pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def terminate_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; also for processes we did not start (make down)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
