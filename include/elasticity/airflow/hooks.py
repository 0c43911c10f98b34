"""Where a job's infrastructure is, from Airflow connections, never hard-coded:

- `kafka_default`: the Kafka bootstrap servers (`extra.bootstrap_servers`, or host:port) and, in its other
  extra fields, Kafka client properties for every client (`security.protocol`, `ssl.truststore.location`, ...;
  the login and password become the SASL login), exported as KAFKA_CLIENT_PROPERTIES with the secrets masked;
- `elasticity_store`: the checkpoint store (`extra.url`, or the connection's URI;
  a `postgres` connection becomes `postgresql+psycopg://`).

Without a connection, the job config (and the embedded defaults) decide. The
store URL's password is registered with Airflow's secrets masker. Airflow's
`[metrics]` StatsD settings travel as their `AIRFLOW__METRICS__*` overrides, so
the job's metrics reach the collector Airflow's own metrics go to
(elasticity.metrics.reporters).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from elasticity.airflow.project import jobs_dir


def job_configs() -> dict[str, Path]:
    """job.name -> config file, for every `.properties` file in the jobs folder (ELASTICITY_JOBS_DIR, else
    include/jobs of the current directory; a missing folder is an error saying so)."""
    from elasticity.config import parse_properties

    found = {}
    for path in sorted(jobs_dir().glob("*.properties")):
        name = parse_properties(path.read_text()).get("job.name")
        if name:
            found[name] = path
    return found


STATSD_OPTIONS = ("statsd_on", "statsd_host", "statsd_port", "statsd_prefix")


def metrics_env() -> dict[str, str]:
    """Airflow's effective [metrics] StatsD options (airflow.cfg or env) as AIRFLOW__METRICS__* variables."""
    from airflow.sdk.configuration import conf

    return {f"AIRFLOW__METRICS__{o.upper()}": conf.get("metrics", o) for o in STATSD_OPTIONS}


class ElasticityHook(BaseHook):
    conn_name_attr = "kafka_conn_id"
    hook_name = "Elasticity"

    def __init__(self, kafka_conn_id: str = "kafka_default", store_conn_id: str = "elasticity_store") -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.store_conn_id = store_conn_id

    def _conn(self, conn_id: str):
        try:
            return self.get_connection(conn_id)
        except AirflowNotFoundException:
            return None

    def bootstrap_servers(self) -> str | None:
        conn = self._conn(self.kafka_conn_id)
        if conn is None:
            return None
        return conn.extra_dejson.get("bootstrap_servers") or f"{conn.host}:{conn.port or 9092}"

    def kafka_properties(self) -> dict[str, str]:
        """The connection's Kafka client properties (Kafka's names), checked as the job's are; secrets masked in logs."""
        from airflow.sdk.log import mask_secret

        from elasticity.config.kafka_clients import ROLES, SECRET_PROPERTIES, client_options, env_properties, jaas_line

        conn = self._conn(self.kafka_conn_id)
        if conn is None:
            return {}
        props = {k: str(v) for k, v in conn.extra_dejson.items() if k != "bootstrap_servers"}
        if conn.login and conn.password and "sasl.jaas.config" not in props:
            props["sasl.jaas.config"] = jaas_line(props.get("sasl.mechanism", "PLAIN"), conn.login, conn.password)
        for name in SECRET_PROPERTIES & props.keys():
            mask_secret(props[name])
        if conn.password:
            mask_secret(conn.password)
        try:
            for role in ROLES:  # a bad property or value fails here, not in a Spark task
                client_options(env_properties(json.dumps(props), role), "", role)
        except ValueError as e:
            raise ValueError(f"connection {self.kafka_conn_id!r}: {e}") from None
        return props

    def store_url(self) -> str | None:
        conn = self._conn(self.store_conn_id)
        if conn is None:
            return None
        url = conn.extra_dejson.get("url") or conn.get_uri()
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                url = "postgresql+psycopg://" + url[len(prefix) :]
        if conn.password:
            from airflow.sdk.log import mask_secret

            mask_secret(conn.password)
        return url

    def env(self) -> dict[str, str]:
        """Environment for the batch (spark-submit) and for in-process tasks."""
        env = {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if os.environ.get("ELASTICITY_HOME"):
            env["ELASTICITY_HOME"] = os.environ["ELASTICITY_HOME"]
        if bootstrap := self.bootstrap_servers():
            env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
        if properties := self.kafka_properties():
            env["KAFKA_CLIENT_PROPERTIES"] = json.dumps(properties)
        if url := self.store_url():
            env["ELASTICITY_CHECKPOINT_STORE_URL"] = url
        return env | metrics_env()

    def apply(self) -> None:
        os.environ.update(self.env())
