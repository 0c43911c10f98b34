"""A benchmark's latest output, as the documentation shows it.

`run(name, main)` runs a benchmark's `main`, passing its output through, and when it succeeds writes what it
printed to `docs/results/latest/<name>.md` with the date, the commit, the command and the machine (its cores,
memory and load when it started: this machine is shared, so the load says how far absolute times drift). The
Performance page includes these files, so the site states the figures a script last printed, not a copy.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

LATEST = Path(__file__).resolve().parents[1] / "docs" / "results" / "latest"


class _Tee(io.TextIOBase):
    def __init__(self, stream) -> None:
        self.stream, self.text = stream, io.StringIO()

    def write(self, s: str) -> int:
        self.text.write(s)
        return self.stream.write(s)

    def flush(self) -> None:
        self.stream.flush()


def machine() -> str:
    def first(path: str, prefix: str) -> str:
        try:
            return next(line.split(":", 1)[1].strip() for line in open(path) if line.startswith(prefix))
        except (OSError, StopIteration):
            return "?"

    mem_kb = first("/proc/meminfo", "MemTotal").split()[0]
    gb = f"{int(mem_kb) / 2**20:.0f} GB" if mem_kb.isdigit() else "? GB"
    return (
        f"{os.cpu_count()} cores ({first('/proc/cpuinfo', 'model name')}), {gb}, load average {os.getloadavg()[0]:.1f} at start"
    )


def commit() -> str:
    root = LATEST.parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def run(name: str, main: Callable[[], int | None], script: str | None = None) -> int:
    """`script`: the benchmark's file when it is not `<name>.py`."""
    header = (
        f"`{' '.join(['bench/' + (script or name + '.py'), *sys.argv[1:]])}` at {commit()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on {machine()}:"
    )
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        code = main() or 0
    finally:
        sys.stdout = tee.stream
    if code == 0:
        LATEST.mkdir(parents=True, exist_ok=True)
        body = tee.text.getvalue().strip("\n")
        written_by = f"<!-- written by bench/{script or name + '.py'} -->"
        (LATEST / f"{name}.md").write_text(f"{written_by}\n{header}\n\n```text\n{body}\n```\n")
    return code
