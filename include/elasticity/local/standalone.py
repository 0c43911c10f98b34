"""Airflow as users run it, on the embedded default: `airflow standalone` (api-server,
scheduler, dag-processor, triggerer) on 127.0.0.1 only, the connections of the
embedded broker, Spark Connect server and checkpoint store; `api()` gives the
REST client (`airflow_api.py`) that drives it as a person clicking in the UI does.

The metadata database is SQLite under AIRFLOW_HOME by default, or, as production
runs Airflow (docker-compose.yaml), PostgreSQL with the LocalExecutor: a database
of the project's own on the server, created when missing, beside a second one for
the jobs' checkpoint store.

Imports no Airflow: it sets up the environment Airflow starts in.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests

from elasticity.airflow.project import JOBS_ENV, ProjectError, airflow_folders, jobs_dir
from elasticity.config import JobConfig
from elasticity.local.airflow_api import AirflowApi

log = logging.getLogger(__name__)
BIN = Path(sys.executable).parent


LOCAL_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432"  # the server `--db postgres` uses
METADATA_DATABASE = "elasticity_airflow"  # Airflow's tables
STORE_DATABASE = "elasticity"  # the jobs' checkpoint store (elasticity_store)
DB_CHOICES = ("sqlite", "postgres")
EXECUTOR = "LocalExecutor"


class MetadataDbError(ValueError):
    """The metadata database cannot be set up; the message says what to change."""


@dataclass(frozen=True)
class AirflowDb:
    """Where Airflow keeps its metadata and the jobs their checkpoints: SQLite (`server` None, Airflow's
    own file under AIRFLOW_HOME and the embedded store under ELASTICITY_HOME), or two databases on a
    PostgreSQL server, run by the LocalExecutor as production runs Airflow."""

    server: str | None = None  # postgresql+psycopg://user[:password]@host:port, no database
    metadata_database: str = METADATA_DATABASE
    store_database: str = STORE_DATABASE

    @property
    def metadata_url(self) -> str | None:
        return f"{self.server}/{self.metadata_database}" if self.server else None

    @property
    def store_url(self) -> str | None:
        return f"{self.server}/{self.store_database}" if self.server else None

    def env(self, executor: str = EXECUTOR) -> dict[str, str]:
        """Airflow's settings for it, run by `executor`. The async URL is spelled out: Airflow would derive
        asyncpg's, which is not installed; psycopg 3 serves both."""
        if not self.metadata_url:
            return {}
        return {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_url,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self.metadata_url,
            "AIRFLOW__CORE__EXECUTOR": executor,
        }

    def _admin(self, sql: str, *, create: bool) -> None:
        """Runs `sql` per database name on the server's `postgres` database (CREATE/DROP DATABASE
        cannot run in a transaction). One line naming the server when it is not there."""
        assert self.server
        try:
            from sqlalchemy import create_engine, text
            from sqlalchemy.exc import OperationalError

            engine = create_engine(f"{self.server}/postgres", isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
        except ImportError as e:  # the psycopg driver
            raise MetadataDbError(f"PostgreSQL needs the psycopg driver: pip install 'elasticity[postgres]' ({e})") from e
        shown = re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", self.server)
        try:
            with engine.connect() as conn:
                for name in (self.metadata_database, self.store_database):
                    exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
                    if bool(exists) != create:
                        conn.execute(text(sql.format(name=name)))
        except OperationalError as e:
            reason = str(e.orig).strip().splitlines()[0] if e.orig else type(e).__name__
            raise MetadataDbError(
                f"Airflow metadata database: no PostgreSQL server answers at {shown} ({reason}); start it, or choose --db sqlite"
            ) from None
        finally:
            engine.dispose()

    def create(self) -> AirflowDb:
        """Both databases, when missing (Airflow's own migration then creates its tables)."""
        if self.server:
            self._admin('CREATE DATABASE "{name}"', create=True)
        return self

    def drop(self) -> None:
        """Both databases, sessions and all (for throw-away set-ups such as the tests')."""
        if self.server:
            self._admin('DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', create=False)


_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def airflow_db(choice: str, metadata_database: str = METADATA_DATABASE, store_database: str = STORE_DATABASE) -> AirflowDb:
    """`--db`: `sqlite` (the embedded default), `postgres` (the server on 127.0.0.1:5432), or a server's
    URL `postgresql+psycopg://user[:password]@host:port`."""
    for name in (metadata_database, store_database):
        if not _DB_NAME.fullmatch(name):
            raise MetadataDbError(f"database name {name!r}: lower-case letters, digits and _, starting with a letter or _")
    if choice == "sqlite":
        return AirflowDb()
    server = LOCAL_POSTGRES if choice == "postgres" else choice
    if not re.fullmatch(r"postgresql\+psycopg://[^/?#]+", server):
        raise MetadataDbError(
            f"--db {choice!r}: allowed are {', '.join(DB_CHOICES)} or a server URL postgresql+psycopg://user@host:port "
            "(no database: Airflow's and the checkpoint store's are created there)"
        )
    return AirflowDb(server, metadata_database, store_database)


def connections(bootstrap: str, spark_remote: str | None, store_url: str) -> dict[str, str]:
    """AIRFLOW_CONN_* for the embedded default: where the broker, the warm engine and the store are, of the
    package's connection types (elasticity.airflow.provider), so the connection form shows their fields."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conns = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "elasticity_kafka", "host": host, "port": int(port)}),
        "AIRFLOW_CONN_ELASTICITY_STORE": json.dumps({"conn_type": "elasticity_checkpoint_store", "extra": {"url": store_url}}),
    }
    if spark_remote:
        netloc = spark_remote.removeprefix("sc://").split("/")[0]
        shost, sport = netloc.rsplit(":", 1)
        conns["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
            {"conn_type": "spark_connect", "host": f"sc://{shost}", "port": int(sport)}
        )
    return conns


@dataclass
class AirflowStandalone:
    home: Path  # AIRFLOW_HOME
    port: int = 8080
    env_extra: Mapping[str, str | None] = field(default_factory=dict)  # None: unset in Airflow's environment
    proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.home / "standalone.log"

    def env(self) -> dict[str, str]:
        """Airflow's environment: the project's DAGs, plugin and job configs (from the current directory or
        ELASTICITY_PROJECT_DIR / ELASTICITY_JOBS_DIR), named explicitly so no Airflow process depends on its cwd."""
        dags, plugins = airflow_folders()
        env: dict[str, str | None] = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",  # 2 cores: a few tasks at once
            "AIRFLOW__API__HOST": "127.0.0.1",  # loopback only, never 0.0.0.0
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.base,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        if JOBS_ENV not in self.env_extra:
            env[JOBS_ENV] = str(jobs_dir())
        env.update(self.env_extra)
        return {k: v for k, v in env.items() if v is not None}

    def start(self) -> AirflowStandalone:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [str(BIN / "airflow"), "standalone"], env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def wait_ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"airflow standalone exited ({self.proc.returncode}); see {self.log_file}:\n{self.tail()}")
            try:
                health = requests.get(f"{self.base}/api/v2/monitor/health", timeout=2)
                if health.status_code == 200 and self.password_file.is_file():
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise RuntimeError(
            f"airflow standalone did not answer on {self.base} within {timeout_s:.0f}s; see {self.log_file}:\n{self.tail()}"
        )

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def password_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json.generated"

    def password(self) -> str:
        return json.loads(self.password_file.read_text())["admin"]

    def api(self) -> AirflowApi:
        token = requests.post(f"{self.base}/auth/token", json={"username": "admin", "password": self.password()}, timeout=30)
        token.raise_for_status()
        return AirflowApi(self.base, token.json()["access_token"])

    def stop(self, timeout_s: float = 60) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout_s)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in _session_members(self.proc.pid):  # task processes in process groups of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _terminate_with_parent() -> None:
    """`make airflow`: make dies of a TERM without passing it on to its recipe; on Linux the kernel sends
    this process a TERM when its parent dies (prctl PR_SET_PDEATHSIG), so it stops as on Ctrl-C."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _session_members(sid: int) -> list[int]:
    """Processes still in the session `airflow standalone` led (Linux /proc): a task supervisor puts its
    task in a process group of its own, which the group's SIGTERM does not reach."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:  # after "pid (comm)": state ppid pgrp session
            members.append(int(stat.parent.name))
    return members


def embedded_services(
    home: Path, store_url: str | None = None, spark_remote: str | None = None, *, warm_up: bool = True
) -> dict[str, str]:
    """Start (or find) the embedded broker and, unless `spark_remote` names another one (a cluster's), the
    Spark Connect server, warmed up in the background as `elasticity spark start` warms it (`warm_up`); the
    connections that point at them and at the store (default: SQLite in `home`)."""
    from elasticity.local.broker import EmbeddedBroker
    from elasticity.local.connect_server import SparkConnectServer
    from elasticity.local.daemon import DaemonError, free_port
    from elasticity.local.warmup import project_jobs

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = EmbeddedBroker(home)
        try:
            bootstrap = broker.start().bootstrap
        except DaemonError:  # 9092 is taken by something else: any free port will do
            bootstrap = broker.start(port=free_port()).bootstrap
    if not spark_remote:
        server = SparkConnectServer(home)
        jobs = project_jobs() if warm_up else None
        try:
            spark_remote = server.start(warm_up=jobs).remote
        except DaemonError:
            spark_remote = server.start(port=free_port(), warm_up=jobs).remote
    return connections(bootstrap, spark_remote, store_url or f"sqlite:///{home / 'checkpoints.db'}")


def demo_config_file() -> Path:
    """The demo job's config in the project's jobs folder: the very file the DAGs run, so what the demo
    feeds and shows is what Airflow's job reads."""
    airflow_folders()  # no Airflow project here: say so before starting anything
    path = jobs_dir() / "demo.properties"
    if not path.is_file():
        raise ProjectError(
            f"the demo job's config {path} is missing: the demo runs the job `demo` of the jobs folder ({JOBS_ENV})"
        )
    return path


def shown_job_file() -> tuple[Path, bool]:
    """The job `elasticity airflow` introduces: the demo's when the jobs folder has it (its topic is fed
    demo orders when new), else the folder's first job (a project of `elasticity init`); True for the demo."""
    airflow_folders()  # no Airflow project here: say so before starting anything
    folder = jobs_dir()
    if (folder / "demo.properties").is_file():
        return folder / "demo.properties", True
    found = sorted(folder.glob("*.properties"))
    if not found:
        raise ProjectError(f"no job configs (.properties) in {folder} ({JOBS_ENV}): `elasticity init` writes a project with one")
    return found[0], False


def _shown(path: Path) -> str:
    """A path as the user would type it here: relative to the current directory when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def init(db: AirflowDb) -> int:
    """`elasticity airflow --db ... --init-only` (docker-compose's airflow-init): the databases, then
    Airflow's own migration of its tables."""
    db.create()
    return subprocess.run([str(BIN / "airflow"), "db", "migrate"], env={**os.environ, **db.env()}).returncode


def on_local_cluster(home: Path) -> str:
    """`make airflow CLUSTER=1`: Airflow's tasks run on the local cluster (`elasticity cluster start`): its
    Connect server is spark_default, every Airflow process gets its shared storage's AWS_* variables, and the
    job configs are those of `include/jobs/cluster` (sinks and blobs on that storage). Returns the Connect URL."""
    from elasticity.local.cluster import LocalCluster

    state = LocalCluster(home).status()
    if state is None or state.connect is None or state.s3_endpoint is None:
        raise ProjectError(f"no local cluster runs for {home}: start one with `make cluster` (elasticity cluster start)")
    os.environ.update(state.env())
    os.environ.setdefault(JOBS_ENV, str(jobs_dir() / "cluster"))
    return state.connect


@dataclass(frozen=True)
class Served:
    """What `elasticity airflow` runs Airflow on: the connections of the embedded services, the job it shows."""

    connections: dict[str, str]
    job_file: Path
    job: JobConfig

    @property
    def name(self) -> str:
        return self.job.job_name


def prepare(home: Path, db: AirflowDb, spark_remote: str | None, *, warm_up: bool, executor: str = EXECUTOR) -> Served:
    """`make airflow`'s services before Airflow: the databases, the embedded broker and Connect server (or
    `spark_remote`), the demo's topic fed when new."""
    from elasticity.apps.demo_feed import demo_records
    from elasticity.config import load_config
    from elasticity.kafka.admin import create_topic
    from elasticity.kafka.producer import send

    job_file, is_demo = shown_job_file()
    if db.server:
        db.create()
        print(f"Airflow's metadata in PostgreSQL {db.metadata_url}, checkpoints in {db.store_url}; {executor}", flush=True)
    engine = f"Spark Connect at {spark_remote}" if spark_remote else "the embedded Spark Connect server"
    print(f"starting the embedded broker, {engine} (state in {home}) ...", flush=True)
    conns = embedded_services(home, db.store_url, spark_remote, warm_up=warm_up)
    bootstrap = "{host}:{port}".format(**json.loads(conns["AIRFLOW_CONN_KAFKA_DEFAULT"]))
    job = load_config(job_file)
    topic = job.inputs[0].stream
    if is_demo and create_topic(bootstrap, topic, 4):
        sent = send(bootstrap, topic, demo_records(3000, keys=300))
        print(f"created topic {topic} with 4 partitions and {sent} demo orders", flush=True)
    return Served(conns, job_file, job)


def banner(base: str, password: str, served: Served, stops: str) -> str:
    """What `make airflow` prints once Airflow answers."""
    name, job_file = served.name, served.job_file
    report = served.job.report_location
    return f"""
Airflow UI: {base}   login: admin   password: {password}
  elastic_microbatch__{name}   runs when records wait (already unpaused): batches until caught up
  elastic_rescale            Trigger -> job {name}, factor N -> Trigger: the rescale, then a data-quality run
  elastic_data_quality__{name} after each committed run: report {report}/summary.html
  the elastic job page       Browse -> Elastic job {name} ({base}/elasticity/jobs/{name})
More orders: {_shown(BIN / "elasticity")} feed --config {_shown(job_file)} --records 3000
{stops}"""


def in_foreground(start, wait, stop) -> int:
    """Run Airflow until it exits, Ctrl-C or SIGTERM (systemd and `docker stop` send TERM; make dies of one
    without passing it on: the kernel sends this process a TERM when its parent dies), then `stop` it."""
    signal.signal(signal.SIGTERM, _interrupt)
    _terminate_with_parent()
    try:
        start()
        return wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM does not cut the clean-up short
        stop()


def serve(
    home: Path, port: int = 8080, db: AirflowDb | None = None, spark_remote: str | None = None, *, warm_up: bool = True
) -> int:
    """`make airflow`: the embedded default under Airflow's scheduler, in the foreground until Ctrl-C; its
    metadata and checkpoints on SQLite, or on PostgreSQL with the LocalExecutor (`db`); `warm_up`: the embedded
    Connect server it starts warms up while Airflow starts."""
    db = db or AirflowDb()
    served = prepare(home, db, spark_remote, warm_up=warm_up)
    airflow = AirflowStandalone(home / "airflow", port, {**served.connections, **db.env()})

    def start() -> None:
        print(
            f"starting Airflow (api-server, scheduler, dag-processor, triggerer) on {airflow.base}; log {airflow.log_file} ...",
            flush=True,
        )
        airflow.start()
        airflow.wait_ready()
        stops = (
            "Ctrl-C (or SIGTERM) stops Airflow; the broker and the Spark Connect server keep running (`elasticity spark stop` "
            "and `elasticity broker stop` stop them; `make stop` in a checkout)."
        )
        print(banner(airflow.base, airflow.password(), served, stops), flush=True)

    return in_foreground(start, lambda: airflow.proc.wait() if airflow.proc else 0, airflow.stop)
