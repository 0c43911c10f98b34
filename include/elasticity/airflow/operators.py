"""Operators: spark-submit of one micro-batch, its infrastructure resolved at run time."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from .hooks import REPO, ElasticityHook


class MicroBatchOperator(SparkSubmitOperator):
    """spark_apps/run_batch.py for one job; the lease owner is the run id, so a
    retry of this task reclaims its own lease and replays its written-ahead plan."""

    def __init__(self, *, config_path: str, kafka_conn_id: str = "kafka_default", store_conn_id: str = "elasticity_store", **kwargs: Any) -> None:
        kwargs.setdefault("conf", {"spark.ui.enabled": "false"})
        super().__init__(
            application=str(REPO / "spark_apps" / "run_batch.py"),
            application_args=["--config", config_path, "--owner", "{{ run_id }}"],
            **kwargs,
        )
        self.kafka_conn_id = kafka_conn_id
        self.store_conn_id = store_conn_id

    def execute(self, context: Any) -> None:
        self.env_vars = {**(self.env_vars or {}), **ElasticityHook(self.kafka_conn_id, self.store_conn_id).env()}
        return super().execute(context)
