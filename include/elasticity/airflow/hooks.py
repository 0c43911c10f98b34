"""Where a job's infrastructure is, from the Airflow connections its config names (`airflow.connection.*`),
never hard-coded; these are the defaults:

- `kafka_default` (type `elasticity_kafka`, KafkaSystemHook: Samza's Kafka system): the bootstrap servers
  (`extra.bootstrap_servers`, or host:port) and, in its other extra fields, Kafka client properties for every
  client (`security.protocol`, `ssl.truststore.location`, ...; the login and password become the SASL login),
  with the secrets masked;
- `elasticity_store` (type `elasticity_checkpoint_store`, CheckpointStoreHook): the checkpoint store
  (`extra.url`; else, for its own type, PostgreSQL from host, port, login, password and database; else the
  connection's URI, a `postgres` connection becoming `postgresql+psycopg://`).

The hooks read any connection type (a `generic` one made before the provider works as it did); the types
give the connection form its fields (elasticity.airflow.provider). Without a connection, the job config
(and the embedded defaults) decide. The settings travel with the job's config (`connected`), never through
the environment of a process that serves many jobs; a spark-submit driver gets them as its environment
(KAFKA_BOOTSTRAP_SERVERS, KAFKA_CLIENT_PROPERTIES, ELASTICITY_CHECKPOINT_STORE_URL). The store URL's password is registered with Airflow's secrets masker.
Airflow's `[metrics]` StatsD settings travel as their `AIRFLOW__METRICS__*` overrides, so the job's metrics
reach the collector Airflow's own metrics go to (elasticity.metrics.reporters).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from elasticity.airflow.project import jobs_dir
from elasticity.config import JobConfig
from elasticity.config.connections import Connections
from elasticity.config.job_files import read_jobs_folder

log = logging.getLogger(__name__)


def job_configs() -> dict[str, Path]:
    """job.name -> config file, for every `.properties` file in the jobs folder (ELASTICITY_JOBS_DIR, else
    include/jobs of the current directory; a missing folder is an error saying so) that loads and names a job
    no other file names. The files left out are logged here and raised by `check_jobs_folder`."""
    found = read_jobs_folder(jobs_dir())
    for problem in found.problems:
        log.warning("left out of the jobs: %s", problem)
    return found.jobs


def check_jobs_folder() -> None:
    """The jobs folder's check DAG file: an import error naming each file left out and why."""
    if error := read_jobs_folder(jobs_dir()).error():
        raise error


STATSD_OPTIONS = ("statsd_on", "statsd_host", "statsd_port", "statsd_prefix")


def metrics_env() -> dict[str, str]:
    """Airflow's effective [metrics] StatsD options (airflow.cfg or env) as AIRFLOW__METRICS__* variables."""
    from airflow.sdk.configuration import conf

    return {f"AIRFLOW__METRICS__{o.upper()}": conf.get("metrics", o) for o in STATSD_OPTIONS}


def _connection(hook: BaseHook, conn_id: str):
    try:
        return hook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


KAFKA_CONN_TYPE = "elasticity_kafka"
STORE_CONN_TYPE = "elasticity_checkpoint_store"


class KafkaSystemHook(BaseHook):
    """The Kafka system of the jobs (Samza's `systems.kafka`): its bootstrap servers and client properties."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "kafka_default"
    conn_type = KAFKA_CONN_TYPE
    hook_name = "Kafka (elasticity)"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 3.1's form (3.2 on reads the provider info's `ui-field-behaviour`)."""
        return _ui_behaviour(KAFKA_CONN_TYPE)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow 3.1's form (3.2 on reads the provider info's `conn-fields`)."""
        return _form_widgets(KAFKA_CONN_TYPE)

    def __init__(self, kafka_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id

    def bootstrap_servers(self) -> str | None:
        conn = _connection(self, self.kafka_conn_id)
        if conn is None:
            return None
        return conn.extra_dejson.get("bootstrap_servers") or f"{conn.host}:{conn.port or 9092}"

    def kafka_properties(self) -> dict[str, str]:
        """The connection's Kafka client properties (Kafka's names), checked as the job's are; secrets masked in logs.
        A form's empty field (null or "") is no property."""
        from airflow.sdk.log import mask_secret

        from elasticity.config.jaas import jaas_line
        from elasticity.config.kafka_clients import ROLES, SECRET_PROPERTIES, client_properties, env_properties

        conn = _connection(self, self.kafka_conn_id)
        if conn is None:
            return {}
        props = {k: str(v) for k, v in conn.extra_dejson.items() if k != "bootstrap_servers" and v is not None and str(v) != ""}
        if conn.login and conn.password and "sasl.jaas.config" not in props:
            props["sasl.jaas.config"] = jaas_line(props.get("sasl.mechanism", "PLAIN"), conn.login, conn.password)
        for name in SECRET_PROPERTIES & props.keys():
            mask_secret(props[name])
        if conn.password:
            mask_secret(conn.password)
        try:
            for role in ROLES:  # a bad property or value fails here, not in a Spark task
                client_properties(env_properties(json.dumps(props), role), "", role)
        except ValueError as e:
            raise ValueError(f"connection {self.kafka_conn_id!r}: {e}") from None
        return props


