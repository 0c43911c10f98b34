"""The data-quality report files as the job page serves them (`/reports/<job>/<path>`): a run's file read from
wherever its run put it (the index in the store says where: the job's object store, or a folder), so a report
a worker on one host wrote opens from the API server on another; the rolling summary rendered from the index,
so it lists exactly the kept runs. No Airflow here."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath

from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.quality.history import run_page
from elasticity.quality.report_files import ReportFiles

INDEX_METRICS = 200  # batches charted on the rolling page, as a data-quality run charts them


@dataclass(frozen=True)
class ReportFile:
    body: bytes
    media_type: str


def report_file(config: JobConfig, store: CheckpointStore, path: str) -> ReportFile:
    """The file at `path` under the job's reports; FileNotFoundError when there is none (or a removed run's)."""
    parts = PurePosixPath(path).parts
    if not parts or ".." in parts or path.startswith("/"):
        raise FileNotFoundError(path)
    media = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
    job = config.job_name
    if parts == ("summary.html",):
        from elasticity.quality.report import INDEX_RUNS, index_html  # the [quality] extra's: its reports exist only with it

        page = run_page(store, job, limit=INDEX_RUNS)
        return ReportFile(index_html(job, page, store.metrics(job, limit=INDEX_METRICS)).encode(), media)
    reports = ReportFiles(config.report_location)
    if parts[0] == "runs" and len(parts) > 2:
        run = store.quality_run(job, parts[1])
        if run is None:
            raise FileNotFoundError(path)
        return ReportFile(reports.files_of(run.report).read_bytes("/".join(parts[2:])), media)
    return ReportFile(reports.read_bytes(path), media)
