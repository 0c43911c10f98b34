"""The Assets the DAGs exchange: one per job, updated by every committed batch; for a job whose runs start on
lag (`airflow.microbatch.trigger=lag`), the one its lag watcher updates in Airflow's triggerer; and for a job
the autosizer sizes (`job.elasticity.autosize=true`), the one its loop in the triggerer updates with each
confirmed decision."""

from __future__ import annotations

from collections.abc import Mapping

from airflow.sdk import Asset, AssetWatcher

from elasticity.config import key_value


def batches_asset(job: str) -> Asset:
    return Asset(name=f"elastic_batches__{job}", uri=f"elasticity://{job}/batches")


def lag_asset(job: str, config_path: str, props: Mapping[str, str]) -> Asset:
    """`elastic_lag__<job>`, watched by JobLagTrigger with the job's `airflow.microbatch.lag.*` thresholds."""
    from elasticity.airflow.lag_trigger import JobLagTrigger

    trigger = JobLagTrigger(
        job=job,
        config_path=config_path,
        poll_ms=key_value(props, "airflow.microbatch.lag.poll.ms"),
        records=key_value(props, "airflow.microbatch.lag.records"),
        max_wait_ms=key_value(props, "airflow.microbatch.lag.max.wait.ms"),
        cooldown_ms=key_value(props, "airflow.microbatch.lag.cooldown.ms"),
    )
    return Asset(
        name=f"elastic_lag__{job}",
        uri=f"elasticity://{job}/lag",
        watchers=[AssetWatcher(name=f"elastic_lag_watcher__{job}", trigger=trigger)],
    )


def autosize_asset(job: str, config_path: str, props: Mapping[str, str]) -> Asset:
    """`elastic_autosize__<job>`, watched by JobAutosizeTrigger: each event is a confirmed decision."""
    from elasticity.airflow.autosize_trigger import JobAutosizeTrigger

    trigger = JobAutosizeTrigger(
        job=job,
        config_path=config_path,
        poll_ms=key_value(props, "job.elasticity.autosize.poll.ms"),
        confirm_ms=key_value(props, "job.elasticity.autosize.confirm.ms"),
    )
    return Asset(
        name=f"elastic_autosize__{job}",
        uri=f"elasticity://{job}/autosize",
        watchers=[AssetWatcher(name=f"elastic_autosize_watcher__{job}", trigger=trigger)],
    )


def microbatch_schedule(job: str, config_path: str, props: Mapping[str, str]) -> str | list[Asset]:
    """The micro-batch DAG's schedule: the lag watcher's asset, or the cron of `airflow.microbatch.schedule`."""
    if key_value(props, "airflow.microbatch.trigger") == "lag":
        return [lag_asset(job, config_path, props)]
    return key_value(props, "airflow.microbatch.schedule")
