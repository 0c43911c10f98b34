"""elastic_data_quality__<job>: data-quality checks of a job, with reports.

Runs on each batches Asset event of the job and after every rescale, over the
batches committed since the last validated one (its cost depends on them, not
on the job's age; order and routing are checked across the window's edge), or
manually over any window of batches (params from_batch / to_batch). Great
Expectations suites over the audit rows and a re-read of the committed input
ranges prove: no loss, per-key order across rescales, correct routing, no
duplicates in the exactly-once sink. It publishes GX Data Docs and a one-page
summary per run (`runs/<run id>/`), `runs.jsonl` and a rolling `summary.html` linking
the latest runs to the job's report folder (runs beyond `quality.report.retain.runs`,
failed ones beyond `quality.report.retain.failed.runs`, are removed), and fails
naming the offending keys and offsets when any expectation fails.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from elasticity.airflow.assets import batches_asset
from elasticity.airflow.hooks import job_configs

for job in job_configs():
    with DAG(
        dag_id=f"elastic_data_quality__{job}",
        description=f"Data quality of elastic job {job}",
        doc_md=__doc__,
        schedule=[batches_asset(job)],
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["elasticity", "data-quality", job],
        default_args={"retries": 3, "retry_delay": timedelta(seconds=20)},  # as a micro-batch rides through a fault
        params={
            "from_batch": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                description="First batch of a manual window (both empty: the batches since the last validated one)",
            ),
            "to_batch": Param(
                None, type=["null", "integer"], minimum=1, description="Last batch of a manual window (default: latest)"
            ),
        },
    ) as dag:

        @task
        def validate(job: str = job, **context) -> dict:
            from elasticity.airflow.tasks import quality

            p = context["params"]
            return quality(job, p.get("from_batch"), p.get("to_batch"), report_dir=None, run_name=context["run_id"])

        validate()
    globals()[dag.dag_id] = dag
