"""elastic_microbatch__<job>: one DAG per job config in the jobs folder
(ELASTICITY_JOBS_DIR, default include/jobs).

Every minute (airflow.microbatch.schedule), never two runs of a job at once
(max_active_runs=1, plus the job's lease), spark-submit runs one micro-batch of
spark_apps/run_batch.py on the `spark_default` connection; then an Asset event
per committed batch carries its summary. Retrying is safe: a failed batch's plan
was written ahead and replays the same ranges, overwriting its own outputs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowSkipException

from elasticity.airflow.assets import batches_asset
from elasticity.airflow.hooks import job_configs
from elasticity.airflow.operators import MicroBatchOperator
from elasticity.config import parse_properties

for job, path in job_configs().items():
    props = parse_properties(path.read_text())
    with DAG(
        dag_id=f"elastic_microbatch__{job}",
        description=f"Micro-batches of elastic job {job} ({path.name})",
        doc_md=__doc__,
        schedule=props.get("airflow.microbatch.schedule", "*/1 * * * *"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        tags=["elasticity", "microbatch", job],
        default_args={"retries": 3, "retry_delay": timedelta(seconds=20)},
    ) as dag:
        run_batch = MicroBatchOperator(task_id="run_batch", conn_id="spark_default", config_path=str(path), name=f"elasticity-{job}")

        @task(outlets=[batches_asset(job)])
        def publish(job: str = job, **context) -> list[int]:
            """An Asset event per committed batch, carrying the batch summary."""
            from elasticity.airflow.tasks import batches_of_run

            committed = batches_of_run(job, context["run_id"])
            if not committed:
                raise AirflowSkipException("no batch committed (nothing to read)")
            keys = ("job", "batch_id", "generation", "factor", "records_read", "processed", "dead_lettered", "skipped", "lag_left", "durations_ms")
            context["outlet_events"][batches_asset(job)].extra = {  # a run commits one batch; its summary rides along
                **{k: committed[-1][k] for k in keys}, "batch_ids": [s["batch_id"] for s in committed]
            }
            return [s["batch_id"] for s in committed]

        run_batch >> publish()
    globals()[dag.dag_id] = dag
