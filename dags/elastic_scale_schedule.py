"""elastic_scale_schedule: scheduled scale changes.

Every 5 minutes, for each job whose config has `job.elasticity.schedule`
(`<cron> -> <factor>; ...`) or `job.elasticity.autosize=true` (a factor from lag
and measured processing rate, within min/max bounds and a cool-down), apply the
desired factor through the same rescale path as elastic_rescale.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

with DAG(
    dag_id="elastic_scale_schedule",
    description="Apply scheduled and autosized elasticity factors",
    doc_md=__doc__,
    schedule="*/5 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["elasticity", "rescale", "autosize"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
) as dag:

    @task
    def apply_schedules(**context) -> list[dict]:
        from elasticity.airflow.hooks import job_configs
        from elasticity.airflow.tasks import desired_factor, open_job, rescale

        changes = []
        for job in job_configs():
            want = desired_factor(job)
            if want is None:
                continue
            _, _, coordinator = open_job(job)
            current = coordinator.current()
            if current is not None and want.factor != current.factor:
                changes.append(rescale(job, want.factor, False, owner=f"schedule:{context['run_id']}", reason=want.reason))
        return changes

    apply_schedules()
