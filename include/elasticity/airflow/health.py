"""What the job page says is wrong: whether the engine (the Spark Connect server the job's batches run on)
answers, and since when; the micro-batch run in progress, for how long, which attempt, what the last failed
attempt said, and whether it is stuck past its expected time. Read inside Airflow's API server."""

from __future__ import annotations

import json
import time
from pathlib import Path

from elasticity.config import JobConfig, elasticity_home
from elasticity.views.jobview import EngineHealth, RunInProgress

PAGE_PROBE_S = 3.0  # the page never waits longer on a dead or silent engine
RUN_MARGIN_S = 120.0  # a run may take this long beyond airflow.microbatch.max.seconds (its last batch, the commit)


def _state_dir() -> Path:
    path = elasticity_home() / "airflow-health"
    path.mkdir(parents=True, exist_ok=True)
    return path


def engine_health(url: str) -> EngineHealth:
    """Probe the Connect server at `url`; since when it has answered (or not) is remembered per address."""
    from elasticity.spark.session import EngineUnreachable, connect_address, probe_connect

    address = f"sc://{connect_address(url)}"
    try:
        probe_connect(url, PAGE_PROBE_S)
        reachable, error = True, None
    except EngineUnreachable as e:
        reachable, error = False, str(e)
    path = _state_dir() / "engines.json"
    try:
        seen = json.loads(path.read_text())
    except (OSError, ValueError):
        seen = {}
    last = seen.get(address)
    if last is None or last["reachable"] != reachable:
        last = seen[address] = {"reachable": reachable, "since_ms": int(time.time() * 1000)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(seen))
        tmp.replace(path)
    return EngineHealth(address, reachable, last["since_ms"], error)


def record_failure(job: str, run_id: str, attempt: int, error: BaseException) -> None:
    """The micro-batch task's failed attempt, in one line, for the page."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
    (_state_dir() / f"{job}.json").write_text(json.dumps({"run_id": run_id, "attempt": attempt, "error": line}))


def run_in_progress(job: str, config: JobConfig) -> RunInProgress | None:
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
    try:
        failure = json.loads((_state_dir() / f"{job}.json").read_text())
    except (OSError, ValueError):
        failure = {}
    expected_s = config.microbatch_max_seconds + RUN_MARGIN_S
    return RunInProgress(
        run_id=run_id,
        started_ms=started_ms,
        attempt=attempt,
        expected_s=expected_s,
        stuck=time.time() * 1000 - started_ms > expected_s * 1000,
        last_error=failure.get("error") if failure.get("run_id") == run_id else None,
    )
