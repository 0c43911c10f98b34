"""Airflow as production runs it, on this machine: the CeleryExecutor, each component a process of its own.

`elasticity airflow --executor celery --workers N --db postgres`: Airflow's metadata on PostgreSQL (the Celery
result backend there too), Redis as Celery's broker (the machine's 127.0.0.1:6379, or one of the topology's
own: `redis_broker.py`), the API server, scheduler, dag-processor and triggerer, and N Celery workers
(`airflow celery worker`), each on a host of its own (`worker_hosts.py`: a network namespace with its own
address and loopback), with its own AIRFLOW_HOME (its task logs, served to the API server by its log server),
ELASTICITY_HOME (per-process scratch: nothing the product reads back lives there) and working folder. Airflow
records each worker's host address as the task instance's host name (`airflow/worker_host.py`).

The job's code reaches the workers as Airflow 3 ships it: the DAG files through the DAG bundle (the project's
`dags/`), the library and the apps it names as installed packages; the project's folder is not put on a
worker's PYTHONPATH. The scheduler fails (and retries) a task whose heartbeats stop after
`HEARTBEAT_TIMEOUT_S`, so a lost worker's micro-batch runs again on another within about two minutes, and
queues again a task still queued after `QUEUED_TIMEOUT_S` (one a restarted Redis lost: it keeps nothing).

Imports no Airflow: it sets up the environment Airflow starts in, as `standalone.py` does, and reuses its
configuration (`AirflowStandalone.env`), its REST client and its database set-up (`AirflowDb`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import requests

from elasticity.airflow.project import project_dir
from elasticity.airflow.worker_host import CALLABLE, HOSTNAME_ENV
from elasticity.local.airflow_api import AirflowApi
from elasticity.local.standalone import BIN, AirflowDb, AirflowStandalone, MetadataDbError, _session_members
from elasticity.local.worker_hosts import Host, WorkerHosts

CELERY_EXECUTOR = "CeleryExecutor"
HEARTBEAT_TIMEOUT_S = 90  # [scheduler] task_instance_heartbeat_timeout: a lost worker's task is retried after it
QUEUED_TIMEOUT_S = 120  # [scheduler] task_queued_timeout: a task a restarted broker lost is queued again after it
WORKER_LOG_PORT = 8793  # each worker's log server, on its own host's address
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
_LOOPBACK = re.compile(r"(?:127\.0\.0\.1|localhost):(\d{2,5})\b")


class TopologyError(RuntimeError):
    pass


def loopback_ports(env: Mapping[str, str | None]) -> set[int]:
    """The ports of the servers on this machine's loopback that `env` points Airflow at: URLs (`127.0.0.1:P`)
    and JSON connections (`"host": "127.0.0.1"` or `sc://127.0.0.1`, `"port": P`)."""
    ports: set[int] = set()
    for value in env.values():
        if not value:
            continue
        ports.update(int(p) for p in _LOOPBACK.findall(value))
        if value.startswith("{"):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                conn = json.loads(value)
                host = str(conn.get("host") or "").split("://")[-1]
                if host in ("127.0.0.1", "localhost") and conn.get("port"):
                    ports.add(int(conn["port"]))
    return ports


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


class CeleryTopology:
    """The components under `home`: `airflow/` (the shared AIRFLOW_HOME of the API server, scheduler,
    dag-processor and triggerer, and their logs), `workers/wN/` (each worker's homes and log), `hosts/` (the
    relays' logs)."""

    def __init__(
        self,
        home: Path,
        db: AirflowDb,
        broker_url: str,
        *,
        port: int = 8080,
        workers: int = 2,
        concurrency: int = 1,
        heartbeat_timeout_s: int = HEARTBEAT_TIMEOUT_S,
        queued_timeout_s: int = QUEUED_TIMEOUT_S,
        env_extra: Mapping[str, str | None] | None = None,
        tag: str | None = None,
    ) -> None:
        if not db.server:
            raise MetadataDbError("the CeleryExecutor needs Airflow's metadata on a database server: --db postgres")
        self.home = home
        self.db = db
        self.broker_url = broker_url
        self.workers = workers
        self.concurrency = concurrency
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.queued_timeout_s = queued_timeout_s
        self.airflow = AirflowStandalone(home / "airflow", port, {**(env_extra or {}), **db.env(CELERY_EXECUTOR)})
        self.hosts = WorkerHosts(workers, home / "hosts", tag)
        self.procs: dict[str, subprocess.Popen] = {}
        # shared by every component: the API server checks the JWTs the scheduler signs for the workers and signs
        # the requests for a worker's logs; a restarted component must keep them
        self._secrets = {
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
        }
        self._trigger_log_port: int | None = None
        self._log_start: dict[int, int] = {}  # where each worker's current process began its log

    # --- where things are -----------------------------------------------------------------------------------

    @property
    def base(self) -> str:
        return self.airflow.base

    @property
    def tag(self) -> str:
        return self.hosts.tag

    def host(self, i: int) -> Host:
        return self.hosts.host(i)

    def worker_name(self, i: int) -> str:
        return f"worker-{i}"

    def worker_dir(self, i: int) -> Path:
        return self.home / "workers" / f"w{i}"

    def log_file(self, name: str) -> Path:
        if name.startswith("worker-"):
            return self.worker_dir(int(name.split("-")[1])) / "worker.log"
        return self.airflow.home / f"{name}.log"

    def tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def tails(self, lines: int = 15) -> str:
        names = [*SERVICES, *(self.worker_name(i) for i in range(1, self.workers + 1))]
        return "\n".join(f"--- {n} ({self.log_file(n)})\n{self.tail(n, lines)}" for n in names)

    # --- the environment --------------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """What every component runs with: `elasticity airflow`'s settings, the CeleryExecutor's, the secrets."""
        assert self.db.metadata_url
        env = {
            **self.airflow.env(),
            **self._secrets,
            "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{self.db.metadata_url}",
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.concurrency),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(self.heartbeat_timeout_s),
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": str(self.queued_timeout_s),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": CALLABLE,
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(WORKER_LOG_PORT),
        }
        if self._trigger_log_port is not None:  # beside the other Airflows on this machine (8794 by default)
            env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"] = str(self._trigger_log_port)
        return env

    def worker_env(self, i: int) -> dict[str, str]:
        """Worker i's: its host's address as its host name, homes of its own, and no project folder on its path
        (its code comes from the DAG bundle and the installed packages)."""
        env = self.env()
        root = str(project_dir())
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != root]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        if not paths:
            del env["PYTHONPATH"]
        folder = self.worker_dir(i)
        return {
            **env,
            HOSTNAME_ENV: self.host(i).address,
            "AIRFLOW_HOME": str(folder / "airflow"),
            "ELASTICITY_HOME": str(folder / "home"),
        }

    def shared_ports(self) -> list[int]:
        """The loopback servers a worker reaches: the API server, the databases, the broker of Celery and the
        job's (Kafka, Spark Connect, S3) as the environment names them."""
        return sorted(loopback_ports(self.env()) | {self.airflow.port})

    # --- starting and stopping ------------------------------------------------------------------------------

    def start(self) -> CeleryTopology:
        """The databases and Airflow's migration, the worker hosts, then every component at once."""
        from elasticity.local.daemon import free_port
        from elasticity.local.redis_broker import answers

        if self._trigger_log_port is None:
            self._trigger_log_port = free_port()
        if self.broker_url.startswith("redis") and not answers(self.broker_url):
            raise TopologyError(f"no Redis answers at {self.broker_url}: start one, or let the topology start its own")
        self.db.create()
        self.airflow.home.mkdir(parents=True, exist_ok=True)
        with open(self.log_file("migrate"), "ab") as log:
            done = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        if done.returncode:
            raise TopologyError(f"airflow db migrate failed ({done.returncode}); see {self.log_file('migrate')}")
        self.hosts.up(self.shared_ports())
        try:
            for name in SERVICES:
                self.start_component(name)
            for i in range(1, self.workers + 1):
                self.start_worker(i)
        except BaseException:
            self.stop()
            raise
        return self

    def _command(self, name: str) -> tuple[list[str], dict[str, str], Path]:
        if name.startswith("worker-"):
            i = int(name.split("-")[1])
            folder = self.worker_dir(i)
            for sub in ("airflow", "home", "work"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
            argv = [
                str(BIN / "airflow"),
                "celery",
                "worker",
                "--concurrency",
                str(self.concurrency),
                "--celery-hostname",
                f"{self.host(i).netns}@%h",
                "--without-gossip",
                "--without-mingle",
            ]
            return self.host(i).command(argv), self.worker_env(i), folder / "work"
        return [str(BIN / "airflow"), name], self.env(), self.airflow.home

    def start_component(self, name: str) -> subprocess.Popen:
        argv, env, cwd = self._command(name)
        with open(self.log_file(name), "ab") as log:
            proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs[name] = proc
        return proc

    def start_worker(self, i: int) -> subprocess.Popen:
        log = self.log_file(self.worker_name(i))
        self._log_start[i] = log.stat().st_size if log.exists() else 0  # its readiness is read from here on
        return self.start_component(self.worker_name(i))

    def processes(self, name: str) -> list[int]:
        """Every process a component runs (its session: a worker's pool, task supervisors and tasks)."""
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return []
        return sorted({proc.pid, *_session_members(proc.pid)})

    def signal(self, name: str, sig: signal.Signals) -> list[int]:
        """Send `sig` to each of the component's processes (SIGKILL: a lost host, forgotten until started again;
        SIGSTOP: a paused one)."""
        pids = self.processes(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig == signal.SIGKILL and name in self.procs:
            self.procs.pop(name).wait()
        return pids

    def stop_component(self, name: str, timeout_s: float = 30) -> None:
        proc = self.procs.get(name)
        if proc is None:
            return
        members = self.processes(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)  # a paused one must be able to stop
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in [*members, *_session_members(proc.pid)]:  # task processes in process groups of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def restart_api_server(self, timeout_s: float = 120) -> None:
        self.stop_component("api-server")
        self.start_component("api-server")
        self.wait_api(timeout_s)

    def stop(self) -> None:
        """Every component (workers first, so none takes a task the scheduler is no longer there to track),
        then the worker hosts."""
        try:
            for i in range(1, self.workers + 1):
                self.stop_component(self.worker_name(i))
            for name in reversed(SERVICES):
                self.stop_component(name)
        finally:
            self.hosts.down()

    # --- readiness --------------------------------------------------------------------------------------------

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise TopologyError(f"{name} exited ({proc.returncode}); see {self.log_file(name)}:\n{self.tail(name)}")

    def wait_api(self, timeout_s: float = 180) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                health = requests.get(f"{self.base}/api/v2/monitor/health", timeout=2)
                if health.status_code == 200 and self.airflow.password_file.is_file():
                    return health.json()
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise TopologyError(f"the API server did not answer on {self.base} within {timeout_s:.0f}s:\n{self.tails()}")

    def worker_ready(self, i: int) -> bool:
        """Worker i's current process consumes (Celery logged `<name>@<host> ready.` since it started)."""
        proc = self.procs.get(self.worker_name(i))
        if proc is None or proc.poll() is not None:
            return False
        try:
            log = self.log_file(self.worker_name(i)).read_bytes()[self._log_start.get(i, 0) :]
        except OSError:
            return False
        return f"{self.host(i).netns}@".encode() in log and b" ready." in log

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = 300) -> None:
        """The API server answers, the scheduler, dag-processor and triggerer heartbeat, every worker consumes."""
        deadline = time.monotonic() + timeout_s
        self.wait_api(timeout_s)
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(requests.RequestException, ValueError):
                health = requests.get(f"{self.base}/api/v2/monitor/health", timeout=5).json()
                up = health.get("scheduler", {}).get("status") == "healthy" and all(
                    (health.get(c) or {}).get("status") == "healthy" for c in ("triggerer", "dag_processor") if c in health
                )
                if up and all(self.worker_ready(i) for i in range(1, self.workers + 1)):
                    return
            time.sleep(0.5)
        raise TopologyError(f"the Celery topology was not ready within {timeout_s:.0f}s:\n{self.tails()}")

    def api(self) -> AirflowApi:
        return self.airflow.api()

    def password(self) -> str:
        return self.airflow.password()

    def wait(self) -> int:
        """Until a component other than a worker exits (its code), or Ctrl-C."""
        while True:
            for name in SERVICES:
                proc = self.procs.get(name)
                if proc is not None and proc.poll() is not None:
                    print(f"{name} exited ({proc.returncode}); see {self.log_file(name)}", flush=True)
                    return proc.returncode or 1
            time.sleep(1)


def broker_for(home: Path, choice: str | None) -> tuple[str, object | None]:
    """Celery's broker: `choice` (a redis:// URL, or `own`), else the machine's Redis on 6379 when it answers,
    else one of the topology's own (started here; returned second, to be stopped with the topology)."""
    from elasticity.local.redis_broker import MACHINE_REDIS, RedisBroker, answers

    if choice and choice != "own":
        if not answers(choice):
            raise TopologyError(f"--redis {choice}: no Redis answers there")
        return choice, None
    if choice is None and answers(MACHINE_REDIS):
        return MACHINE_REDIS, None
    own = RedisBroker(home)
    return own.start(), own


def serve_celery(
    home: Path,
    port: int,
    db: AirflowDb,
    spark_remote: str | None,
    *,
    workers: int = 2,
    redis: str | None = None,
    warm_up: bool = True,
) -> int:
    """`make airflow CELERY=1`: `serve`'s services and job, Airflow's components on the CeleryExecutor, each
    worker on a host of its own, in the foreground until Ctrl-C."""
    from elasticity.local.redis_broker import RedisBroker
    from elasticity.local.standalone import banner, in_foreground, prepare

    if not db.server:
        raise MetadataDbError("--executor celery needs Airflow's metadata on PostgreSQL: add --db postgres")
    served = prepare(home, db, spark_remote, warm_up=warm_up, executor=CELERY_EXECUTOR)
    broker_url, own = broker_for(home, redis)
    topology = CeleryTopology(home / "celery", db, broker_url, port=port, workers=workers, env_extra=served.connections)

    def start() -> None:
        hosts = ", ".join(f"{topology.host(i).netns} ({topology.host(i).address})" for i in range(1, workers + 1))
        print(
            f"starting Airflow on the CeleryExecutor (broker {broker_url}): api-server on {topology.base}, scheduler, "
            f"dag-processor, triggerer, {workers} Celery workers on hosts {hosts}; logs in {topology.home} ...",
            flush=True,
        )
        topology.start()
        topology.wait_ready()
        stops = (
            "Ctrl-C (or SIGTERM) stops Airflow, its workers and their hosts; the broker and the Spark Connect server keep "
            "running (`make stop` in a checkout)."
        )
        print(banner(topology.base, topology.password(), served, stops), flush=True)

    def stop() -> None:
        topology.stop()
        if isinstance(own, RedisBroker):
            own.stop()

    return in_foreground(start, topology.wait, stop)
