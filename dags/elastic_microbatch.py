"""elastic_microbatch__<job>: one DAG per job config in the jobs folder
(ELASTICITY_JOBS_DIR, default include/jobs of the current directory).

When records wait (`airflow.microbatch.trigger=lag`, the default: the job's lag
watcher in Airflow's triggerer updates the `elastic_lag__<job>` asset) or on
`airflow.microbatch.schedule` (`schedule`), never two runs of a job at once
(max_active_runs=1, plus the job's lease), one task runs the job's micro-batches:
a lag probe first (nothing to read: the task is skipped in about a second, no
Spark), then batches until caught up or `airflow.microbatch.max.seconds`, on the
warm Spark Connect server (`spark_default` of type spark_connect, or the embedded
one) or through spark-submit (`spark_default` of type spark). Each committed run
emits an Asset event carrying its batches. Retrying is safe: a failed batch's plan
was written ahead and replays the same ranges, overwriting its own outputs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from elasticity.airflow.assets import microbatch_schedule
from elasticity.airflow.hooks import job_configs
from elasticity.airflow.operators import MicroBatchOperator
from elasticity.config import parse_properties

for job, path in job_configs().items():
    props = parse_properties(path.read_text())
    with DAG(
        dag_id=f"elastic_microbatch__{job}",
        description=f"Micro-batches of elastic job {job} ({path.name})",
        doc_md=__doc__,
        schedule=microbatch_schedule(job, str(path), props),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,  # the job runs as soon as Airflow sees it
        tags=["elasticity", "microbatch", job],
        # an attempt against a dead engine, broker or store fails within seconds: the first retry comes 5-10 s
        # later (its session waits for a restarting driver), the next ones back off (10-20 s, 20-40 s, then 60 s)
        # so that the retries outlast a longer outage
        default_args={
            "retries": 5,
            "retry_delay": timedelta(seconds=5),
            "retry_exponential_backoff": 2.0,
            "max_retry_delay": timedelta(seconds=60),
        },
    ) as dag:
        MicroBatchOperator(task_id="run_batches", job=job, config_path=str(path))
    globals()[dag.dag_id] = dag
