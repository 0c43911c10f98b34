"""The warm engine of the embedded default: a Spark Connect server on 127.0.0.1.

A micro-batch should cost its work, not its start-up. The server is one
long-lived Spark driver (local[*] by default) started from the pyspark wheel's
own spark-submit; Airflow tasks and the CLI are thin Connect clients of it.
Each job keeps one Connect session (a fixed session id), so its Python workers,
their Kafka consumers and loaded apps stay warm from one batch to the next.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elasticity.config import elasticity_home
from elasticity.config.services import CONNECT_SERVER
from elasticity.local.daemon import HOST, Daemon, DaemonError, DaemonState
from elasticity.local.warmup import WarmUpState, start_warm_up
from elasticity.local.warmup import state_path as warm_up_state
from elasticity.local.warmup import status as warm_up_status
from elasticity.spark.jvm_options import jvm_options

DEFAULT_PORT = 15002
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


WARM_UP_WAIT_S = 300.0  # the longest a command that waits for a server's warm-up waits


@dataclass(frozen=True)
class SparkServerState(DaemonState):
    @property
    def remote(self) -> str:
        return f"sc://{self.address}"


def spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DaemonError("pyspark is not installed: pip install 'elasticity[spark]'")
    return Path(spec.origin).parent


class SparkConnectServer:
    """One server per state folder, like the embedded broker."""

    def __init__(self, home: Path | None = None, host: str = HOST) -> None:
        self.daemon = Daemon(CONNECT_SERVER, home or elasticity_home(), host=host)

    def status(self) -> SparkServerState | None:
        state = self.daemon.status()
        return SparkServerState(**vars(state)) if state else None

    def start(
        self,
        port: int | None = None,
        master: str = "local[*]",
        timeout_s: float = 120.0,
        *,
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        warm_up: Sequence[str | Path] | None = None,
    ) -> SparkServerState:
        """`warm_up`: once the port opens, warm the server in the background (elasticity.local.warmup),
        readying the sessions of these job configs; None: no warm-up."""
        running = self.status()
        if running and port in (None, running.port):
            return running  # warmed up (or not) when it started
        port = port or self.daemon.last_port() or DEFAULT_PORT
        home = spark_home()
        command = [
            str(home / "bin" / "spark-submit"),
            "--master",
            master,
            "--class",
            CONNECT_SERVER_CLASS,
            "--conf",
            f"spark.connect.grpc.binding.address={self.daemon.host}",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.driver.extraJavaOptions={jvm_options()}",
            "--conf",
            "spark.sql.shuffle.partitions=8",
            "--conf",
            f"spark.local.dir={self.daemon.data_dir}",
            "--conf",
            "spark.connect.session.manager.defaultSessionTimeout=24h",
            *(arg for k, v in (conf or {}).items() for arg in ("--conf", f"{k}={v}")),
            "spark-internal",
        ]
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": self.daemon.host,  # the driver's address, which executors connect to
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **(env or {}),
        }
        state = SparkServerState(**vars(self.daemon.start(command, port, timeout_s, env)))
        warm_up_state(self.daemon.home).unlink(missing_ok=True)  # a former run's
        if warm_up is not None:
            start_warm_up(state.remote, self.daemon.home, [str(j) for j in warm_up], env=env)
        return state

    def warm_up_status(self) -> WarmUpState | None:
        return warm_up_status(self.daemon.home)

    def wait_warm(self, timeout_s: float = WARM_UP_WAIT_S) -> WarmUpState | None:
        """The warm-up once it is no longer `warming`, or as it stands after `timeout_s`; None when the server
        has none (started with no warm-up, or by an earlier command)."""
        deadline = time.monotonic() + timeout_s
        while (state := self.warm_up_status()) is not None and state.state == "warming" and time.monotonic() < deadline:
            time.sleep(0.5)
        return state

    def stop(self) -> bool:
        return self.daemon.stop()
