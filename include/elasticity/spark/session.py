"""The SparkSession a batch runs on: a Spark Connect session (the warm default:
the embedded server, or `spark.remote`), the session spark-submit set up (its
--master wins), or a classic session on `spark.master`. Only DataFrame APIs
that Spark Connect has are used (range, mapInArrow, observe, repartition)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

from elasticity.config import ConfigError, JobConfig
from elasticity.spark.server import log4j_options
from elasticity.spark.target import SparkTarget, resolve_target, with_session_id


def session(config: JobConfig, app_name: str | None = None, target: SparkTarget | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name or f"elasticity-{config.job_name}")
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its session, its master
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        target = SparkTarget("master", spark.conf.get("spark.master") or "local", "spark-submit")
    else:
        target = target or resolve_target(config)
        if target.kind == "connect":
            url = target.value if target.value.startswith("local") else with_session_id(target.value, config.job_name)
            spark = _connect(url, app_name or f"elasticity-{config.job_name}")
            _fail_within_seconds(spark)
        else:
            check_master(target.value)
            spark = (
                builder.master(target.value)
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.extraJavaOptions", log4j_options())
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("WARN")
    if not target.is_local:
        ship_library(spark)
    return spark


class MasterUnreachable(ConnectionError):
    """The Spark master does not answer: a run stops at once, naming it (not a minute later, in a Java trace)."""


EXECUTOR_PATHS = ("job.output.path", "job.audit.path", "job.dead.letter.path")


def spark_master(spark: SparkSession) -> str:
    """The master the session's driver runs on (a Connect server's own, for a Connect session)."""
    return spark.conf.get("spark.master") or "local"


def check_master(master: str, timeout_s: float = 3.0) -> None:
    """A spark:// master answers on its port (each of a standby list), or MasterUnreachable names it."""
    if not master.startswith("spark://"):
        return
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except OSError as e:
            reason = e
    raise MasterUnreachable(
        f"Spark master {master} unreachable ({reason}): start it (`elasticity cluster start`) or point the job elsewhere"
    )


def check_shared_paths(config: JobConfig, master: str, blobs: bool) -> None:
    """On a cluster, executors write the sinks (and the blob store): a default under one host's
    ELASTICITY_HOME would split them over hosts, so an unset key stops the job, naming what to set."""
    if master.startswith("local"):
        return
    for key in (*EXECUTOR_PATHS, *(["blob.store.uri"] if blobs else [])):
        if not config.get(key):
            raise ConfigError(
                f"{key} is unset: on the cluster {master} executors write it, and its default lies under one host's "
                "ELASTICITY_HOME; set it to a location every executor reaches (e.g. s3://<bucket>/<job>/..., "
                "as `elasticity cluster status` prints, or a shared mount)"
            )


def _connect(url: str, app_name: str) -> SparkSession:
    """This process's Connect session for `url`: pyspark's getOrCreate returns the process's first session
    whatever the URL asks for (another server, or one that has stopped), so a session is reused only when it
    is the same server and session id."""
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    wanted = DefaultChannelBuilder(url)
    existing = ConnectSession.getActiveSession() or ConnectSession._get_default_session()
    if existing is not None:
        have = existing.client._builder
        if isinstance(have, DefaultChannelBuilder) and (have.endpoint, have.session_id) == (wanted.endpoint, wanted.session_id):
            return existing  # type: ignore[return-value]
    return ConnectSession.builder.remote(url).appName(app_name).create()  # type: ignore[return-value]


def _fail_within_seconds(spark: SparkSession) -> None:
    """pyspark's Connect client retries an unreachable server for at least 10 minutes; a batch whose driver died
    should fail within about 15 s instead (short blips still ride through), so that the next run can heal."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark.client
    client.set_retry_policies(
        [
            DefaultPolicy(max_retries=6, max_backoff=5000) if isinstance(p, DefaultPolicy) else p
            for p in client.get_retry_policies()
        ]
    )


def preload_connect() -> None:
    """Import the Spark Connect client ahead of time (it checks pandas and grpc: ~0.4 s), e.g. while a lag probe runs."""
    import pyspark.sql.connect.session  # noqa: F401


def ship_library(spark: SparkSession) -> None:
    """Make `elasticity` importable on executors that do not have it installed (cluster mode).
    The archive is named by its content: a warm Connect session keeps the version it has."""
    package = Path(__file__).resolve().parents[1]
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(package)).encode() + f.read_bytes())
    archive = Path(tempfile.mkdtemp(prefix="elasticity-lib-")) / f"elasticity-{digest.hexdigest()[:12]}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            z.write(f, f.relative_to(package.parent))
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.errors import PySparkException

        with contextlib.suppress(PySparkException):  # ARTIFACT_ALREADY_EXISTS: this very version is there
            spark.addArtifacts(str(archive), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(archive))
