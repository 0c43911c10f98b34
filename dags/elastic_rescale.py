"""elastic_rescale: change a job's elasticity factor from the UI.

Trigger with params `job`, `factor` (1..256) and `dry_run`. The task takes the
job's lease (a running batch is allowed to finish first), migrates the
checkpoints (split, merge, or any factor, with watermarks so nothing is lost or
processed twice), writes the new generation in one transaction and releases the
lease; its log shows the migration plan. A data-quality run of the job follows.
The rescale holds against the job's schedule and autosizer for
`job.elasticity.manual.hold.ms` (default one hour); a later manual rescale
replaces the hold.

The form starts at the first job's configured factor (`job.elasticity.factor`),
not its current one: Airflow parses this file on every pass, so it opens no
checkpoint store. Each job's current factor is on its page (Browse -> Elastic job
<job>), whose own rescale form starts there and triggers this DAG.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Param, task

from elasticity.airflow.hooks import job_configs
from elasticity.airflow.operators import RescaleOperator
from elasticity.config import MAX_ELASTICITY_FACTOR, key_value, parse_properties

CONFIGS = job_configs()
JOBS = sorted(CONFIGS) or ["demo"]
CONFIGURED = key_value(parse_properties(CONFIGS[JOBS[0]].read_text()) if CONFIGS else {}, "job.elasticity.factor")

with DAG(
    dag_id="elastic_rescale",
    description="Change the elasticity factor of a job (checkpoint split/merge)",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,
    tags=["elasticity", "rescale"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    params={
        "job": Param(JOBS[0], type="string", enum=JOBS, description="The job to rescale"),
        "factor": Param(
            CONFIGURED,
            type="integer",
            minimum=1,
            maximum=MAX_ELASTICITY_FACTOR,
            description=f"New elasticity factor (1 turns elasticity off; at most {MAX_ELASTICITY_FACTOR}). Starts at "
            f"{JOBS[0]}'s configured factor; each job's current factor is on its page: Browse -> Elastic job <job>",
        ),
        "dry_run": Param(False, type="boolean", description="Only print the migration plan"),
    },
) as dag:
    rescale = RescaleOperator(task_id="rescale")

    @task.short_circuit
    def applied(result: dict) -> bool:
        """A data-quality run follows every rescale that changed something."""
        return result["applied"]

    applied(rescale.output) >> TriggerDagRunOperator(
        task_id="trigger_data_quality",
        trigger_dag_id="elastic_data_quality__{{ params.job }}",
        conf={"reason": "after rescale"},
        wait_for_completion=False,
    )
