"""Task bodies of the DAGs: thin wrappers over the library, run inside Airflow tasks."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from ..autosize import AutosizePolicy, BatchSample, Recommendation, parse_schedule, recommend, scheduled_factor
from ..checkpoint.store import CheckpointStore, LeaseHeldError
from ..config import JobConfig, load_config
from ..coordinator import JobCoordinator
from ..kafka.consumer import KafkaInputs
from .hooks import ElasticityHook, job_configs

log = logging.getLogger(__name__)
LEASE_WAIT_S = 600


def open_job(job: str) -> tuple[JobConfig, CheckpointStore, JobCoordinator]:
    ElasticityHook().apply()
    configs = job_configs()
    if job not in configs:
        raise ValueError(f"job {job!r} has no config in the jobs folder; known: {sorted(configs)}")
    config = load_config(configs[job])
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    return config, store, JobCoordinator(config, store, KafkaInputs(config))


def rescale(job: str, factor: int | None, dry_run: bool, owner: str, reason: str) -> dict[str, Any]:
    """Migrate under the job's lease; a running batch is allowed to finish first."""
    config, store, coordinator = open_job(job)
    old = coordinator.current()
    if dry_run:
        plan = coordinator.plan_rescale(factor)
        log.info("dry run of %s:\n%s", reason, plan.migration.describe() if plan.migration else "nothing to change")
        return {"job": job, "dry_run": True, "old_generation": old.number if old else None, "new_generation": None}
    deadline = time.monotonic() + LEASE_WAIT_S
    while True:
        try:
            plan = coordinator.rescale(factor, owner=owner, trigger=reason)
            break
        except LeaseHeldError as e:
            if time.monotonic() > deadline:
                raise
            log.info("waiting for the running batch to finish: %s", e)
            time.sleep(5)
    if plan.migration is None:
        log.info("%s: already at factor %s, nothing to change", job, plan.factor)
    else:
        log.info("%s (%s):\n%s", job, reason, plan.migration.describe())
    new = coordinator.current()
    return {"job": job, "dry_run": False, "old_generation": old.number if old else None, "new_generation": new.number if new else None,
            "old_factor": old.factor if old else None, "new_factor": new.factor if new else None, "reason": reason}


def batches_of_run(job: str, owner: str) -> list[dict[str, Any]]:
    """The summaries of the batches a run committed (they carry their owner)."""
    _, store, _ = open_job(job)
    return [m for m in store.metrics(job, limit=50) if m.get("owner") == owner and m.get("batch_id") is not None]


def samples(metrics: list[dict[str, Any]], created: dict[int, int]) -> list[BatchSample]:
    out = []
    for m in metrics:
        at = created.get(m["batch_id"], 0)
        out.append(BatchSample(at, m["factor"], m["records_read"], m["durations_ms"].get("process", 0) / 1000, m["lag_left"]))
    return out


def desired_factor(job: str, now: datetime | None = None) -> Recommendation | None:
    """What the schedule or the autosizer wants for this job, or None when it has neither."""
    config, store, coordinator = open_job(job)
    current = coordinator.current()
    if current is None:
        return None
    now = now or datetime.now(UTC)
    rules = config.get("job.elasticity.schedule")
    if rules:
        factor = scheduled_factor(parse_schedule(rules), now)
        return Recommendation(factor, f"schedule {rules!r}")
    if config.get("job.elasticity.autosize") != "true":
        return None
    policy = AutosizePolicy(
        min_factor=int(config.get("job.elasticity.autosize.min") or 1),
        max_factor=int(config.get("job.elasticity.autosize.max") or 16),
        cooldown_ms=int(config.get("job.elasticity.autosize.cooldown.ms") or 600_000),
        target_lag_s=float(config.get("job.elasticity.autosize.target.lag.seconds") or 60),
    )
    metrics = store.metrics(job, limit=20)
    at = {m["batch_id"]: m.get("finished_ms", 0) for m in metrics}
    return recommend(samples(metrics, at), current.factor, current.created_ms, int(now.timestamp() * 1000), policy)


def quality(job: str, from_batch: int | None, to_batch: int | None, report_dir: str | None) -> dict[str, Any]:
    from ..quality.runner import QualityFailed, run_quality

    config, store, _ = open_job(job)
    result, summary = run_quality(config, store, KafkaInputs(config), from_batch, to_batch, report_dir)
    log.info("data quality of %s: %s\nreport: %s\ndata docs: %s", job, "PASSED" if result.success else "FAILED", summary, result.data_docs)
    for c in result.checks:
        log.info("%-13s %s  rows=%d unexpected=%d %s", c.name, "PASS" if c.success else "FAIL", c.rows, c.unexpected, ", ".join(c.examples[:5]))
    if not result.success:
        raise QualityFailed(f"data quality of {job} failed: {result.failure_message()} (report: {summary})")
    return {"job": job, "report": str(summary), "data_docs": result.data_docs, "checks": json.loads(summary.with_suffix(".json").read_text())["checks"]}
