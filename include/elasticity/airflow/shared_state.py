"""Whether what one process writes reaches the processes that read it back. Under a distributed executor
(Celery, Kubernetes, ...) each task attempt runs on whichever worker takes it, and the API server on its own
host: a location on one machine's disk splits over hosts (a data-quality report one worker wrote never opens
on the job page; a SQLite checkpoint store is another store on each worker). Airflow's executor is read here,
in the Airflow layer only; a job's config check warns, it does not refuse (a shared mount is a folder too)."""

from __future__ import annotations

import logging
import warnings
from functools import cache

from elasticity.config import ConfigWarning, JobConfig

log = logging.getLogger(__name__)
ONE_HOST_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})
"""Executors whose tasks run on the scheduler's own host (beside the API server in `airflow standalone`)."""


def executors() -> tuple[str, ...]:
    """Airflow's configured executors ([core] executor, AIRFLOW__CORE__EXECUTOR: a comma-separated list, each a
    name, an alias `alias:module.Class`, or a class path), as class names."""
    from airflow.sdk.configuration import conf

    found = (conf.get("core", "executor", fallback="") or "").split(",")
    return tuple(e.strip().rsplit(":", 1)[-1].rsplit(".", 1)[-1] for e in found if e.strip())


def one_host_only(config: JobConfig, executor_names: tuple[str, ...]) -> list[str]:
    """What the job keeps on one host's disk although the executors run its tasks on other hosts."""
    distributed = sorted(set(executor_names) - ONE_HOST_EXECUTORS)
    if not distributed:
        return []
    notes = []
    where = config.report_location
    if "://" not in where:
        notes.append(
            f"job {config.job_name!r}: its data-quality reports go to the folder {where} on the disk of the worker "
            f"that runs the check, while Airflow's executor ({', '.join(distributed)}) runs tasks on other hosts: the "
            "job page (on the API server's host) does not find them; set job.report.path, or blob.store.uri, to an "
            "object store every worker and the API server reach (s3://bucket/prefix), or to a shared mount"
        )
    sinks = [
        f"{k}={v}" for k, v in (("job.output.path", config.output_dir), ("job.audit.path", config.audit_dir)) if "://" not in v
    ]
    if sinks:
        notes.append(
            f"job {config.job_name!r}: {', '.join(sinks)} on one host's disk while Airflow's executor "
            f"({', '.join(distributed)}) runs tasks on other hosts: the micro-batch task writes them, data quality and "
            "maintenance on another worker read them; set them to an object store (s3://bucket/prefix) or a shared mount"
        )
    url = config.checkpoint_store_url()
    if url.startswith("sqlite"):
        notes.append(
            f"job {config.job_name!r}: its checkpoint store is SQLite on one host's disk ({url}) while Airflow's "
            f"executor ({', '.join(distributed)}) runs tasks on other hosts; use PostgreSQL (task.checkpoint.store.url "
            "or the elasticity_store connection)"
        )
    return notes


@cache
def _warned(note: str) -> None:
    warnings.warn(note, ConfigWarning, stacklevel=4)
    log.warning("%s", note)


def check_shared_state(config: JobConfig) -> list[str]:
    """Warn (once per process) for each location of the job on one host's disk under a distributed executor."""
    notes = one_host_only(config, executors())
    for note in notes:
        _warned(note)
    return notes
