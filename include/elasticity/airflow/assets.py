"""The Assets the DAGs exchange: one per job, updated by every committed batch."""

from airflow.sdk import Asset


def batches_asset(job: str) -> Asset:
    return Asset(name=f"elastic_batches__{job}", uri=f"elasticity://{job}/batches")
