"""MicroBatchOperator: the micro-batches of one DAG run of a job.

1. A lag probe (broker end offsets against the committed checkpoints, no Spark):
   nothing to read ends the task at once, skipped, with no Asset event.
2. Batches until caught up or `airflow.microbatch.max.seconds`, each commit's
   upload overlapping the next batch. Where they run:
   - a Spark Connect server (a `spark_connect` connection, `spark.remote`, or the
     embedded server): the task is a thin client, the engine's driver logic runs
     here and the work on the warm server;
   - a Spark master (a `spark` connection, or the job's `spark.master`):
     spark-submit of the package's own entry file (`elasticity/__main__.py run-batch`,
     found in the installed package), a new driver per run.
   A master that cannot work fails at once, naming the connection and the value
   (no silent YARN).
3. An Asset event carrying the last batch's summary and the ids of all.

Each try is an attempt of its own: it takes the lease under a token of the run id, the try number and a
random part (`attempt_token`), taking it over at once from an earlier try of the run (Airflow starts a retry
only once that try ended or was declared lost: `attempt_token.supersedes`), and replays that try's
written-ahead plan; an earlier try still alive is fenced from then on (its commits refused, its files never
the batch's).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException, AirflowSkipException

from elasticity.airflow.assets import batches_asset
from elasticity.airflow.hooks import ElasticityHook
from elasticity.checkpoint.store.attempt_token import AttemptToken, attempt_owner
from elasticity.config import JobConfig, load_config
from elasticity.spark.target import SparkTarget, check_master, resolve_target

SUMMARY_KEYS = (
    "job",
    "batch_id",
    "generation",
    "factor",
    "records_read",
    "processed",
    "dead_lettered",
    "skipped",
    "kept",
    "lag_left",
    "lag_left_exact",
    "durations_ms",
)


def entry_file() -> str:
    """What spark-submit runs: the package's `__main__.py` wherever the library is installed (a wheel, a
    checkout), so a non-editable install needs no file of the source tree."""
    spec = importlib.util.find_spec("elasticity.__main__")
    if spec is None or spec.origin is None:
        raise AirflowException("elasticity/__main__.py not found in the installed package")
    return spec.origin


class _MasterSubmitHook(SparkSubmitHook):
    """spark-submit on a master we resolved and checked ourselves (no `spark` connection): never
    the hook's YARN default. The fields are those SparkSubmitHook._resolve_connection fills (provider 6.3)."""

    def __init__(self, *, master: str, **kwargs: Any) -> None:
        self._master = master
        super().__init__(**kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        return {
            "master": self._master,
            "queue": None,
            "deploy_mode": None,
            "spark_binary": self.spark_binary or "spark-submit",
            "namespace": None,
            "principal": self._principal,
            "keytab": self._keytab,
            "rest_scheme": "http",
            "rest_port": 6066,
            "rest_endpoint": None,
        }


def _import_engine() -> None:
    import elasticity.spark.engine  # noqa: F401
    from elasticity.spark.session import preload_connect

    preload_connect()


def spark_target(spark_conn_id: str, config: JobConfig, config_name: str) -> SparkTarget:
    """Where the job's batches run: the connection `spark_conn_id` when it exists, else the job's config."""
    source = f"connection {spark_conn_id!r}"
    try:
        conn = ElasticityHook.get_connection(spark_conn_id)
    except AirflowNotFoundException:
        return resolve_target(config, config_name)
    if conn.conn_type == "spark_connect":
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        return SparkTarget("connect", SparkConnectHook(spark_conn_id).get_connection_url(), source)
    if conn.conn_type != "spark":
        raise AirflowException(f"{source} has type {conn.conn_type!r}: expected 'spark' (spark-submit) or 'spark_connect'")
    master = conn.host or ""
    if conn.port:
        master = f"{master}:{conn.port}"
    if "://" not in master and conn.port and not master.startswith(("spark", "k8s")):
        master = f"spark://{master}"
    return SparkTarget("master", check_master(master, source), source)


class MicroBatchOperator(BaseOperator):
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        job: str,
        config_path: str,
        spark_conn_id: str | None = None,
        kafka_conn_id: str | None = None,
        store_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        """The connection ids default to those the job config names (`airflow.connection.*`); one given here must
        be the same, as the job's other tasks, its lag watcher and its page read them from the config."""
        super().__init__(outlets=[batches_asset(job)], **kwargs)
        self.job = job
        self.config_path = config_path
        self.spark_conn_id = spark_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.store_conn_id = store_conn_id
        self._lineage_config: JobConfig | None = None  # the config the run used, for its lineage

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The job's Kafka inputs and its outputs (Kafka topics, Parquet datasets with their schema facets), for
        Airflow's OpenLineage provider (an OperatorLineage; the provider is imported only when it asks)."""
        from elasticity.airflow.hooks import connected
        from elasticity.airflow.lineage import job_lineage

        return job_lineage(self._lineage_config or connected(load_config(self.config_path)))

    def spark_target(self, config: JobConfig) -> SparkTarget:
        return spark_target(config.spark_conn_id, config, Path(self.config_path).name)

    def _check_connection_ids(self, config: JobConfig) -> None:
        given = (
            ("spark_conn_id", self.spark_conn_id, "airflow.connection.spark", config.spark_conn_id),
            ("kafka_conn_id", self.kafka_conn_id, "airflow.connection.kafka", config.kafka_conn_id),
            ("store_conn_id", self.store_conn_id, "airflow.connection.store", config.store_conn_id),
        )
        differ = [f"{arg}={v!r} but the job's {k} is {c!r}" for arg, v, k, c in given if v is not None and v != c]
        if differ:
            raise AirflowException(
                f"MicroBatchOperator of job {self.job!r}: {'; '.join(differ)}. Name the connections in the job config: "
                "its rescale, data quality, maintenance, lag watcher and page read them there"
            )

    def execute(self, context: Any) -> list[int]:
        from elasticity.batch.coordinator.lag import lag_report
        from elasticity.checkpoint.store import CheckpointStore
        from elasticity.kafka.consumer import HeldKafkaInputs

        logging.getLogger("kafka").setLevel(logging.WARNING)
        # the Spark Connect client takes ~0.4 s to import (pyspark checks pandas and grpc): meanwhile, the lag probe
        threading.Thread(target=_import_engine, name="import-engine", daemon=True).start()
        config = load_config(self.config_path)
        self._check_connection_ids(config)
        hook = ElasticityHook.of(config)
        config = self._lineage_config = config.with_connections(hook.connections())
        store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
        inputs = HeldKafkaInputs(config)  # one consumer for the probe and every batch's offsets, not one per call
        try:
            lag = lag_report(config, store, inputs)
            self.log.info("lag probe: %s", lag.describe())
            if not lag.has_work:
                raise AirflowSkipException(f"nothing to read: {lag.describe()}")
            run_id = context["run_id"]
            owner = attempt_owner(run_id, context["ti"].try_number)
            max_seconds = config.microbatch_max_seconds
            target = self.spark_target(config)
            self.log.info("micro-batches of %s on %s (%s)", self.job, target.value, target.source)
            try:
                if target.kind == "connect":
                    self._run_connected(config, store, inputs, target=target, owner=owner, max_seconds=max_seconds)
                else:
                    self._submit(target, spark_conn_id=config.spark_conn_id, hook=hook, owner=owner, max_seconds=max_seconds)
            except Exception as e:
                from elasticity.airflow.health import record_failure

                record_failure(
                    store, self.job, e, run_id=run_id, attempt=context["ti"].try_number, task="run_batches"
                )  # the job page shows it
                raise
        finally:
            inputs.close()
        committed = [
            m for m in store.metrics(self.job, limit=200) if _of_run(m.get("owner"), run_id) and m.get("batch_id") is not None
        ]
        if not committed:
            raise AirflowSkipException("no batch committed")
        from elasticity.airflow.otel_metrics import report_batches

        report_batches(self.job, committed)  # when Airflow's metrics go to OpenTelemetry
        context["outlet_events"][batches_asset(self.job)].extra = {
            **{k: committed[-1][k] for k in SUMMARY_KEYS},
            "batch_ids": [m["batch_id"] for m in committed],
        }
        return [m["batch_id"] for m in committed]

    def _run_connected(
        self, config: JobConfig, store: Any, inputs: Any, *, target: SparkTarget, owner: str, max_seconds: int
    ) -> None:
        from elasticity.kafka.transactions import OutputRefused
        from elasticity.spark.engine import BatchFailed, MicroBatchEngine
        from elasticity.spark.session import RESTART_WAIT_S, engine_errors, session

        # a driver killed under a run comes back on its address: the retry waits for it a little, and still ends
        # within 30 s when it stays down
        spark = session(config, target=target, restart_wait_s=RESTART_WAIT_S)
        engine = MicroBatchEngine(config, spark, store, inputs)
        try:
            with engine_errors(spark):
                engine.run(
                    until_caught_up=True,
                    owner=owner,
                    max_seconds=max_seconds,
                    on_commit=lambda s: self.log.info("%s", s.line()),
                )
        except BatchFailed as e:
            raise AirflowException(f"batch failed after committing what succeeded: {e}") from e
        except OutputRefused as e:  # exactly-once under task.dead.letter.policy=fail: the batch's transaction aborted
            raise AirflowException(str(e)) from e

    def _submit(self, target: SparkTarget, *, spark_conn_id: str, hook: ElasticityHook, owner: str, max_seconds: int) -> None:
        from elasticity.spark.jvm_options import jvm_options

        kwargs: dict[str, Any] = {
            "name": f"elasticity-{self.job}",
            "env_vars": hook.env(),
            "conf": {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": jvm_options()},
            "application_args": [
                "run-batch",
                "--config",
                self.config_path,
                "--owner",
                owner,
                "--until-caught-up",
                "--max-seconds",
                str(max_seconds),
            ],
        }
        from_connection = target.source == f"connection {spark_conn_id!r}"
        submit = (
            SparkSubmitHook(conn_id=spark_conn_id, **kwargs)
            if from_connection
            else _MasterSubmitHook(master=target.value, **kwargs)
        )
        submit.submit(entry_file())


def _of_run(owner: str | None, run_id: str) -> bool:
    """A batch committed by an attempt (any try) of this DAG run."""
    try:
        return owner is not None and AttemptToken.parse(owner).run == run_id
    except ValueError:
        return owner == run_id  # committed before attempts had tokens


class RescaleOperator(BaseOperator):
    """The `elastic_rescale` task: rescale the job its run's params name (`job`, `factor`, `dry_run`) under the
    job's lease (elasticity.airflow.tasks.rescale); returns what it did (`applied`, the generations and factors).
    Its lineage is the job's inputs: a rescale regroups their partitions' key buckets and writes no record."""

    ui_color = "#fdf1e6"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._job: str | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        from elasticity.airflow.tasks import rescale

        p = context["params"]
        self._job = p["job"]
        return rescale(
            p["job"],
            int(p["factor"]),
            dry_run=bool(p["dry_run"]),
            owner=f"rescale:{context['run_id']}",
            try_number=context["ti"].try_number,
            reason=f"elastic_rescale run {context['run_id']}",
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return _inputs_lineage(self._job or task_instance.get_template_context()["params"]["job"])


class ReplayOperator(RescaleOperator):
    """The `elastic_replay` task: replay the job its run's params name (`job`, `start`, `outputs`, `dry_run`) under
    the job's lease (elasticity.airflow.tasks.replay); returns what it did (`applied`, the generation, each
    partition's start). Its lineage is the job's inputs, which it re-reads from `start`; the outputs are written by
    the batches that follow."""

    def execute(self, context: Any) -> dict[str, Any]:
        from elasticity.airflow.tasks import replay

        p = context["params"]
        self._job = p["job"]
        return replay(
            p["job"],
            str(p["start"]),
            outputs=str(p["outputs"]),
            dry_run=bool(p["dry_run"]),
            owner=f"replay:{context['run_id']}",
            try_number=context["ti"].try_number,
            reason=f"elastic_replay run {context['run_id']}",
        )


def _inputs_lineage(job: str) -> Any:
    """The job's Kafka inputs as OpenLineage datasets (a rescale or replay writes no record itself)."""
    from elasticity.airflow.hooks import connected, job_configs
    from elasticity.airflow.lineage import job_lineage

    return job_lineage(connected(load_config(job_configs()[job])), outputs=False)
