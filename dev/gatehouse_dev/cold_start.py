"""``make cold-start``: how long a fresh machine takes, timed on a fresh clone with empty caches.

The clone (of this checkout's HEAD: commit what you want timed) gets a HOME, Go build cache, Go
module cache, pip cache and Gatehouse binary cache of its own in a temporary folder, so nothing
the machine has built or downloaded helps it, and nothing of the machine's is wiped. It then runs
the steps asked, each timed, and prints a table with the builds each step reported. Beside the
wall-clock seconds it gives the CPU seconds the step's processes used and the load average it ran
under: on a machine others share, the wall clock says more about them than about the build, and
the CPU seconds divided by the cores say what an idle machine would take.

- ``demo``: ``make demo`` (then ``make down``); the target is 6 minutes;
- ``ci``: ``.ci/run``'s steps, ``make test`` then ``make test-lowest``; the target is 60 minutes.

    python -m gatehouse_dev.cold_start [demo] [ci] [--keep]

``--keep`` leaves the temporary folder (its ``home/.cache/gatehouse/bin`` holds the binaries it
built). A cold build takes the machine's every core for minutes: run one at a time, with no other
local stack up (the demo's example calls the upstream on 127.0.0.1:18080).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "demo": (("make", "demo"),),
    "ci": (("make", "test"), ("make", "test-lowest")),
}
TARGETS = {"demo": 6 * 60, "ci": 60 * 60}
# What binaries.py prints after a build: "built control-plane binaries in 412s (...)".
BUILT = re.compile(r"gatehouse: built (.+?) binaries in (\d+)s \((.*)\)")


@dataclass(frozen=True)
class Timed:
    command: str
    seconds: float
    cpu_seconds: float  # of the step's processes, user and system
    load: float  # the machine's 1-minute load average when the step ended
    returncode: int
    builds: tuple[str, ...]  # "control-plane 412s (kube-apiserver+kubectl+etcd 380s, ...)"


def fresh_environment(scratch: Path) -> dict[str, str]:
    """The machine's environment with every cache a build fills pointed into ``scratch``."""
    home = scratch / "home"
    home.mkdir()
    env = {name: value for name, value in os.environ.items() if name not in ("KUBECONFIG",)}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "GOCACHE": str(scratch / "go-build"),
            "GOMODCACHE": str(scratch / "go-mod"),
            "GOPATH": str(scratch / "go"),
            "PIP_CACHE_DIR": str(scratch / "pip"),
        }
    )
    env.pop("GATEHOUSE_CACHE_DIR", None)
    return env


def run(command: tuple[str, ...], cwd: Path, env: dict[str, str], log: Path) -> Timed:
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=out, check=False)
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    builds = tuple(
        f"{match[1]} {match[2]}s ({match[3]})" for match in BUILT.finditer(log.read_text())
    )
    return Timed(" ".join(command), seconds, cpu, os.getloadavg()[0], done.returncode, builds)


def table(rows: list[Timed], totals: dict[str, float]) -> str:
    lines = [
        f"{'step':<20} {'seconds':>8} {'CPU s':>8} {'load':>5}  result",
        f"{'-' * 20} {'-' * 8} {'-' * 8} {'-' * 5}  {'-' * 6}",
    ]
    seen: set[str] = set()
    for row in rows:
        lines.append(
            f"{row.command:<20} {row.seconds:>8.0f} {row.cpu_seconds:>8.0f} {row.load:>5.1f}  "
            + ("ok" if row.returncode == 0 else f"exit {row.returncode}")
        )
        for build in row.builds:
            if build not in seen:  # the log is cumulative: each build once, under its step
                seen.add(build)
                lines.append(f"{'':<20} {'':>8} {'':>8} {'':>5}  built {build}")
    for name, seconds in totals.items():
        verdict = "within" if seconds <= TARGETS[name] else "over"
        lines.append(
            f"{name + ' in all':<20} {seconds:>8.0f} {'':>8} {'':>5}  "
            f"{verdict} the target of {TARGETS[name]} s"
        )
    lines.append(f"({os.cpu_count()} cores)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cold_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", nargs="*", choices=sorted(STEPS), default=["demo"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="gatehouse-cold-"))
    clone, log = scratch / "clone", scratch / "log.txt"
    rows: list[Timed] = []
    totals: dict[str, float] = {}
    try:
        env = fresh_environment(scratch)
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        print(f"cold start of {clone} (log: {log})", file=sys.stderr, flush=True)
        for step in args.steps:
            timed = [run(command, clone, env, log) for command in STEPS[step]]
            if step == "demo":
                run(("make", "down"), clone, env, log)
            rows += timed
            totals[step] = sum(row.seconds for row in timed)
        print(table(rows, totals))
        return 0 if all(row.returncode == 0 for row in rows) else 1
    finally:
        if not args.keep:
            # Go's module cache is written read-only.
            subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False, capture_output=True)
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
