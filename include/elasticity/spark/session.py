"""The SparkSession a batch runs on: local by default, a cluster through
spark-submit, or Spark Connect (`spark.remote`). Only DataFrame APIs that Spark
Connect has are used (mapInArrow, joins, broadcast, cache)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from ..config import JobConfig


def session(config: JobConfig, app_name: str | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name or f"elasticity-{config.job_name}")
    remote = config.get("spark.remote") or os.environ.get("SPARK_REMOTE")
    if remote:
        spark = builder.remote(remote).getOrCreate()
    else:
        existing = SparkSession.getActiveSession()
        if existing is not None:  # spark-submit or a test made one: use it as it is
            return existing
        builder = builder.master(config.get("spark.master") or "local[*]")
        builder = builder.config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "8")
        spark = builder.getOrCreate()
    ship_library(spark)
    return spark


def ship_library(spark: SparkSession) -> None:
    """Make `elasticity` importable on executors that do not have it installed (cluster mode)."""
    master = spark.conf.get("spark.master", "local") if not _is_connect(spark) else "connect"
    if master.startswith("local"):
        return
    package = Path(__file__).resolve().parents[1]
    folder = tempfile.mkdtemp(prefix="elasticity-lib-")
    archive = shutil.make_archive(os.path.join(folder, "elasticity"), "zip", root_dir=package.parent, base_dir=package.name)
    if _is_connect(spark):
        spark.addArtifacts(archive, pyfile=True)
    else:
        spark.sparkContext.addPyFile(archive)


def _is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
