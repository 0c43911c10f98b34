"""The data-quality runs of a job: an index in the checkpoint store, one compact row per kept run, which the
rolling summary page and the job page read a page of, newest first, so what they read does not grow with the
job's age, and any process (a worker, the API server) reads what a run on another wrote. Each run's full report
stays in `runs/<folder>/` of the job's report location; retention removes a run's row, then its folder, so
nothing links a removed run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from elasticity.checkpoint.store import CheckpointStore, QualityRun
from elasticity.quality.report_files import ReportFiles, public

CHECK_FIELDS = ("name", "success", "rows", "unexpected", "describe")
ORPHAN_AGE_S = 86_400
"""A run folder the index does not name (its run died before finishing) is removed once this old."""


@dataclass(frozen=True)
class RunPage:
    """A page of runs, newest first, and the `before` that asks for the next older page (None: no older run)."""

    runs: tuple[dict[str, Any], ...]
    older: int | None


def folder_of(report: str) -> str:
    """A run's folder name: the last part of its report's location."""
    return report.partition("?")[0].rstrip("/").rsplit("/", 1)[-1]


def entry(run: QualityRun) -> dict[str, Any]:
    """A run as the pages and `/api/jobs/<job>/quality` show it."""
    return {
        "seq": run.seq,
        "run": run.run,
        "folder": folder_of(run.report),
        "report": run.report,
        "window": json.loads(run.window),
        "success": run.success,
        "finished_ms": run.finished_ms,
        "checks": json.loads(run.checks),
    }


def record_run(store: CheckpointStore, job: str, summary: dict[str, Any], report: ReportFiles) -> dict[str, Any]:
    """Index a finished run (its files at `report` written); returns its entry. What the index keeps of the
    summary: no window's batch list, no check's examples."""
    run = QualityRun(
        seq=0,
        run=summary["run"],
        report=public(report.location),
        window=json.dumps(summary["window"]),
        success=bool(summary["success"]),
        checks=json.dumps([{k: c[k] for k in CHECK_FIELDS if k in c} for c in summary["checks"]]),
        finished_ms=int(summary["finished_ms"]),
    )
    seq = store.record_quality_run(job, run)
    return entry(QualityRun(**{**run.__dict__, "seq": seq}))


def run_page(store: CheckpointStore, job: str, *, limit: int, before: int | None = None) -> RunPage:
    """Up to `limit` runs, newest first, of those with `seq` below `before` (None: the latest)."""
    found = store.quality_runs(job, limit=limit + 1, before=before)
    runs = tuple(entry(r) for r in found[:limit])
    return RunPage(runs, runs[-1]["seq"] if len(found) > limit else None)


def expire_runs(
    store: CheckpointStore, job: str, reports: ReportFiles, *, keep: int, keep_failed: int, now_s: float | None = None
) -> int:
    """Keep the latest `keep` runs and the latest `keep_failed` failed ones besides; remove the others' rows and
    folders, and run folders under `reports` the index does not name that are older than ORPHAN_AGE_S. Returns
    the number of run folders removed."""
    gone = store.expired_quality_runs(job, keep=keep, keep_failed=keep_failed)
    store.remove_quality_runs(job, [r.seq for r in gone])
    removed = sum(reports.files_of(r.report).remove_folder() for r in gone)
    named = {folder_of(r.report) for r in store.quality_runs(job, limit=keep + keep_failed)}
    for folder, age_s in reports.folder_ages("runs", now_s).items():
        if folder not in named and age_s > ORPHAN_AGE_S:
            removed += reports.child(f"runs/{folder}").remove_folder()
    return removed
