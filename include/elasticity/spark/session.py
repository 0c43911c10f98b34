"""The SparkSession a batch runs on: a Spark Connect session (the warm default:
the embedded server, or `spark.remote`), the session spark-submit set up (its
--master wins), or a classic session on `spark.master`. Only DataFrame APIs
that Spark Connect has are used (range, mapInArrow, observe, repartition)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from elasticity.config import JobConfig
from elasticity.spark.jvm_options import jvm_options
from elasticity.spark.target import SparkTarget, resolve_target, with_session_id

if TYPE_CHECKING:
    from pyspark.sql.connect.client.retries import RetryPolicy


def session(
    config: JobConfig, app_name: str | None = None, target: SparkTarget | None = None, restart_wait_s: float = 0.0
) -> SparkSession:
    """`restart_wait_s`: how long a Connect server's closed port is waited for (a supervised driver starting again
    on its address); Airflow's task waits RESTART_WAIT_S, a command fails at once."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name or f"elasticity-{config.job_name}")
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its session, its master
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        target = SparkTarget("master", spark.conf.get("spark.master") or "local", "spark-submit")
    else:
        target = target or resolve_target(config)
        if target.kind == "connect":
            url = target.value if target.value.startswith("local") else with_session_id(target.value, config.job_name)
            with connect_errors(url):
                spark = _connect(url, restart_wait_s)
                if not target.is_local:
                    ship_library(spark)
            return spark
        check_master(target.value)
        spark = (
            builder.master(target.value)
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.extraJavaOptions", jvm_options())
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
    if not target.is_local:
        ship_library(spark)
    return spark


class MasterUnreachable(ConnectionError):
    """The Spark master does not answer: a run stops at once, naming it (not a minute later, in a Java trace)."""


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


class EngineUnreachable(ConnectionError):
    """The Spark Connect server (the driver) does not answer: a run stops within seconds, in one line naming
    it and what to run, instead of waiting in pyspark's retry loop for minutes."""


PROBE_TIMEOUT_S = 10.0  # a server that accepts TCP but has not spoken gRPC by then is hung
DOWN_PROBE_S = 3.0  # whether the server still answers, after another error
RESTART_WAIT_S = 15.0  # an Airflow attempt waits this long for a closed port to open (a driver starting again)
RETRY_BUDGET_S = 15.0  # an outage longer than this fails the run (pyspark's default retries for over 10 minutes)


def connect_address(url: str) -> str:
    """host:port of a Spark Connect URL (sc://host:port/;session_id=...)."""
    return url.removeprefix("sc://").split("/")[0].split(";")[0]


def unreachable(url: str, reason: str) -> EngineUnreachable:
    return EngineUnreachable(
        f"Spark Connect server sc://{connect_address(url)} unreachable ({reason}): start it (`elasticity cluster start` "
        "for the local cluster, `elasticity spark start` for the embedded server) or point spark.remote / spark_default "
        "at a running one"
    )


def probe_connect(url: str, timeout_s: float = PROBE_TIMEOUT_S, refused_wait_s: float = 0.0) -> None:
    """The server at `url` completes a gRPC (HTTP/2) handshake within `timeout_s`, or EngineUnreachable.
    A closed port fails after `refused_wait_s` (at once by default); a listener that never answers, after
    `timeout_s`."""
    import grpc  # type: ignore[import-untyped]
    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    host, _, port = connect_address(url).rpartition(":")
    deadline = time.monotonic() + refused_wait_s
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port or 15002)), timeout=timeout_s).close()
            break
        except ConnectionRefusedError as e:
            if time.monotonic() >= deadline:
                waited = f" for {refused_wait_s:.0f} s" if refused_wait_s else ""
                raise unreachable(url, f"{e}{waited}") from None
            time.sleep(0.5)
        except OSError as e:
            raise unreachable(url, str(e) or type(e).__name__) from None
    channel = DefaultChannelBuilder(url).toChannel()
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise unreachable(url, f"it accepts connections but does not answer gRPC within {timeout_s:.0f} s") from None
    finally:
        channel.close()


