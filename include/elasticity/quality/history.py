"""The data-quality runs of a job: `runs.jsonl` in the report folder, one compact line per kept run (newest
last), which the rolling summary page and the job page read a page of from its end, so what they read does not
grow with the job's age. Each run's full report stays in `runs/<folder>/`; retention removes a run's folder and
its line together, so nothing links a removed run."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INDEX = "runs.jsonl"
CHECK_FIELDS = ("name", "success", "rows", "unexpected", "describe")
ORPHAN_AGE_S = 86_400
"""A run folder the index does not name (its run died before finishing) is removed once this old."""


@dataclass(frozen=True)
class RunPage:
    """A page of runs, newest first, and the `before` that asks for the next older page (None: no older run)."""

    runs: tuple[dict[str, Any], ...]
    older: int | None


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One writer of the index at a time (a data-quality run appending, maintenance trimming)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "runs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _lines_from_end(path: Path, block: int = 65_536) -> Iterator[dict[str, Any]]:
    """The index's entries, newest first, read backwards a block at a time."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        pos, rest = f.tell(), b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            lines = (f.read(step) + rest).split(b"\n")
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line.strip():
                    yield json.loads(line)
        if rest.strip():
            yield json.loads(rest)


def _entry(summary: dict[str, Any], folder: str, seq: int) -> dict[str, Any]:
    """What the index keeps of a run's summary: no window's batch list, no check's examples."""
    return {
        "seq": seq,
        "run": summary["run"],
        "folder": folder,
        "window": summary["window"],
        "success": summary["success"],
        "finished_ms": summary["finished_ms"],
        "checks": [{k: c[k] for k in CHECK_FIELDS if k in c} for c in summary["checks"]],
    }


def _write_index(root: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the index (oldest first), atomically."""
    tmp = root / (INDEX + ".tmp")
    tmp.write_text("".join(json.dumps(e) + "\n" for e in entries))
    tmp.replace(root / INDEX)


def _ensure_index(root: Path, recording: str | None = None) -> None:
    """A report folder written before the index: the index of its runs (but the one `recording`), built once from
    their summaries."""
    if (root / INDEX).exists():
        return
    found = sorted(
        (
            {**json.loads(p.read_text()), "folder": p.parent.name}
            for p in root.glob("runs/*/summary.json")
            if p.parent.name != recording
        ),
        key=lambda r: r["finished_ms"],
    )
    _write_index(root, [_entry(r, r["folder"], i) for i, r in enumerate(found, 1)])


def record_run(root: Path, summary: dict[str, Any], folder: str) -> dict[str, Any]:
    """Append a finished run (its `runs/<folder>/summary.json` written) to the index; returns its entry."""
    with _locked(root):
        _ensure_index(root, folder)
        last = next(_lines_from_end(root / INDEX), None)
        entry = _entry(summary, folder, (last["seq"] if last else 0) + 1)
        with open(root / INDEX, "a") as f:
            f.write(json.dumps(entry) + "\n")
    return entry


def run_page(root: Path, *, limit: int, before: int | None = None) -> RunPage:
    """Up to `limit` runs, newest first, of those with `seq` below `before` (None: the latest)."""
    runs: list[dict[str, Any]] = []
    older = None
    if not (root / INDEX).exists() and (root / "runs").is_dir():
        with _locked(root):
            _ensure_index(root)
    seen: set[str] = set()
    for entry in _lines_from_end(root / INDEX):
        if entry["folder"] in seen:  # an earlier attempt of a run that wrote its folder again (a retry)
            continue
        seen.add(entry["folder"])
        if before is not None and entry["seq"] >= before:
            continue
        if len(runs) == limit:
            older = runs[-1]["seq"]
            break
        runs.append(entry)
    return RunPage(tuple(runs), older)


def expire_runs(root: Path, *, keep: int, keep_failed: int, now_s: float | None = None) -> int:
    """Keep the latest `keep` runs and the latest `keep_failed` failed ones besides; remove the others' folders
    and index lines, and run folders the index does not name that are older than ORPHAN_AGE_S. Returns the number
    of run folders removed."""
    if not root.is_dir():
        return 0
    with _locked(root):
        _ensure_index(root)
        lines = list(_lines_from_end(root / INDEX))  # newest first; bounded by the retention between two calls
        entries = list({e["folder"]: e for e in reversed(lines)}.values())  # a retried run: its latest line
        entries.sort(key=lambda e: e["seq"], reverse=True)
        failed = [e for e in entries[keep:] if not e["success"]][:keep_failed]
        kept = {id(e) for e in entries[:keep] + failed}
        gone = [e for e in entries if id(e) not in kept]
        if len(kept) < len(lines):
            _write_index(root, [e for e in reversed(entries) if id(e) in kept])
        named = {e["folder"] for e in entries}
        removed = 0
        for e in gone:
            if (root / "runs" / e["folder"]).is_dir():
                shutil.rmtree(root / "runs" / e["folder"])
                removed += 1
        now_s = time.time() if now_s is None else now_s
        if (root / "runs").is_dir():
            for d in os.scandir(root / "runs"):
                if d.is_dir() and d.name not in named and now_s - d.stat().st_mtime > ORPHAN_AGE_S:
                    shutil.rmtree(d.path)
                    removed += 1
        return removed
