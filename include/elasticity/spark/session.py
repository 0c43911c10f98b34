"""The SparkSession a batch runs on: local by default, the session spark-submit
set up (its --master wins), or Spark Connect (`spark.remote`). Only DataFrame
APIs that Spark Connect has are used (mapInArrow, joins, broadcast, cache)."""

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
        target = remote
    else:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: the config names the master
            builder = builder.master(config.get("spark.master") or "local[*]")
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        target = spark.conf.get("spark.master", "local")
    if not target.startswith("local"):
        ship_library(spark)
    return spark


def ship_library(spark: SparkSession) -> None:
    """Make `elasticity` importable on executors that do not have it installed (cluster mode)."""
    package = Path(__file__).resolve().parents[1]
    folder = tempfile.mkdtemp(prefix="elasticity-lib-")
    archive = shutil.make_archive(os.path.join(folder, "elasticity"), "zip", root_dir=package.parent, base_dir=package.name)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        spark.addArtifacts(archive, pyfile=True)
    else:
        spark.sparkContext.addPyFile(archive)
