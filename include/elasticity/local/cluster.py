"""A Spark standalone cluster on this machine, as a cluster runs the product.

`elasticity cluster start` launches, with the pyspark wheel's own `spark-class`,
a standalone master and N workers, each a separate "host": its own work dir,
local dirs and `ELASTICITY_HOME` (an executor inherits its worker's environment,
so its stores land on that worker's disk). Beside them, the storage all hosts
share, an S3-protocol server (SeaweedFS), and the warm driver, the Spark Connect
server attached to the master (`--master spark://...`) with
`spark.cores.max` = every worker's cores and all of them registered before its
first job, so that the first batch places its slots over every executor.
Every service is a daemon under `$ELASTICITY_HOME/cluster/` (pid, port, log),
on loopback by default; given an address of this machine (`host`) and, per
worker, a network namespace with an address of its own (`WorkerHost`), the
workers reach the master, the driver, the broker and the S3 server over a real
network link, which a test can cut.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elasticity.config import elasticity_home
from elasticity.local.connect_server import SparkConnectServer, spark_home
from elasticity.local.daemon import HOST, Daemon, DaemonError, free_port
from elasticity.local.s3server import ACCESS_KEY, BUCKET, SECRET_KEY, wait_ready, weed_command
from elasticity.spark.jvm_options import JIT, jvm_options

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class ClusterState:
    master: str  # spark://127.0.0.1:<port>
    workers: tuple[str, ...]  # each worker's ELASTICITY_HOME
    connect: str | None  # sc://127.0.0.1:<port>
    s3_endpoint: str | None  # 127.0.0.1:<port>

    def env(self) -> dict[str, str]:
        """What a client of the cluster (the CLI, Airflow's tasks) exports to reach the shared storage."""
        if self.s3_endpoint is None:
            return {}
        return {
            "AWS_ENDPOINT_URL": f"http://{self.s3_endpoint}",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def job_settings(self, job: str = "<job>") -> dict[str, str]:
        """The keys whose defaults would resolve under one host's ELASTICITY_HOME, on the shared storage."""
        root = f"s3://{BUCKET}/{job}"
        return {
            "spark.remote": self.connect or "",
            "blob.store.uri": f"{root}/blobs",
            "job.output.path": f"{root}/output",
            "job.audit.path": f"{root}/audit",
            "job.dead.letter.path": f"{root}/dead-letter",
        }


@dataclass(frozen=True)
class WorkerHost:
    """A worker on a host of its own: the network namespace it runs in and its address there."""

    netns: str
    address: str


class LocalCluster:
    """One cluster per state folder, like the embedded broker."""

    def __init__(self, home: Path | None = None, host: str = HOST, worker_hosts: Mapping[int, WorkerHost] | None = None) -> None:
        """`host`: the address the master, the S3 server and the driver listen on (every worker must reach it)."""
        self.root = (home or elasticity_home()) / "cluster"
        self.host = host
        self.worker_hosts = dict(worker_hosts or {})
        self.master = Daemon("master", self.root, host=host)
        self.s3 = Daemon("s3", self.root, host=host)
        self.connect = SparkConnectServer(self.root, host)
        self.supervisor = Daemon("supervisor", self.root)  # elasticity.local.supervisor, when one was started

    def worker(self, i: int) -> Daemon:
        where = self.worker_hosts.get(i)
        return Daemon(f"worker-{i}", self.root, host=where.address if where else HOST)

    @property
    def recovery_dir(self) -> Path:
        """The master's FILESYSTEM recovery records: its apps and workers, read back when it starts again."""
        return self.root / "master" / "recovery"

    def worker_home(self, i: int) -> Path:
        return self.root / f"worker-{i}" / "home"

    def _workers(self) -> list[int]:
        return sorted(int(p.name.split("-")[1]) for p in self.root.glob("worker-*") if p.name.split("-")[1].isdigit())

    def status(self) -> ClusterState | None:
        master = self.master.status()
        if master is None:
            return None
        s3, connect = self.s3.status(), self.connect.status()
        return ClusterState(
            master=f"spark://{master.address}",
            workers=tuple(str(self.worker_home(i)) for i in self._workers() if self.worker(i).status()),
            connect=connect.remote if connect else None,
            s3_endpoint=s3.address if s3 else None,
        )

    def start(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        *,
        master_port: int | None = None,
        timeout_s: float = 120,
        warm_up: Sequence[Path] | None = None,
    ) -> ClusterState:
        """Start what is not running yet: master, workers 0..N-1, the S3 server, the Connect server. `warm_up`:
        a Connect server it starts warms up (elasticity.local.warmup, these job configs' sessions readied) before
        this returns, so that no job's slots meet the warm-up's on the executors; None: no warm-up (the
        supervisor's restarts)."""
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": self.host}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        # recovery mode: a master started again reads its apps and workers back, instead of killing the
        # executors of the Connect server's app that it no longer knows
        recovery = self.recovery_dir
        recovery.mkdir(parents=True, exist_ok=True)
        env["SPARK_MASTER_OPTS"] = (
            f"{jvm_options()} -Dspark.deploy.recoveryMode=FILESYSTEM -Dspark.deploy.recoveryDirectory={recovery}"
        )
        running = self.master.status()
        port = running.port if running else master_port or self.master.last_port() or free_port()
        master = f"spark://{self.host}:{port}"
        self.master.start(
            [self._class(), MASTER_CLASS, "--host", self.host, "--port", str(port), "--webui-port", str(free_port())],
            port,
            timeout_s,
            env,
        )
        s3 = self._start_s3(timeout_s)
        shared = ClusterState(master, (), None, s3).env()
        for i in range(workers):
            self.start_worker(i, cores, memory, env={**env, **shared}, timeout_s=timeout_s)
        connect = self.connect.status()
        self.connect.start(
            port=connect.port if connect else self.connect.daemon.last_port() or free_port(),
            master=master,
            timeout_s=timeout_s,
            conf={
                "spark.cores.max": str(workers * cores),
                "spark.executor.cores": str(cores),
                "spark.executor.memory": memory,
                "spark.executor.extraJavaOptions": JIT,
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            },
            env=shared,
            warm_up=warm_up,
        )
        if warm_up is not None:
            self.connect.wait_warm()
        state = self.status()
        if state is None:
            raise DaemonError(f"the Spark master stopped while the cluster started; see {self.master.log_file}")
        return state

    def start_worker(
        self, i: int, cores: int = 1, memory: str = "1g", *, env: dict[str, str] | None = None, timeout_s: float = 120
    ) -> None:
        """Worker i, its own host: work dir, local dirs and ELASTICITY_HOME under cluster/worker-i/."""
        state = self.status()
        if state is None:
            raise DaemonError(f"no Spark master runs for {self.root}: `elasticity cluster start`")
        daemon = self.worker(i)
        where = self.worker_hosts.get(i)
        running = daemon.status()
        port = running.port if running else daemon.last_port() or free_port()
        home = self.worker_home(i)
        work, local = home.parent / "work", home.parent / "local"
        for d in (home, work, local):
            d.mkdir(parents=True, exist_ok=True)
        base = env or {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            **state.env(),
        }
        base.setdefault("PYSPARK_PYTHON", sys.executable)
        daemon.start(
            [
                *(["ip", "netns", "exec", where.netns] if where else []),
                self._class(),
                WORKER_CLASS,
                "--host",
                daemon.host,
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work),
                state.master,
            ],
            port,
            timeout_s,
            {
                **base,
                "SPARK_LOCAL_IP": daemon.host,
                "ELASTICITY_HOME": str(home),
                "SPARK_WORKER_DIR": str(work),
                "SPARK_LOCAL_DIRS": str(local),
                "SPARK_WORKER_OPTS": JIT,
            },
        )

    def stop_worker(self, i: int) -> bool:
        return self.worker(i).stop()

    def stop(self) -> bool:
        """Stop every service of the cluster (their folders are kept), its supervisor first. False when none
        was running."""
        self.supervisor.stop()
        stopped = self.connect.stop()
        for i in self._workers():
            stopped = self.worker(i).stop() or stopped
        stopped = self.master.stop() or stopped
        # nothing is left to recover: a master started on the old records waits for the stopped app's and
        # workers' slots to time out, and the next Connect server for its executors (60 s against 8 s here)
        shutil.rmtree(self.recovery_dir, ignore_errors=True)
        return self.s3.stop() or stopped

    def _start_s3(self, timeout_s: float) -> str:
        running = self.s3.status()
        if running:
            return running.address
        self.s3.data_dir.mkdir(parents=True, exist_ok=True)
        command, port = weed_command(self.s3.data_dir, self.host, self.s3.last_port())
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        state = self.s3.start(command, port, timeout_s, env)
        wait_ready(state.address, timeout_s, lambda: self.s3.status() is not None, self.s3.log_file)
        return state.address

    @staticmethod
    def _class() -> str:
        return str(spark_home() / "bin" / "spark-class")
