"""elastic_autosize__<job>: the autosizer's rescales, one DAG per job with
`job.elasticity.autosize=true`.

The autosizer runs in Airflow's triggerer (the watcher of the job's
`elastic_autosize__<job>` asset): every few seconds it reads the job's exact lag
and its inputs' high watermarks and sizes the job with a DS2 controller (each
virtual task's true rate, the per-key order limit, the threads, a scalability
coefficient fitted from the job's own rescales). A change that has held for
`job.elasticity.autosize.confirm.ms` starts this DAG, which applies it through the
same rescale path as elastic_rescale, with origin `autosize` and the decision kept
with the new generation (the job page shows it with its prediction curve), only if
the generation it was decided on is still current. Cool-downs: short after a
change before scaling up, longer before scaling down; never down while lag is above
target; a person's rescale holds (`job.elasticity.manual.hold.ms`). A data-quality
run follows every applied rescale.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, task

from elasticity.airflow.assets import autosize_asset
from elasticity.airflow.hooks import job_configs
from elasticity.config import key_value, parse_properties

for job, path in job_configs().items():
    props = parse_properties(path.read_text())
    if not key_value(props, "job.elasticity.autosize"):
        continue
    with DAG(
        dag_id=f"elastic_autosize__{job}",
        description=f"The autosizer's rescales of elastic job {job}",
        doc_md=__doc__,
        schedule=[autosize_asset(job, str(path), props)],
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["elasticity", "rescale", "autosize", job],
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    ) as dag:

        @task
        def rescale(job: str = job, **context) -> dict:
            from elasticity.airflow.tasks import apply_autosize

            payloads = [
                (e.extra or {}).get("payload") or {} for events in context["triggering_asset_events"].values() for e in events
            ]
            return apply_autosize(job, payloads, context["run_id"], context["ti"].try_number)

        @task.short_circuit
        def applied(result: dict) -> bool:
            """A data-quality run follows every rescale that changed something."""
            return bool(result.get("applied"))

        applied(rescale()) >> TriggerDagRunOperator(
            task_id="trigger_data_quality",
            trigger_dag_id=f"elastic_data_quality__{job}",
            conf={"reason": "after autosized rescale"},
            wait_for_completion=False,
        )
    globals()[dag.dag_id] = dag