@contextlib.contextmanager
def connect_errors(url: str) -> Iterator[None]:
    """A Connect server that stops answering (killed, hung, restarting) ends the block with EngineUnreachable
    naming it, once the session's short retry policy gives up. Another error is told as that too when the server
    no longer answers (a commit that waited for the snapshots its lost executors had promised, say: the server
    is the cause); otherwise it passes through."""
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    lost = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")  # said once, below, with the address
        try:
            yield
        except SparkConnectGrpcException as e:
            if e.getGrpcStatusCode() not in lost:
                raise
            raise unreachable(url, f"{e.getGrpcStatusCode().name} after retrying for {RETRY_BUDGET_S:.0f} s") from e
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            if code not in lost:
                raise
            raise unreachable(url, f"{code.name} after retrying for {RETRY_BUDGET_S:.0f} s") from e
        except EngineUnreachable:
            raise
        except Exception as e:
            try:
                probe_connect(url, DOWN_PROBE_S)
            except EngineUnreachable as down:
                raise down from e
            raise


def engine_errors(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """connect_errors for a Connect session's server (nothing for a classic session)."""
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        return contextlib.nullcontext()
    return connect_errors(f"sc://{getattr(spark.client._builder, 'endpoint', '?')}")


def _connect(url: str, restart_wait_s: float = 0.0) -> SparkSession:
    """This process's Connect session for `url`: pyspark's getOrCreate returns the process's first session
    whatever the URL asks for (another server, or one that has stopped), so a session is reused only when it
    is the same server and session id. The server is probed first (a closed port waited for `restart_wait_s`),
    and the session's retry policy is short
    before its first call (pyspark's default, applied while building a session, retries for minutes)."""
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    if url.startswith("local"):  # pyspark starts a server of its own
        return ConnectSession.builder.remote(url).create()  # type: ignore[return-value]
    probe_connect(url, refused_wait_s=restart_wait_s)
    wanted = DefaultChannelBuilder(url)
    existing = ConnectSession.getActiveSession() or ConnectSession._get_default_session()
    if existing is not None:
        have = existing.client._builder
        if isinstance(have, DefaultChannelBuilder) and (have.endpoint, have.session_id) == (wanted.endpoint, wanted.session_id):
            return existing  # type: ignore[return-value]
    spark = ConnectSession.builder.channelBuilder(wanted).create()  # no options: no call to the server yet
    client = spark.client
    client.set_retry_policies([_outage_policy() if isinstance(p, DefaultPolicy) else p for p in client.get_retry_policies()])
    return spark  # type: ignore[return-value]


def _outage_policy(budget_s: float = RETRY_BUDGET_S) -> RetryPolicy:
    """pyspark's default policy, bounded per outage rather than per call: the retries of all the session's
    calls stop `budget_s` after the server first failed to answer, so a dead server fails the run, and the
    calls that follow (releasing the session at exit, say) fail at once; a blip shorter than that rides
    through. An outage ends when no call has failed for `budget_s`."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class OutagePolicy(DefaultPolicy):
        def __init__(self) -> None:
            super().__init__(max_retries=None, max_backoff=5000)
            self.failing_since = self.last_failure = -budget_s

        def can_retry(self, e: BaseException) -> bool:
            if not super().can_retry(e):
                return False
            now = time.monotonic()
            if now - self.last_failure > budget_s:
                self.failing_since = now
            self.last_failure = now
            return now - self.failing_since < budget_s

    return OutagePolicy()


def preload_connect() -> None:
    """Import the Spark Connect client ahead of time (it checks pandas and grpc: ~0.4 s), e.g. while a lag probe runs."""
    import pyspark.sql.connect.session  # noqa: F401


def ship_library(spark: SparkSession) -> None:
    """Make `elasticity` importable on executors that do not have it installed (cluster mode). The archive
    is named by its content: a warm Connect session keeps the version it has."""
    from elasticity.spark.shipping import library_archive, shipping_folder

    archive = library_archive(Path(__file__).resolve().parents[1], shipping_folder()).path
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.errors import PySparkException

        with contextlib.suppress(PySparkException):  # ARTIFACT_ALREADY_EXISTS: this very version is there
            spark.addArtifacts(str(archive), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(archive))
