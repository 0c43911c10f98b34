"""Retention: what keeps a job that runs for months bounded. `maintain` runs each step of `STEPS` against the
checkpoint store and the report location and returns what each removed; the maintenance DAG calls it every hour.

A step gets the job's config, store, the time and the batch data quality validated last (the edge, read from
the store whichever worker validated it: what a step may expire up to, so the next data-quality window still
finds its batches), and returns a count, or a frozen dataclass of counts. No Airflow and no Spark here; the
data-quality modules (the [quality] extra) are imported by the steps that read the reports."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, is_dataclass

from elasticity.batch.sinks.compaction import compact_sinks
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig

log = logging.getLogger(__name__)
INDEX_METRICS = 200  # batches charted on the rolling data-quality page, as a data-quality run charts them


@dataclass(frozen=True)
class Maintenance:
    """What every step gets."""

    config: JobConfig
    store: CheckpointStore
    now_ms: int
    validated_batch: int  # the last batch data quality passed (0: none yet)

    @property
    def job(self) -> str:
        return self.config.job_name

    @property
    def report_location(self) -> str:
        return self.config.report_location


Step = Callable[[Maintenance], object]
"""Returns what it removed: an int, or a dataclass whose int fields are counts."""


def _report_runs(m: Maintenance) -> int:
    """Runs beyond `quality.report.retain.*` (index rows and folders), then the rolling page again, so it links
    no removed run."""
    from elasticity.quality import history  # the [quality] extra's: its reports exist only where it is installed
    from elasticity.quality.report import write_index
    from elasticity.quality.report_files import ReportFiles

    reports = ReportFiles(m.report_location)
    removed = history.expire_runs(
        m.store, m.job, reports, keep=m.config.quality_retain_runs, keep_failed=m.config.quality_retain_failed_runs
    )
    if removed and reports.exists("summary.html"):
        write_index(reports, m.store, m.job, m.store.metrics(m.job, limit=INDEX_METRICS))
    return removed


def _sinks(m: Maintenance) -> int:
    """The Parquet sinks' compaction and retention (outputs, audit rows, dead letters) up to the validated batch:
    the files it removed, net of those it wrote."""
    done = compact_sinks(m.config, through_batch=m.validated_batch, now_ms=m.now_ms)
    return done.files_before - done.files_after


STEPS: tuple[tuple[str, Step], ...] = (
    ("sink_files", _sinks),
    (
        "batch_plans",
        lambda m: m.store.expire_plans(
            m.job, before_ms=m.now_ms - m.config.batches_retention_ms, through_batch=m.validated_batch
        ),
    ),
    ("metrics", lambda m: m.store.expire_metrics(m.job, before_ms=m.now_ms - m.config.metrics_retention_ms)),
    ("attempt_failures", lambda m: m.store.expire_failures(m.job, before_ms=m.now_ms - m.config.metrics_retention_ms)),
    ("engine_health", lambda m: m.store.expire_engine_health(before_ms=m.now_ms - m.config.metrics_retention_ms)),
    (
        "transactional_ids",
        lambda m: m.store.expire_transactional_ids(m.job, before_ms=m.now_ms - m.config.transactions_retention_ms),
    ),
    ("checkpoints", lambda m: m.store.expire_checkpoints(m.job)),
    ("generations", lambda m: m.store.expire_generations(m.job, before_ms=m.now_ms - m.config.generations_retention_ms)),
    ("report_runs", _report_runs),
)
"""Each retention step, in order (a step's name prefixes its counts in the report)."""


@dataclass(frozen=True)
class MaintenanceReport:
    job: str
    now_ms: int
    validated_batch: int
    removed: Mapping[str, int]  # step (or step.count) -> rows, files or run folders removed

    def line(self) -> str:
        counts = ", ".join(f"{k} {v:,}" for k, v in self.removed.items())
        return f"maintenance of {self.job} (data quality validated through batch {self.validated_batch}): removed {counts}"


class MaintenanceFailed(RuntimeError):
    pass


def _counts(name: str, result: object) -> dict[str, int]:
    if isinstance(result, int):
        return {name: result}
    if is_dataclass(result) and not isinstance(result, type):
        return {f"{name}.{k}": v for k, v in asdict(result).items() if isinstance(v, int)}
    raise TypeError(f"maintenance step {name!r} returned {type(result).__name__}: expected an int or a dataclass of counts")


def maintain(
    config: JobConfig, store: CheckpointStore, *, now_ms: int, steps: tuple[tuple[str, Step], ...] = STEPS
) -> MaintenanceReport:
    """Run every step; one that fails does not keep the others from running, and fails the whole afterwards."""
    m = Maintenance(config, store, now_ms, store.validated_batch(config.job_name))
    removed: dict[str, int] = {}
    failed = []
    for name, step in steps:
        try:
            removed |= _counts(name, step(m))
        except Exception as e:
            log.exception("maintenance of %s: step %s failed", m.job, name)
            failed.append(f"{name}: {e}")
    report = MaintenanceReport(m.job, now_ms, m.validated_batch, removed)
    if failed:
        raise MaintenanceFailed(f"{report.line()}; failed: {'; '.join(failed)}")
    return report
