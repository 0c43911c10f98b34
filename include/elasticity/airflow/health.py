"""What the job page says is wrong: whether the engine (the Spark Connect server the job's batches run on)
answers, and since when; the micro-batch run in progress, for how long, which attempt, what the last failed
attempt said, and whether it is stuck past its expected time. Read inside Airflow's API server.

Both are kept in the job's checkpoint store: a failure is recorded by the worker that ran the attempt, and
read back by the API server on another host; an engine's health is shared by every API server process."""

from __future__ import annotations

import logging
import time

from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.views.jobview import EngineHealth, RunInProgress

log = logging.getLogger(__name__)

PAGE_PROBE_S = 3.0  # the page never waits longer on a dead or silent engine
RUN_MARGIN_S = 120.0  # a run may take this long beyond airflow.microbatch.max.seconds (its last batch, the commit)


def engine_health(store: CheckpointStore, url: str) -> EngineHealth:
    """Probe the Connect server at `url`; since when it has answered (or not) is remembered per address."""
    from elasticity.spark.session import EngineUnreachable, connect_address, probe_connect

    address = f"sc://{connect_address(url)}"
    try:
        probe_connect(url, PAGE_PROBE_S)
        reachable, error = True, None
    except EngineUnreachable as e:
        reachable, error = False, str(e)
    state = store.engine_probed(address, reachable=reachable)
    return EngineHealth(address, reachable, state.since_ms, error)


def record_failure(store: CheckpointStore, job: str, error: BaseException, *, run_id: str, attempt: int, task: str) -> None:
    """A task's failed attempt, in one line, for the page; a store that fails too leaves the attempt's own
    error to be raised (it says more)."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
    try:
        store.record_failure(job, run_id=run_id, attempt=attempt, task=task, error=line)
    except Exception as e:  # the attempt's error is the one to raise
        log.warning("could not record the failure of %s attempt %d in the store: %s", run_id, attempt, e)


def run_in_progress(job: str, config: JobConfig, store: CheckpointStore) -> RunInProgress | None:
    """The running run of the job's micro-batch DAG, from Airflow's metadata database."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import select

    dag_id = f"elastic_microbatch__{job}"
    with create_session() as session:
        run = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.state == DagRunState.RUNNING).order_by(DagRun.start_date.desc())
        ).first()
        if run is None or run.start_date is None:
            return None
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id, TaskInstance.task_id == "run_batches"
            )
        ).first()
        attempt = max(1, ti.try_number) if ti is not None else 1
        run_id, started_ms = run.run_id, int(run.start_date.timestamp() * 1000)
    failure = store.last_failure(job, run_id, "run_batches")
    expected_s = config.microbatch_max_seconds + RUN_MARGIN_S
    return RunInProgress(
        run_id=run_id,
        started_ms=started_ms,
        attempt=attempt,
        expected_s=expected_s,
        stuck=time.time() * 1000 - started_ms > expected_s * 1000,
        last_error=failure.error if failure is not None else None,
    )
