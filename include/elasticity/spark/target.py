"""Where a micro-batch runs: a Spark Connect server (the warm default) or a
Spark master for spark-submit, and who said so. Resolved without importing
pyspark, so that a run with nothing to read never pays for it.

Order: `SPARK_REMOTE` or the job's `spark.remote`; the job's `spark.master`
when set; the embedded Spark Connect server when it runs; `local[*]`.
A master that cannot work here fails at once, naming where it came from.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from elasticity.config import JobConfig
from elasticity.config.runtime_rules import check_master
from elasticity.config.services import CONNECT_SERVER, running_service

_LOOPBACK = ("sc://127.0.0.1", "sc://localhost", "sc://[::1]")


@dataclass(frozen=True)
class SparkTarget:
    kind: str  # "connect" (a Spark Connect URL) or "master" (spark-submit / a classic session)
    value: str
    source: str  # e.g. "connection 'spark_default'", "spark.master in demo.properties"

    @property
    def is_local(self) -> bool:
        """Executors share this machine's Python environment: no need to ship the library."""
        return self.value.startswith(_LOOPBACK) if self.kind == "connect" else self.value.startswith("local")


def with_session_id(url: str, job: str) -> str:
    """One Connect session per job, kept across batches and runs: its Python workers stay warm."""
    if "session_id=" in url:
        return url
    sid = uuid.uuid5(uuid.NAMESPACE_URL, f"elasticity/{job}")
    base = url.rstrip("/")
    return f"{base}{'' if '/;' in base else '/'};session_id={sid}"


def resolve_target(config: JobConfig, source: str = "the job config") -> SparkTarget:
    if os.environ.get("SPARK_REMOTE"):
        return SparkTarget("connect", os.environ["SPARK_REMOTE"], "SPARK_REMOTE")
    if remote := config.get("spark.remote"):
        return SparkTarget("connect", remote, f"spark.remote in {source}")
    if master := config.get("spark.master"):
        return SparkTarget("master", check_master(master, f"spark.master in {source}"), f"spark.master in {source}")
    running = running_service(CONNECT_SERVER)
    if running:
        return SparkTarget("connect", f"sc://{running.address}", "the embedded Spark Connect server")
    return SparkTarget("master", "local[*]", "the default (no spark.remote, no spark.master, no embedded server)")