class CheckpointStoreHook(BaseHook):
    """The jobs' checkpoint store (CheckpointV2's store): a SQLAlchemy URL."""

    conn_name_attr = "store_conn_id"
    default_conn_name = "elasticity_store"
    conn_type = STORE_CONN_TYPE
    hook_name = "Elasticity checkpoint store"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 3.1's form (3.2 on reads the provider info's `ui-field-behaviour`)."""
        return _ui_behaviour(STORE_CONN_TYPE)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow 3.1's form (3.2 on reads the provider info's `conn-fields`)."""
        return _form_widgets(STORE_CONN_TYPE)

    def __init__(self, store_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.store_conn_id = store_conn_id

    def store_url(self) -> str | None:
        conn = _connection(self, self.store_conn_id)
        if conn is None:
            return None
        url = conn.extra_dejson.get("url")
        if not url and conn.conn_type == STORE_CONN_TYPE:
            url = _postgres_url(conn)
        url = url or conn.get_uri()
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                url = "postgresql+psycopg://" + url[len(prefix) :]
        if conn.password:
            from airflow.sdk.log import mask_secret

            mask_secret(conn.password)
        return url


def _postgres_url(conn) -> str:
    """The form's host, port, login, password and database as a PostgreSQL URL (the store's server kind)."""
    from urllib.parse import quote

    if not conn.host:
        raise ValueError(f"connection {conn.conn_id!r}: neither a URL (extra.url) nor a host")
    auth = ""
    if conn.login:
        auth = quote(conn.login, safe="") + (f":{quote(conn.password, safe='')}" if conn.password else "") + "@"
    return f"postgresql+psycopg://{auth}{conn.host}:{conn.port or 5432}/{conn.schema or ''}"


def _ui_behaviour(conn_type: str) -> dict[str, Any]:
    from elasticity.airflow.provider import CONNECTION_TYPES

    behaviour = CONNECTION_TYPES[conn_type]["ui-field-behaviour"]
    return {
        "hidden_fields": behaviour["hidden-fields"],
        "relabeling": behaviour["relabeling"],
        "placeholders": behaviour["placeholders"],
    }


def _form_widgets(conn_type: str) -> dict[str, Any]:
    """The provider info's `conn-fields` as the WTForms fields Airflow 3.1 asks the hook for."""
    from flask_babel import lazy_gettext
    from wtforms import PasswordField, StringField

    from elasticity.airflow.provider import CONNECTION_TYPES

    fields = CONNECTION_TYPES[conn_type]["conn-fields"]
    return {
        name: (PasswordField if f["schema"].get("format") == "password" else StringField)(
            lazy_gettext(f["label"]), description=f.get("description", "")
        )
        for name, f in fields.items()
    }


class ElasticityHook(BaseHook):
    """A job's connections, the one way every part of the product resolves them: the micro-batch (in process
    or through spark-submit), the rescale, data quality, maintenance, the lag watcher and the job page."""

    conn_name_attr = "kafka_conn_id"
    hook_name = "Elasticity"

    def __init__(self, kafka_conn_id: str = "kafka_default", store_conn_id: str = "elasticity_store") -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.store_conn_id = store_conn_id
        self.kafka = KafkaSystemHook(kafka_conn_id)
        self.store = CheckpointStoreHook(store_conn_id)

    @classmethod
    def of(cls, config: JobConfig) -> ElasticityHook:
        """The connections the job config names (`airflow.connection.kafka`, `airflow.connection.store`)."""
        return cls(config.kafka_conn_id, config.store_conn_id)

    def connections(self) -> Connections:
        """The connections' settings; the process environment's where a connection does not exist."""
        properties = self.kafka.kafka_properties()
        found = Connections(
            self.kafka.bootstrap_servers(), json.dumps(properties) if properties else None, self.store.store_url()
        )
        return found.over(Connections.from_env())

    def env(self) -> dict[str, str]:
        """Environment of a process started for the job (spark-submit)."""
        env = {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if os.environ.get("ELASTICITY_HOME"):
            env["ELASTICITY_HOME"] = os.environ["ELASTICITY_HOME"]
        return env | self.connections().env() | metrics_env()


def connected(config: JobConfig) -> JobConfig:
    """The job config with the connections it names in force, for this process only (no environment changed)."""
    return config.with_connections(ElasticityHook.of(config).connections())
