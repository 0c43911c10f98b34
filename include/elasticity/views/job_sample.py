"""What a Prometheus scrape reads of one job (`elasticity.metrics.exposition.JobSample`): one pass over the
checkpoint store (the current generation and its checkpoints, the latest batches' summaries, the last hour's
freshness columns, the latest rescale, data-quality run and failed attempts) and the brokers' high watermarks
for the lag, as the job page reads them, so whichever worker ran a batch, every API server answers the same."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from elasticity.batch.coordinator.job_coordinator import Inputs, JobCoordinator
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.metrics.exposition import JobSample, QualityCheck
from elasticity.views.jobview import last_hour_freshness

RATE_WINDOW_MS = 300_000  # records and batches per second: over the batches committed in the last 5 minutes...
RATE_BATCHES = 50  # ...of the latest this many (the job page reads as many): a busier job's window is their span
FAILURES_READ = 100  # failed attempts read to count those of the last hour
HOUR_MS = 3_600_000


def committed_ms(m: Mapping[str, Any]) -> int | None:
    return m.get("committed_ms") or m.get("finished_ms") or None


def rates(batches: Sequence[Mapping[str, Any]], now_ms: int) -> tuple[float | None, float | None, float | None]:
    """(records/s, batches/s, window s) over the batches committed in the RATE_WINDOW_MS before `now_ms`; when
    all of `batches` (the latest RATE_BATCHES) fall in it, over the span from the oldest's commit instead, that
    batch left out (its records were read before the span began). (None, None, None): no batch in the window."""
    timed = [(t, m) for m in batches if (t := committed_ms(m)) is not None]
    start = now_ms - RATE_WINDOW_MS
    inside = [(t, m) for t, m in timed if start < t <= now_ms]
    if len(inside) >= RATE_BATCHES and len(inside) == len(timed):
        start, inside = inside[0][0], inside[1:]
    if not inside:
        return None, None, None
    span_s = max((now_ms - start) / 1000, 1e-3)
    records = sum(int(m.get("records_read", 0)) for _, m in inside)
    return records / span_s, len(inside) / span_s, span_s


def sample_job(config: JobConfig, store: CheckpointStore, inputs: Inputs, *, now_ms: int | None = None) -> JobSample:
    now = int(time.time() * 1000) if now_ms is None else now_ms
    job = config.job_name
    current = JobCoordinator(config, store, inputs).current()
    failures = store.failures(job, limit=FAILURES_READ)
    runs = store.quality_runs(job, limit=1)
    quality = runs[0] if runs else None
    fields: dict[str, Any] = {
        "failed_attempts_last_hour": sum(1 for f in failures if f.created_ms > now - HOUR_MS),
        "last_failure_ms": failures[0].created_ms if failures else None,
    }
    if quality is not None:
        fields.update(
            quality_success=quality.success,
            quality_finished_ms=quality.finished_ms,
            quality_checks=tuple(QualityCheck(name=c["name"], success=bool(c["success"])) for c in json.loads(quality.checks)),
        )
    if current is None:
        return JobSample(job=job, **fields)
    batches = store.metrics(job, limit=RATE_BATCHES)
    records_s, batches_s, window_s = rates(batches, now)
    latest = batches[-1] if batches else None
    rescales = store.rescale_metrics(job, limit=1)
    fields.update(
        generation=current.number,
        factor=current.factor,
        virtual_tasks=len(current.job_model.tasks()),
        generation_created_ms=current.created_ms,
        freshness=last_hour_freshness(store, job, now),
        records_per_second=records_s,
        batches_per_second=batches_s,
        rate_window_s=window_s,
        last_batch_id=latest["batch_id"] if latest else None,
        last_batch_ms=committed_ms(latest) if latest else None,
    )
    if rescales:
        r = rescales[-1]
        fields.update(
            rescale_generation=r.get("generation"),
            rescale_ns={k: v for k, v in r.items() if k.endswith("-ns") and isinstance(v, int)},
        )
    try:  # the current model's checkpoints against fresh high watermarks, as the job page
        report = lag_report(config, store, inputs)
    except (ConnectionError, OSError, RuntimeError) as e:
        fields["lag_error"] = str(e)
    else:
        fields.update(lag=report.total, lag_exact=report.exact, lag_per_partition=dict(report.per_ssp))
    return JobSample(job=job, **fields)
