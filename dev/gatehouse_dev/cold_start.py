"""``make cold-start``: how long a fresh machine takes, timed on a fresh clone with empty caches.

The clone (of this checkout's HEAD: commit what you want timed) gets a HOME, Go build cache, Go
module cache, pip cache and Gatehouse binary cache of its own in a temporary folder, so nothing
the machine has built or downloaded helps it, and nothing of the machine's is wiped. It then runs
the steps asked, each timed, and prints a table with the builds each step reported:

- ``demo``: ``make demo`` (then ``make down``); the target is 6 minutes;
- ``ci``: ``.ci/run``'s steps, ``make test`` then ``make test-lowest``; the target is 60 minutes.

    python -m gatehouse_dev.cold_start [demo] [ci] [--keep]

``--keep`` leaves the temporary folder (its ``home/.cache/gatehouse/bin`` holds the binaries it
built). A cold build takes the machine's every core for minutes: run one at a time.
"""

from __future__ import annotations

import argparse
import os
import re
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
            # The stack's fixed ports are the machine's stack's: the clone's demo takes others.
            "GATEHOUSE_DEMO_UPSTREAM_PORT": os.environ.get("GATEHOUSE_DEMO_UPSTREAM_PORT", "18090"),
        }
    )
    env.pop("GATEHOUSE_CACHE_DIR", None)
    return env


def run(command: tuple[str, ...], cwd: Path, env: dict[str, str], log: Path) -> Timed:
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=out, check=False)
    seconds = time.monotonic() - started
    builds = tuple(
        f"{match[1]} {match[2]}s ({match[3]})" for match in BUILT.finditer(log.read_text())
    )
    return Timed(" ".join(command), seconds, done.returncode, builds)


def table(rows: list[Timed], totals: dict[str, float]) -> str:
    lines = [f"{'step':<20} {'seconds':>8}  result", f"{'-' * 20} {'-' * 8}  {'-' * 6}"]
    seen: set[str] = set()
    for row in rows:
        lines.append(
            f"{row.command:<20} {row.seconds:>8.0f}  "
            + ("ok" if row.returncode == 0 else f"exit {row.returncode}")
        )
        for build in row.builds:
            if build not in seen:  # the log is cumulative: each build once, under its step
                seen.add(build)
                lines.append(f"{'':<20} {'':>8}  built {build}")
    for name, seconds in totals.items():
        verdict = "within" if seconds <= TARGETS[name] else "over"
        lines.append(
            f"{name + ' in all':<20} {seconds:>8.0f}  {verdict} the target of {TARGETS[name]} s"
        )
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
