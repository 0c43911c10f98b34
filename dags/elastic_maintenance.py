"""elastic_maintenance__<job>: retention, so that a job running for months stays bounded.

On `airflow.maintenance.schedule` (hourly), one task applies the job's retention keys: committed and
abandoned batch plans older than `job.batches.retention.ms` (up to the last batch data quality validated;
never a pending plan nor the latest one), batch and rescale metrics older than `metrics.retention.ms` (the
latest stays), closed Kafka transactional ids older than `job.transactions.retention.ms`, checkpoints of the
generations before the previous one, generations older than `job.generations.retention.ms` (never the first,
the current or the previous), and data-quality run folders beyond `quality.report.retain.runs` and
`quality.report.retain.failed.runs`. Every delete is a short statement of at most a thousand rows, so a
running micro-batch is not held up; the task returns what each step removed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from elasticity.airflow.hooks import job_configs
from elasticity.config import key_value, parse_properties

for job, path in job_configs().items():
    with DAG(
        dag_id=f"elastic_maintenance__{job}",
        description=f"Retention of elastic job {job}",
        doc_md=__doc__,
        schedule=key_value(parse_properties(path.read_text()), "airflow.maintenance.schedule"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["elasticity", "maintenance", job],
        default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    ) as dag:

        @task
        def apply_retention(job: str = job) -> dict:
            from elasticity.airflow.tasks import maintenance

            return maintenance(job)

        apply_retention()
    globals()[dag.dag_id] = dag
