"""elastic_replay: reprocess a job's input from a time, or from the earliest retained offset.

Trigger with params `job`, `start` (`earliest`, an ISO 8601 time such as
2026-11-29T04:00:00Z, or epoch milliseconds), `outputs` (`new-version` or
`replace`) and `dry_run`. The task takes the job's lease (a running batch is
allowed to finish first), finds each input partition's offset for the time with
Kafka's ListOffsets, clears the job's stores, and writes a new generation (origin
`replay`, the same factor) that starts there; the next batches reprocess the
range and rebuild the stores. A replay whose stores cannot be rebuilt from the
retained input is refused with the reason, nothing changed. A data-quality run
of the job follows. See the Reprocessing page of the docs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Param, task

from elasticity.airflow.hooks import job_configs

JOBS = sorted(job_configs()) or ["demo"]

with DAG(
    dag_id="elastic_replay",
    description="Reprocess a job's input from a time or the earliest offset (a new generation, stores rebuilt)",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    tags=["elasticity", "replay"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    params={
        "job": Param(JOBS[0], type="string", enum=JOBS, description="The job to replay"),
        "start": Param(
            "earliest",
            type="string",
            minLength=1,
            description="Where to start: 'earliest' (each partition's earliest retained offset), an ISO 8601 time "
            "(2026-11-29T04:00:00Z; UTC unless it names its offset) or epoch milliseconds; records at or after it are replayed",
        ),
        "outputs": Param(
            "new-version",
            type="string",
            enum=["new-version", "replace"],
            description="The replayed range's Parquet outputs: a new version beside the old (told apart by the "
            "generation column), or replacing the old rows of the range",
        ),
        "dry_run": Param(False, type="boolean", description="Only print where each partition would start"),
    },
) as dag:

    @task
    def replay(**context) -> dict:
        from elasticity.airflow.tasks import replay as do_replay

        p = context["params"]
        return do_replay(
            p["job"],
            str(p["start"]),
            outputs=str(p["outputs"]),
            dry_run=bool(p["dry_run"]),
            owner=f"replay:{context['run_id']}",
            try_number=context["ti"].try_number,
            reason=f"elastic_replay run {context['run_id']}",
        )

    @task.short_circuit
    def applied(result: dict) -> bool:
        """A data-quality run follows every replay written."""
        return result["applied"]

    result = replay()
    applied(result) >> TriggerDagRunOperator(
        task_id="trigger_data_quality",
        trigger_dag_id="elastic_data_quality__{{ params.job }}",
        conf={"reason": "after replay"},
        wait_for_completion=False,
    )
