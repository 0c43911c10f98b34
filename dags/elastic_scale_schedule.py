"""elastic_scale_schedule: scheduled scale changes.

Every 5 minutes, for each job whose config has `job.elasticity.schedule`
(`<cron> -> <factor>; ...`), apply the factor of the rule that fired last through
the same rescale path as elastic_rescale, job by job: a job whose batch holds the
lease is tried again after the others, and a decision the job moved past meanwhile
is dropped. A rescale a person asked for holds against it for
`job.elasticity.manual.hold.ms` (default one hour; the log says until when). Every
applied rescale is recorded with its origin and followed by the job's data-quality
run. The autosizer (`job.elasticity.autosize=true`) does not wait for this DAG: its
loop in Airflow's triggerer starts elastic_autosize__<job> when a decision holds.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, task

with DAG(
    dag_id="elastic_scale_schedule",
    description="Apply scheduled elasticity factors",
    doc_md=__doc__,
    schedule="*/5 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    tags=["elasticity", "rescale", "schedule"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
) as dag:

    @task
    def apply_schedules(**context) -> list[str]:
        """The data-quality DAGs of the jobs it rescaled."""
        from elasticity.airflow.tasks import apply_scale_decisions

        return apply_scale_decisions(context["run_id"], context["ti"].try_number)

    TriggerDagRunOperator.partial(
        task_id="trigger_data_quality",
        conf={"reason": "after scheduled rescale"},
        wait_for_completion=False,
    ).expand(trigger_dag_id=apply_schedules())
